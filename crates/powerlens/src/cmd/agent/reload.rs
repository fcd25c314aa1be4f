//! The web config followed while the agent runs, as exporter-toolkit does (it reads the
//! file again for every request): a renewed certificate, a changed password or a new user
//! take effect without a restart. The files it was read from are looked at on the next
//! connection at most once a second (their modification time, size and inode: a file
//! renamed into place counts); a change is loaded whole or not at all. One that no longer
//! loads (a key that is not the certificate's, written before the certificate) is refused
//! with a warning and the agent serves with what it had, until the files change again.
//! Turning TLS on or off takes a restart: the clients' scheme would change under them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::security::Security;

/// How often the files are looked at, at the most.
const CHECK_EVERY: Duration = Duration::from_secs(1);

pub struct WebConfigWatch {
    /// `None` without `--web-config`: nothing to follow.
    path: Option<PathBuf>,
    addr: SocketAddr,
    state: Mutex<Watched>,
}

struct Watched {
    security: Arc<Security>,
    stamps: Vec<Option<Stamp>>,
    checked: Instant,
}

/// What says a file changed; `None` for a file that is not there (removed, or mid-rename).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: SystemTime,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok()?,
        len: m.len(),
        inode: m.ino(),
    })
}

fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files.iter().map(|f| stamp(f)).collect()
}

impl WebConfigWatch {
    /// Follows `path` (the `--web-config` the agent started with, read into `security`)
    /// for the server on `addr`.
    pub fn new(path: Option<PathBuf>, addr: SocketAddr, security: Security) -> Self {
        let state = Watched {
            stamps: stamps(&security.files),
            security: Arc::new(security),
            checked: Instant::now(),
        };
        WebConfigWatch {
            path,
            addr,
            state: Mutex::new(state),
        }
    }

    /// What to serve the next connection with: the web config as its files are now.
    pub fn current(&self) -> Arc<Security> {
        let mut w = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(path) = &self.path {
            if w.checked.elapsed() >= CHECK_EVERY {
                w.checked = Instant::now();
                let now = stamps(&w.security.files);
                if now != w.stamps {
                    w.stamps = now;
                    self.reload(path, &mut w);
                }
            }
        }
        w.security.clone()
    }

    fn reload(&self, path: &Path, w: &mut Watched) {
        let keeping = "the agent serves with the web config as it was until its files change again";
        let security = match Security::load(path) {
            Ok(s) if s.tls.is_some() != w.security.tls.is_some() => {
                eprintln!(
                    "powerlens: warning: --web-config {}: TLS turned {} while serving: restart the agent for that (clients would have to change scheme); {keeping}",
                    path.display(),
                    if s.tls.is_some() { "on" } else { "off" }
                );
                return;
            }
            Ok(s) => s,
            Err(e) => {
                eprintln!("powerlens: warning: {e:#}; {keeping}");
                return;
            }
        };
        eprintln!(
            "powerlens: --web-config {} changed: serving with {} from now on",
            path.display(),
            security.describe()
        );
        if let Some(line) = security.exposure(self.addr) {
            eprintln!("powerlens: {line}");
        }
        // The files of the new config (a renamed certificate is followed from now on).
        w.stamps = stamps(&security.files);
        w.security = Arc::new(security);
    }
}
