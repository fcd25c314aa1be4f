//! The powerlens agent as a library: a live session's series served to Prometheus. The
//! exposition (`prometheus`), the HTTP/1.x it speaks (`http`), the web config of
//! exporter-toolkit's format (`web_config`) with the TLS and basic auth it asks for, the
//! reload of that file while serving, and the server. The `powerlens agent` command parses
//! its arguments into [`Options`], runs the live session and prints what this crate tells it.
//!
//! The public face: [`Listening::bind`] (the web config checked, the address bound),
//! [`Listening::serve`] (the server started), [`Agent::close_interval`] (each interval of
//! the session); typed errors ([`Error`]) that name no command-line flag.

mod agent;
mod basic_auth;
mod error;
pub mod http;
mod paths;
pub mod prometheus;
mod reload;
mod security;
mod server;
mod state;
mod tls;
pub mod web_config;

pub use agent::{Agent, Listening, Options};
pub use error::{Error, TlsError, WebConfigProblem};
pub use reload::Reload;
pub use security::Exposure;
