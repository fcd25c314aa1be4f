//! The powerlens results database (SQLite). The schema is versioned and documented in
//! docs/FORMAT.md.
