//! Tool argument DSL lowering, JSON Schema validation and the repair catalogue.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
