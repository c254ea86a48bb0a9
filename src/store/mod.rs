//! Durable session state in SQLite: the mailbox, later the agent registry and tasks.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
