//! The paths the agent serves: what the server routes and what the web config may exclude
//! from authentication, one list for both.

/// The paths the agent serves.
pub const PATHS: [&str; 3] = ["/", "/metrics", "/healthz"];
