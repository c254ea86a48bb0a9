//! Resource addresses: grammar, canonical encoding, families, operation matrix, containment.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
