//! Render-data blocks: scanning, the safe printed-Lisp reader and writer, scrubbing.
//!
//! Empty until its issue lands; declared now so the layout shows where it goes.
