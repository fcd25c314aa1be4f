//! What the tests of `powerlens agent` share: ports, plain HTTP requests, a real Prometheus
//! server (Debian's `prometheus`) and ending child processes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP GET on loopback: (status, body).
pub fn get(port: u16, path: &str, accept: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    // Prometheus keeps connections open unless told: the body ends with the connection.
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{accept}\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// A child process that is killed when the test ends, however it ends (a failed
/// assertion must not leave an agent, a Prometheus or a spinner running).
pub struct Reaped(Option<Child>);

impl Reaped {
    pub fn new(child: Child) -> Reaped {
        Reaped(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    pub fn into_inner(mut self) -> Child {
        self.0.take().unwrap()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `powerlens agent` on loopback `port`, one interval a second, with `POWERLENS_SYSFS_ROOT` at
/// `sysfs` and `extra` arguments; stderr piped (see [`finish`]).
pub fn agent(sysfs: &Path, port: u16, extra: &[&str]) -> Reaped {
    Reaped::new(
        Command::new(env!("CARGO_BIN_EXE_powerlens"))
            .env("POWERLENS_SYSFS_ROOT", sysfs)
            .env_remove("POWERLENS_PROCFS_ROOT")
            .args([
                "agent",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--interval",
                "1s",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// An executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Ends an agent with SIGTERM and returns its stderr.
pub fn finish(agent: Reaped) -> String {
    let child = agent.into_inner();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A Prometheus server on loopback scraping every second, its data in `dir`; killed when
/// dropped.
pub struct Prometheus {
    child: Child,
    pub port: u16,
}

impl Prometheus {
    /// `None` (after saying so) when Debian's `prometheus` is not installed.
    pub fn find() -> Option<PathBuf> {
        let found = which("prometheus");
        if found.is_none() {
            powerlens_sys::skip_test!(
                "no prometheus binary (Debian package prometheus; scripts/test.sh installs it)"
            );
        }
        found
    }

    /// Starts `binary` with `scrape_configs` (YAML list items, indented by two spaces).
    pub fn start(binary: &Path, dir: &Path, scrape_configs: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{scrape_configs}"),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Prometheus { child, port }
    }

    /// The active targets of `/api/v1/targets`, each as Prometheus describes it (`labels`,
    /// `health`, `lastError`…); empty while Prometheus is starting.
    pub fn targets(&self) -> Vec<serde_json::Value> {
        get(self.port, "/api/v1/targets", None)
            .ok()
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
            .and_then(|v| v["data"]["activeTargets"].as_array().cloned())
            .unwrap_or_default()
    }

    /// Waits until every target of `jobs` has been scraped (health `up` or `down`, not
    /// `unknown`), at most `limit`; returns the targets by job.
    pub fn scraped(&self, jobs: &[&str], limit: Duration) -> Vec<(String, serde_json::Value)> {
        let start = Instant::now();
        loop {
            let targets: Vec<(String, serde_json::Value)> = self
                .targets()
                .into_iter()
                .map(|t| (t["labels"]["job"].as_str().unwrap_or("").to_string(), t))
                .filter(|(job, _)| jobs.contains(&job.as_str()))
                .collect();
            let done = jobs.iter().all(|j| {
                targets
                    .iter()
                    .any(|(job, t)| job == j && t["health"] != "unknown")
            });
            if done || start.elapsed() > limit {
                return targets;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
