//! Statistics placeholder
