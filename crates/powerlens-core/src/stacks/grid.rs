//! The per-function and per-stack grid (filled in below).
