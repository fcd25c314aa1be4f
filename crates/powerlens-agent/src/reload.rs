//! The web config followed while the agent runs, as exporter-toolkit does (it reads the
//! file again for every request): a renewed certificate, a changed password or a new user
//! take effect without a restart. The files it was read from are looked at on the next
//! connection at most once a second (their modification time, size and inode: a file
//! renamed into place counts); a change is loaded whole or not at all. One that no longer
//! loads (a key that is not the certificate's, written before the certificate) is refused
//! with a warning and the agent serves with what it had, until the files change again.
//! Turning TLS on or off takes a restart: the clients' scheme would change under them.
//! What each change came to is handed to the caller ([`Reload`]) to tell.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::error::Error;
use crate::security::{Exposure, Security};

/// How often the files are looked at, at the most.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What a change of the web config's files came to. In every case but `Loaded` the agent
/// serves with the web config as it was until its files change again.
#[derive(Debug)]
pub enum Reload<'a> {
    /// Loaded whole: the agent serves with `protection` ("TLS and basic auth (2 users)")
    /// from now on, as exposed as `exposure` says.
    Loaded {
        path: &'a Path,
        protection: String,
        exposure: Option<Exposure>,
    },
    /// TLS turned on (`on`) or off: that takes a restart (clients would change scheme).
    TlsTurned { path: &'a Path, on: bool },
    /// The files no longer load.
    Refused(Error),
}

/// Called with what each change came to, from the server's threads.
pub type OnReload = Box<dyn Fn(Reload<'_>) + Send + Sync>;

pub struct WebConfigWatch {
    /// `None` without a web config: nothing to follow.
    path: Option<PathBuf>,
    addr: SocketAddr,
    state: Mutex<Watched>,
    on_reload: OnReload,
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
    /// Follows `path` (the web config the agent started with, read into `security`) for
    /// the server on `addr`.
    pub fn new(
        path: Option<PathBuf>,
        addr: SocketAddr,
        security: Security,
        on_reload: OnReload,
    ) -> Self {
        let state = Watched {
            stamps: stamps(&security.files),
            security: Arc::new(security),
            checked: Instant::now(),
        };
        WebConfigWatch {
            path,
            addr,
            state: Mutex::new(state),
            on_reload,
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
        let security = match Security::load(path) {
            Ok(s) if s.tls.is_some() != w.security.tls.is_some() => {
                (self.on_reload)(Reload::TlsTurned {
                    path,
                    on: s.tls.is_some(),
                });
                return;
            }
            Ok(s) => s,
            Err(e) => {
                (self.on_reload)(Reload::Refused(e));
                return;
            }
        };
        (self.on_reload)(Reload::Loaded {
            path,
            protection: security.describe(),
            exposure: security.exposure(self.addr),
        });
        // The files of the new config (a renamed certificate is followed from now on).
        w.stamps = stamps(&security.files);
        w.security = Arc::new(security);
    }
}
