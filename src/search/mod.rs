//! Glob and Grep over the ignore, globset and grep-searcher crates, with push-style sinks.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
