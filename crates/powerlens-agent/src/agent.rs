//! An agent from start to stop: the web config read and the address bound before anything
//! else, so that a mistake is told at once and before the tracepoints are opened; then the
//! server started on the state each closed interval leaves.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use powerlens_core::monitor::{Monitor, MonitorConfig};
use powerlens_record::live::{LiveInterval, Mode};

use crate::error::Error;
use crate::reload::{Reload, WebConfigWatch};
use crate::security::{Exposure, Security};
use crate::server;
use crate::state::{build_info_mode, State};

/// How the agent keeps its series.
#[derive(Debug, Clone)]
pub struct Options {
    pub monitor: MonitorConfig,
    /// Per-process series; per-cgroup series only without.
    pub per_process: bool,
    /// The live session's interval (for /healthz: a session three intervals late is stuck).
    pub interval: Duration,
    /// The version powerlens_build_info shows: the program's, not this library's.
    pub version: &'static str,
    /// How the session's events come from the kernel (powerlens_build_info's
    /// `tracing_path`: `bpf`, `perf_ring`, `none`).
    pub tracing_path: &'static str,
}

/// The web config read and checked, the address bound; nothing served yet.
pub struct Listening {
    listener: TcpListener,
    addr: SocketAddr,
    web_config: Option<PathBuf>,
    security: Security,
}

impl Listening {
    /// Reads and checks `web_config` (TLS, basic auth: without one, plain HTTP open to
    /// whoever reaches `addr`), then binds `addr`.
    pub fn bind(addr: SocketAddr, web_config: Option<&Path>) -> Result<Listening, Error> {
        // Read and checked before anything else: a bad file stops the agent with its reason.
        let security = match web_config {
            Some(path) => Security::load(path)?,
            None => Security::default(),
        };
        let listener = TcpListener::bind(addr).map_err(|error| Error::Listen { addr, error })?;
        Ok(Listening {
            listener,
            addr,
            web_config: web_config.map(Path::to_path_buf),
            security,
        })
    }

    /// How exposed the address is; `None` on loopback.
    pub fn exposure(&self) -> Option<Exposure> {
        self.security.exposure(self.addr)
    }

    /// `https` with TLS, `http` without.
    pub fn scheme(&self) -> &'static str {
        self.security.scheme()
    }

    /// What protects the agent ("TLS and basic auth (2 users)"), when it has a web config.
    pub fn protection(&self) -> Option<String> {
        self.web_config.as_ref().map(|_| self.security.describe())
    }

    /// Starts serving the series of a live session in `mode`, empty until the first
    /// [`Agent::close_interval`]. `on_reload` is told what each change of the web config
    /// came to. The program should ignore SIGPIPE (a library does not set a process-wide
    /// disposition): otherwise a write to a client that has gone ends it.
    pub fn serve(
        self,
        mode: &Mode,
        options: Options,
        on_reload: impl Fn(Reload<'_>) + Send + Sync + 'static,
    ) -> Result<Agent, Error> {
        let (mode, trace_duty, mode_reason) = build_info_mode(mode);
        let traced = mode != "reduced";
        let state = Arc::new(Mutex::new(State {
            monitor: Monitor::new(options.monitor),
            traced,
            mode,
            trace_duty,
            per_process: options.per_process,
            mode_reason,
            idle_states: Vec::new(),
            lost_records: traced.then_some(0),
            interval: options.interval,
            version: options.version,
            tracing_path: options.tracing_path,
            last_close: Instant::now(),
        }));
        let watch = WebConfigWatch::new(
            self.web_config,
            self.addr,
            self.security,
            Box::new(on_reload),
        );
        server::start(self.listener, state.clone(), Arc::new(watch)).map_err(Error::Server)?;
        Ok(Agent { state })
    }
}

/// A serving agent: each closed interval updates what the next scrape shows.
pub struct Agent {
    state: Arc<Mutex<State>>,
}

impl Agent {
    /// Adds an interval of the live session to the series.
    pub fn close_interval(&self, interval: LiveInterval) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.monitor.close_interval(interval.input);
        s.idle_states = interval
            .idle_states
            .into_iter()
            .map(|i| (i.cpu, i.state, i.seconds))
            .collect();
        if s.traced {
            s.lost_records = Some(interval.lost_records);
        }
        s.last_close = Instant::now();
    }
}
