//! Table placeholder
