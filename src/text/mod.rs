//! Text utilities: head/tail previews, Unicode normalisation, line paging.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
