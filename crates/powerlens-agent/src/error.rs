//! What stops the agent: a web config it cannot use, an address it cannot listen on, a
//! server thread that would not start. Each message names the file, key or address and the
//! fix in the agent's own terms; the command line adds the flag it came from. A message
//! carries its cause's text, so the causes are fields, not a `source()` chain that an
//! `{:#}` would print twice.

use std::net::SocketAddr;
use std::path::PathBuf;

use rustls::pki_types::pem;

use crate::paths::PATHS;
use crate::web_config::WebConfigError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The web config at `path` cannot be used (read at start, or again after a change).
    #[error("{}: {problem}", path.display())]
    WebConfig {
        path: PathBuf,
        problem: WebConfigProblem,
    },
    /// `bind` failed; the kind of `error` says why (in use, a privileged port…).
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// The thread that accepts connections could not be started.
    #[error("starting the HTTP server: {0}")]
    Server(std::io::Error),
}

/// Why a web config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigProblem {
    /// The file could not be read.
    #[error("{0}")]
    Read(std::io::Error),
    /// Larger than [`crate::web_config::MAX_WEB_CONFIG`].
    #[error("{0} bytes: a web config is a few keys (see docs/AGENT.md#security)")]
    TooLarge(u64),
    #[error("{0}")]
    Parse(WebConfigError),
    /// `auth_excluded_paths` names a path the agent does not serve.
    #[error("auth_excluded_paths: the agent serves no {path} (it serves {}): remove it", PATHS.join(", "))]
    NotServed { path: String },
    #[error("{0}")]
    Tls(TlsError),
    /// The kernel gave no random bytes for `what`.
    #[error("no randomness from the kernel for {0}")]
    NoRandomness(&'static str),
    #[error("making the decoy bcrypt hash: {0}")]
    DecoyHash(bcrypt::BcryptError),
}

/// Why `tls_server_config` cannot be used. `place` is where the PEM came from: the key and
/// the file, or the key of an inline PEM.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls_server_config: min_version/max_version: {0}")]
    Versions(rustls::Error),
    #[error("tls_server_config: client_ca_file: {0}: give the PEM of the CA that signs the clients' certificates")]
    ClientCa(rustls::Error),
    #[error("tls_server_config: client_ca_file: {0}")]
    ClientVerifier(rustls::server::VerifierBuilderError),
    #[error("tls_server_config: key_file is not the private key of cert_file: give the key the certificate was made for")]
    KeyMismatch,
    #[error("tls_server_config: cert_file/key_file: {0}")]
    CertificateAndKey(rustls::Error),
    #[error("{place}: {error}: check the path (a relative path is relative to the web config's directory)")]
    ReadPem {
        place: String,
        error: std::io::Error,
    },
    #[error("{place}: not PEM: {error}")]
    NotPem { place: String, error: pem::Error },
    #[error("{place}: no certificate in it: give a PEM file with -----BEGIN CERTIFICATE-----")]
    NoCertificate { place: String },
    #[error("{place}: no private key in it ({error}): give the PEM key (PKCS#8, RSA or EC) of cert_file")]
    NoPrivateKey { place: String, error: pem::Error },
}

impl From<TlsError> for WebConfigProblem {
    fn from(e: TlsError) -> Self {
        WebConfigProblem::Tls(e)
    }
}
