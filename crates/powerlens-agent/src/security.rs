//! What the agent's web config asks of its server: TLS, basic auth, and the paths left
//! open. Read and checked at start (certificates, keys, hashes), so that a mistake stops
//! the agent with one line naming the key and the fix rather than failing scrapes; read
//! again when one of its files changes (`reload.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::basic_auth::BasicAuth;
use crate::error::{Error, WebConfigProblem};
use crate::paths::PATHS;
use crate::tls;
use crate::web_config::{parse_web_config, ClientAuth, Pem, WebConfig, MAX_WEB_CONFIG};

#[derive(Default)]
pub struct Security {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub basic_auth: Option<BasicAuth>,
    /// Client certificates are required and verified at the handshake.
    pub client_certificates: bool,
    /// Paths served without basic auth.
    pub open_paths: Vec<String>,
    /// The files it was read from: the web config, and the certificate, key and CA files
    /// it names.
    pub files: Vec<PathBuf>,
}

impl Security {
    /// Reads and checks a web config file.
    pub fn load(path: &Path) -> Result<Security, Error> {
        let fail = |problem: WebConfigProblem| Error::WebConfig {
            path: path.to_path_buf(),
            problem,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| fail(WebConfigProblem::Read(e)))?
            .len();
        if size > MAX_WEB_CONFIG as u64 {
            return Err(fail(WebConfigProblem::TooLarge(size)));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(WebConfigProblem::Read(e)))?;
        let config = parse_web_config(&text).map_err(|e| fail(WebConfigProblem::Parse(e)))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut files = vec![path.to_path_buf()];
        if let Some(t) = &config.tls {
            for pem in [Some(&t.cert), Some(&t.key), t.client_ca.as_ref()]
                .into_iter()
                .flatten()
            {
                if let Pem::File(f) = pem {
                    files.push(dir.join(f));
                }
            }
        }
        let mut security = Security::from_config(config, dir).map_err(fail)?;
        security.files = files;
        Ok(security)
    }

    fn from_config(config: WebConfig, dir: &Path) -> Result<Security, WebConfigProblem> {
        for p in &config.auth_excluded_paths {
            if !PATHS.contains(&p.as_str()) {
                return Err(WebConfigProblem::NotServed { path: p.clone() });
            }
        }
        let tls = config
            .tls
            .as_ref()
            .map(|t| tls::server_config(t, dir))
            .transpose()?;
        let client_certificates = config
            .tls
            .as_ref()
            .is_some_and(|t| t.client_auth == ClientAuth::RequireAndVerify);
        let basic_auth = if config.basic_auth_users.is_empty() {
            None
        } else {
            Some(BasicAuth::new(config.basic_auth_users)?)
        };
        Ok(Security {
            tls,
            basic_auth,
            client_certificates,
            open_paths: config.auth_excluded_paths,
            files: Vec::new(),
        })
    }

    /// Whether a request for `path` with this `Authorization` header is let in.
    pub fn allows(&self, path: &str, authorization: Option<&str>) -> bool {
        match &self.basic_auth {
            None => true,
            Some(_) if self.open_paths.iter().any(|p| p == path) => true,
            Some(auth) => auth.allows(authorization),
        }
    }

    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// What protects the agent, as a phrase ("TLS and basic auth (2 users)").
    pub fn describe(&self) -> String {
        let mut auth = Vec::new();
        if let Some(a) = &self.basic_auth {
            let n = a.users();
            auth.push(format!(
                "basic auth ({n} user{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        if self.client_certificates {
            auth.push("client certificates".to_string());
        }
        match (self.tls.is_some(), auth.is_empty()) {
            (true, true) => "TLS and no authentication".into(),
            (true, false) => format!("TLS and {}", auth.join(" and ")),
            (false, true) => "no TLS and no authentication".into(),
            (false, false) => format!("{} over plain HTTP", auth.join(" and ")),
        }
    }

    /// How exposed an agent on `addr` is, for the line printed at start and after a
    /// reload. `None` on loopback.
    pub fn exposure(&self, addr: SocketAddr) -> Option<Exposure> {
        if addr.ip().is_loopback() {
            return None;
        }
        let authenticated = self.basic_auth.is_some() || self.client_certificates;
        Some(match (self.tls.is_some(), authenticated) {
            (true, true) => Exposure::Protected {
                addr,
                protection: self.describe(),
                open_paths: if self.basic_auth.is_some() {
                    self.open_paths.clone()
                } else {
                    Vec::new()
                },
            },
            (false, false) => Exposure::Unprotected { addr },
            (true, false) => Exposure::Unauthenticated { addr },
            (false, true) => Exposure::Unencrypted {
                addr,
                protection: self.describe(),
            },
        })
    }
}

/// An address other hosts reach, and what protects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// TLS and authentication: `protection` as a phrase ("TLS and basic auth (2 users)"),
    /// and the paths basic auth leaves open.
    Protected {
        addr: SocketAddr,
        protection: String,
        open_paths: Vec<String>,
    },
    /// Neither TLS nor authentication: anyone who reaches it reads the metrics.
    Unprotected { addr: SocketAddr },
    /// TLS without authentication.
    Unauthenticated { addr: SocketAddr },
    /// Authentication over plain HTTP: passwords cross the network readable.
    Unencrypted {
        addr: SocketAddr,
        protection: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TlsError;

    /// Issue 31: a web config the agent cannot use is a typed error whose message names the
    /// file, the key and the fix, and no flag of the command line (the command adds it).
    #[test]
    fn load_errors_are_typed_and_name_no_flag() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let paths = write("paths.yml", "auth_excluded_paths: [/debug]\n");
        let cert = write(
            "cert.yml",
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: agent.key\n",
        );
        let large = write("large.yml", &"#".repeat(MAX_WEB_CONFIG + 1));
        let cases = [
            (
                &paths,
                format!(
                    "{}: auth_excluded_paths: the agent serves no /debug (it serves /, /metrics, /healthz): remove it",
                    paths.display()
                ),
            ),
            (
                &cert,
                format!(
                    "{}: tls_server_config: cert_file {}: No such file or directory (os error 2): check the path (a relative path is relative to the web config's directory)",
                    cert.display(),
                    dir.path().join("missing.crt").display()
                ),
            ),
            (
                &large,
                format!(
                    "{}: {} bytes: a web config is a few keys (see docs/AGENT.md#security)",
                    large.display(),
                    MAX_WEB_CONFIG + 1
                ),
            ),
        ];
        for (path, expected) in &cases {
            let e = Security::load(path).err().expect("refused");
            let message = e.to_string();
            assert_eq!(&message, expected);
            assert!(!message.contains("--"), "a flag named: {message}");
        }
        assert!(matches!(
            Security::load(&paths),
            Err(Error::WebConfig {
                problem: WebConfigProblem::NotServed { .. },
                ..
            })
        ));
        assert!(matches!(
            Security::load(&cert),
            Err(Error::WebConfig {
                problem: WebConfigProblem::Tls(TlsError::ReadPem { .. }),
                ..
            })
        ));
    }
}
