//! What `--web-config FILE` asks of the agent's server: TLS, basic auth, and the paths left
//! open. Read and checked at start (certificates, keys, hashes), so that a mistake stops
//! the agent with one line naming the key and the fix rather than failing scrapes; read
//! again when one of its files changes (`reload.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use powerlens_report::web_config::{parse_web_config, ClientAuth, Pem, WebConfig, MAX_WEB_CONFIG};

use super::basic_auth::BasicAuth;
use super::paths::PATHS;
use super::tls;

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
    pub fn load(path: &Path) -> anyhow::Result<Security> {
        let fail =
            |e: &dyn std::fmt::Display| anyhow::anyhow!("--web-config {}: {e}", path.display());
        let size = std::fs::metadata(path).map_err(|e| fail(&e))?.len();
        if size > MAX_WEB_CONFIG as u64 {
            return Err(fail(&format!(
                "{size} bytes: a web config is a few keys (see docs/AGENT.md#security)"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(&e))?;
        let config = parse_web_config(&text).map_err(|e| fail(&e))?;
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
        let mut security =
            Security::from_config(config, dir).map_err(|e| fail(&format!("{e:#}")))?;
        security.files = files;
        Ok(security)
    }

    fn from_config(config: WebConfig, dir: &Path) -> anyhow::Result<Security> {
        for p in &config.auth_excluded_paths {
            if !PATHS.contains(&p.as_str()) {
                anyhow::bail!(
                    "auth_excluded_paths: the agent serves no {p} (it serves {}): remove it",
                    PATHS.join(", ")
                );
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

    /// The line printed at start for an address other hosts reach: a warning naming what
    /// is missing, or a note saying what protects it. `None` on loopback.
    pub fn exposure(&self, addr: SocketAddr) -> Option<String> {
        if addr.ip().is_loopback() {
            return None;
        }
        let authenticated = self.basic_auth.is_some() || self.client_certificates;
        let open = if self.basic_auth.is_some() && !self.open_paths.is_empty() {
            format!(" ({} open)", self.open_paths.join(", "))
        } else {
            String::new()
        };
        Some(match (self.tls.is_some(), authenticated) {
            (true, true) => format!(
                "serving on {addr}, reachable from other hosts: {}{open}",
                self.describe()
            ),
            (false, false) => format!(
                "warning: serving on {addr}, reachable from other hosts, without TLS or authentication: anyone who reaches it reads the metrics; give --web-config FILE with tls_server_config and basic_auth_users (docs/AGENT.md#security)"
            ),
            (true, false) => format!(
                "warning: serving on {addr}, reachable from other hosts, over TLS but without authentication: anyone who reaches it reads the metrics; add basic_auth_users or client certificates to the web config (docs/AGENT.md#security)"
            ),
            (false, true) => format!(
                "warning: serving on {addr}, reachable from other hosts, with {}: passwords cross the network readable by anyone on the path; add tls_server_config to the web config (docs/AGENT.md#security)",
                self.describe()
            ),
        })
    }
}
