//! The agent's HTTP server: one thread accepts, each connection gets a thread of its own
//! with read and write deadlines, so a client that connects and never reads (or never
//! sends) holds one thread for a few seconds and nobody else. At most
//! [`MAX_CONNECTIONS`] at once; beyond that a client gets 503 at once. With a web config,
//! over TLS and behind basic auth (`security.rs`); the deadline covers the TLS handshake.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http::{parse_request, response, HeadError, Request};
use crate::prometheus::{render, AgentMetrics, Format};
use crate::reload::WebConfigWatch;
use crate::security::Security;
use crate::state::State;
use crate::tls::{self, TlsStream};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client has to send its request head, and to take the response.
const DEADLINE: Duration = Duration::from_secs(5);

pub fn start(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    security: Arc<WebConfigWatch>,
) -> std::io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("powerlens-http".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    active.fetch_sub(1, Ordering::SeqCst);
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
                    let _ = (&stream).write_all(&response(
                        503,
                        "text/plain; charset=utf-8",
                        &[("Retry-After", "1")],
                        b"too many connections\n",
                    ));
                    continue;
                }
                let (state, security, done) = (state.clone(), security.clone(), active.clone());
                let spawned = std::thread::Builder::new()
                    .name("powerlens-conn".into())
                    .spawn(move || {
                        connection(stream, &state, &security.current());
                        done.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // No thread: the connection was dropped with the closure, and the
                    // place it took is free again.
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })?;
    Ok(())
}

/// A connection's byte stream (plain or TLS) and its socket, whose timeouts carry the
/// deadline.
trait Connection: Read + Write {
    fn socket(&self) -> &TcpStream;
}

impl Connection for TcpStream {
    fn socket(&self) -> &TcpStream {
        self
    }
}

impl Connection for TlsStream {
    fn socket(&self) -> &TcpStream {
        &self.sock
    }
}

/// One connection: one request, one response, closed.
fn connection(mut stream: TcpStream, state: &Mutex<State>, security: &Security) {
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let deadline = Instant::now() + DEADLINE;
    let Some(config) = &security.tls else {
        serve(&mut stream, deadline, state, security);
        return;
    };
    // A plain-HTTP request on the TLS port gets a plain answer that says so, as Go's
    // servers (node_exporter) give, instead of a handshake error the client cannot read.
    let _ = stream.set_read_timeout(Some(DEADLINE));
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) if tls::opens_tls(first[0]) => {}
        Ok(1) if first[0].is_ascii_uppercase() => {
            // The head is read first: closing on unread bytes would reset the connection
            // and could take the answer with it.
            if read_request(&mut stream, deadline).is_some() {
                let _ = stream.write_all(&text(
                    400,
                    "this agent serves HTTPS: scrape https://, not http:// (Prometheus: scheme: https)\n",
                ));
            }
            return;
        }
        _ => return,
    }
    let Ok(mut tls) = TlsStream::new(config.clone(), stream) else {
        return;
    };
    serve(&mut tls, deadline, state, security);
    tls.close();
}

fn serve(conn: &mut impl Connection, deadline: Instant, state: &Mutex<State>, security: &Security) {
    let Some(request) = read_request(conn, deadline) else {
        return;
    };
    let reply = if security.allows(&request.path, request.authorization.as_deref()) {
        route(&request, state)
    } else {
        response(
            401,
            "text/plain; charset=utf-8",
            &[("WWW-Authenticate", "Basic realm=\"powerlens\"")],
            b"unauthorized: give the user and password of a basic_auth_users entry of the agent's web config\n",
        )
    };
    let reply = if request.method == "HEAD" {
        let end = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(reply.len(), |i| i + 4);
        reply[..end].to_vec()
    } else {
        reply
    };
    let _ = conn.write_all(&reply);
    let _ = conn.flush();
}

/// Reads a request head before `deadline`; `None` when it did not come (the client was
/// answered already if it can be).
fn read_request(conn: &mut impl Connection, deadline: Instant) -> Option<Request> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = conn.write_all(&text(408, "the request head did not arrive in time\n"));
            return None;
        }
        let _ = conn.socket().set_read_timeout(Some(left));
        match conn.read(&mut buf) {
            Ok(0) => return None,
            // The parser refuses a head past MAX_HEAD: it never grows further.
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let _ = conn.write_all(&text(408, "the request head did not arrive in time\n"));
                return None;
            }
            // A reset, or a TLS handshake that failed (the client was sent the alert).
            Err(_) => return None,
        }
        match parse_request(&head) {
            Ok(r) => return Some(r),
            Err(HeadError::Incomplete) => continue,
            Err(e) => {
                let _ =
                    conn.write_all(&text(e.status(), "not an HTTP request this agent serves\n"));
                return None;
            }
        }
    }
}

fn route(request: &Request, state: &Mutex<State>) -> Vec<u8> {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET" | "HEAD", "/metrics") => {
            let format = Format::negotiate(request.accept.as_deref());
            let body = metrics(state, format);
            response(200, format.content_type(), &[], body.as_bytes())
        }
        ("GET" | "HEAD", "/healthz") => health(state),
        ("GET" | "HEAD", "/") => response(200, "text/html; charset=utf-8", &[], INDEX.as_bytes()),
        ("GET" | "HEAD", _) => text(
            404,
            "not found: the agent serves /metrics, /healthz and /\n",
        ),
        _ => {
            let mut r = text(405, "only GET and HEAD\n");
            // `Allow` is required with a 405.
            let at = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
            r.splice(at..at, b"\r\nAllow: GET, HEAD".iter().copied());
            r
        }
    }
}

fn text(status: u16, body: &str) -> Vec<u8> {
    response(status, "text/plain; charset=utf-8", &[], body.as_bytes())
}

const INDEX: &str =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>powerlens agent</title></head>\
<body><h1>powerlens agent</h1><p><a href=\"/metrics\">/metrics</a>: Prometheus metrics \
(energy per node, idle, process and cgroup; CPU time; wake-ups; idle states)</p>\
<p><a href=\"/healthz\">/healthz</a>: whether intervals are being closed</p></body></html>\n";

/// OK while intervals close on time; 503 when the last one is more than three intervals
/// old (the session is stuck).
fn health(state: &Mutex<State>) -> Vec<u8> {
    let s = state.lock().unwrap_or_else(|p| p.into_inner());
    let age = s.last_close.elapsed();
    if age <= s.interval * 3 + Duration::from_secs(1) {
        text(200, "ok\n")
    } else {
        text(
            503,
            &format!(
                "stale: no interval closed for {:.1} s (interval {:?})\n",
                age.as_secs_f64(),
                s.interval
            ),
        )
    }
}

fn metrics(state: &Mutex<State>, format: Format) -> String {
    let (self_cpu_s, self_resident_bytes) = self_usage();
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    let text = render(
        &AgentMetrics {
            monitor: &s.monitor,
            traced: s.traced,
            per_process: s.per_process,
            mode: s.mode,
            trace_duty: s.trace_duty,
            mode_reason: &s.mode_reason,
            version: s.version,
            tracing_path: s.tracing_path,
            idle_states: &s.idle_states,
            lost_records: s.lost_records,
            self_cpu_s,
            self_resident_bytes,
            interval_s: s.interval.as_secs_f64(),
        },
        format,
    );
    // Series born since the last scrape were shown at 0; from now on, at their value.
    s.monitor.mark_shown();
    text
}

/// The agent's own CPU time (getrusage) and resident memory (/proc/self/statm).
fn self_usage() -> (f64, u64) {
    // SAFETY: getrusage writes into the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let resident = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page);
    (cpu, resident)
}
