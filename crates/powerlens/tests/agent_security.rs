//! `powerlens agent --web-config`: TLS and basic auth in exporter-toolkit's file format,
//! checked by outside implementations. The certificates come from the `openssl` CLI, the
//! password hashes from Apache's `htpasswd` (when installed), the HTTPS client is `curl`
//! (OpenSSL) and the scraper a real Prometheus (Go's TLS and HTTP client): none of them
//! shares code with the agent's rustls and bcrypt. The agents here sample /proc
//! (`--reduced`): what is tested is the door, not the figures behind it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::agent::{agent, finish, free_port, which, Prometheus, Reaped};
use common::serial;
use powerlens_sys::fixture::FixtureTree;

const USER: &str = "prometheus";
const PASSWORD: &str = "correct horse: battery staple";

/// A fixture sysfs with this machine's online CPUs (no meter: energy is estimated).
fn fixture() -> FixtureTree {
    let tree = FixtureTree::new();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    tree.online_cpus(online.trim());
    tree
}

fn run(program: &str, args: &[&str], dir: &Path) -> Output {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A CA, and a key and certificate it signed for `name` with `usage` (serverAuth,
/// clientAuth), made by the openssl CLI in `dir`. `None` (after saying so) without openssl.
fn certificates(dir: &Path) -> Option<()> {
    if which("openssl").is_none() {
        powerlens_sys::skip_test!("no openssl CLI to make certificates (Debian package openssl)");
        return None;
    }
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=powerlens test CA",
    ]);
    run("openssl", &ca, dir);
    for (name, usage, san) in [
        (
            "agent",
            "serverAuth",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        ),
        ("client", "clientAuth", ""),
    ] {
        let mut req = vec!["req"];
        req.extend(ec);
        let (key, csr, crt, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        let subj = format!("/CN={name}");
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        run("openssl", &req, dir);
        std::fs::write(
            dir.join(&ext),
            format!("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n{san}"),
        )
        .unwrap();
        run(
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
            dir,
        );
    }
    Some(())
}

/// A bcrypt hash of `password`: Apache's htpasswd when installed (an implementation that
/// is not the agent's), else the bcrypt crate the agent uses (said so). Cost 4, the
/// lowest: a debug build takes about 0.3 s per check at the usual 10 (a release build
/// 50 ms, docs/AGENT.md#security), and Prometheus gives up a scrape after 1 s.
fn bcrypt_hash(password: &str) -> String {
    bcrypt_hash_of_cost(password, 4)
}

fn bcrypt_hash_of_cost(password: &str, cost: u32) -> String {
    if which("htpasswd").is_some() {
        let out = Command::new("htpasswd")
            .args(["-nbBC", &cost.to_string(), "", password])
            .output()
            .unwrap();
        assert!(out.status.success());
        return String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .trim_start_matches(':')
            .to_string();
    }
    eprintln!("note: no htpasswd (Debian package apache2-utils): hashing with the bcrypt crate");
    bcrypt::hash(password, cost).unwrap()
}

fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// One request by curl: (HTTP status, response headers, body); status 0 when no HTTP
/// response came (curl's exit code is then in the headers' place).
fn curl(url: &str, args: &[&str]) -> (u16, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-D", "-"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return (
            0,
            format!(
                "curl exit {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ),
            String::new(),
        );
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// Waits until the agent answers on `port` at all (any TCP accept), or panics if it exits.
fn wait_listening(port: u16, agent: &mut Child) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = agent.try_wait() {
            panic!("the agent exited ({status}) before serving");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the agent never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn have_curl() -> bool {
    let found = which("curl").is_some();
    if !found {
        powerlens_sys::skip_test!("no curl (Debian package curl; scripts/test.sh installs it)");
    }
    found
}

/// An agent serving with a web config, beside the certificates of [`certificates`].
struct Served {
    dir: tempfile::TempDir,
    _tree: FixtureTree,
    agent: Reaped,
    port: u16,
}

impl Served {
    /// `web_config` (its text, which may name agent.crt, agent.key, ca.crt…) written to
    /// web.yml and an agent started on it; `None` (after saying so) without openssl.
    fn start(web_config: &str) -> Option<Served> {
        let dir = tempfile::tempdir().unwrap();
        certificates(dir.path())?;
        let config = write_config(dir.path(), "web.yml", web_config);
        let tree = fixture();
        let port = free_port();
        let mut agent = agent(
            &tree.sys_path(""),
            port,
            &["--reduced", "--web-config", config.to_str().unwrap()],
        );
        wait_listening(port, agent.child());
        Some(Served {
            dir,
            _tree: tree,
            agent,
            port,
        })
    }

    /// A file of the certificates' directory.
    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn assert_alive(&mut self, after: &str) {
        assert!(
            self.agent.child().try_wait().unwrap().is_none(),
            "the agent died {after}"
        );
    }

    /// Stops the agent, which must have lived through the test; its stderr.
    fn stop(mut self) -> String {
        self.assert_alive("while served");
        finish(self.agent)
    }
}

/// The test: a real Prometheus scrapes the agent over HTTPS with basic auth and
/// the target is up; the same Prometheus with a wrong password, and over plain HTTP, gets
/// the agent's 401 and 400 in its targets' `lastError`.
#[test]
#[ignore = "live: a real Prometheus scrapes the agent"]
fn prometheus_scrapes_over_https_with_basic_auth() {
    let Some(prometheus) = Prometheus::find() else {
        return;
    };
    let _serial = serial();
    let Some(served) = Served::start(&format!(
        "tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\nbasic_auth_users:\n  {USER}: {}\n",
        bcrypt_hash(PASSWORD)
    )) else {
        return;
    };
    let (port, ca) = (served.port, served.file("ca.crt"));
    let job = |name: &str, scheme: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    tls_config:\n      ca_file: {ca}\n    basic_auth:\n      username: {USER}\n      password: '{password}'\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
    };
    let server = Prometheus::start(
        &prometheus,
        served.dir.path(),
        &[
            job("https", "https", PASSWORD),
            job("wrong_password", "https", "correct horse"),
            job("plain_http", "http", PASSWORD),
        ]
        .concat(),
    );
    let jobs = ["https", "wrong_password", "plain_http"];
    let targets = server.scraped(&jobs, Duration::from_secs(60));
    let target = |job: &str| {
        targets
            .iter()
            .find(|(j, _)| j == job)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no target of job {job}: {targets:?}"))
    };
    let https = target("https");
    assert_eq!(https["health"], "up", "{https}");
    assert_eq!(
        https["scrapeUrl"],
        format!("https://127.0.0.1:{port}/metrics")
    );
    let wrong = target("wrong_password");
    assert_eq!(wrong["health"], "down", "{wrong}");
    assert!(
        wrong["lastError"].as_str().unwrap().contains("401"),
        "{wrong}"
    );
    let plain = target("plain_http");
    assert_eq!(plain["health"], "down", "{plain}");
    assert!(
        plain["lastError"].as_str().unwrap().contains("400"),
        "{plain}"
    );
    // What Prometheus stored is the agent's exposition, read through TLS and auth.
    let (status, body) = common::agent::get(
        server.port,
        "/api/v1/query?query=powerlens_build_info%7Bjob%3D%22https%22%7D",
        None,
    )
    .unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("\"mode\":\"reduced\""), "{body}");
    drop(server);
    let stderr = served.stop();
    assert!(
        stderr.contains(&format!(
            "serving https://127.0.0.1:{port}/metrics with TLS and basic auth (1 user)"
        )),
        "{stderr}"
    );
}

/// The door, request by request, with curl: no or wrong credentials get 401 with the
/// challenge, the right ones the metrics, plain HTTP a 400 that names HTTPS, paths listed
/// in auth_excluded_paths are open, and a client that dribbles its TLS hello is cut off at
/// the deadline.
#[test]
#[ignore = "live: the agent serving real clients"]
fn credentials_and_plain_http_are_answered_as_documented() {
    if !have_curl() {
        return;
    }
    let _serial = serial();
    let Some(mut served) = Served::start(&format!(
        "tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\nbasic_auth_users:\n  {USER}: {}\n  grafana: {}\n  slow: {}\nauth_excluded_paths:\n  - /healthz\n",
        bcrypt_hash(PASSWORD),
        bcrypt_hash("another one"),
        // About 1 s a check in a debug build, 0.2 s in a release build.
        bcrypt_hash_of_cost("slow", 12)
    )) else {
        return;
    };
    let (port, ca) = (served.port, served.file("ca.crt"));
    let ca = ca.as_str();
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");
    let right = format!("{USER}:{PASSWORD}");

    let (status, head, body) = curl(&url("/metrics"), &["--cacert", ca, "-u", &right]);
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("powerlens_build_info"), "{body}");
    assert!(
        curl(&url("/"), &["--cacert", ca, "-u", "grafana:another one"]).0 == 200,
        "the second user"
    );

    for credentials in [
        None,
        Some(format!("{USER}:wrong")),
        Some(format!("{USER}:{PASSWORD} ")),
        Some(format!("grafana:{PASSWORD}")),
        Some(format!("nobody:{PASSWORD}")),
        Some(format!("{USER}{PASSWORD}")),
    ] {
        for path in ["/metrics", "/", "/nothing"] {
            let mut args = vec!["--cacert", ca];
            if let Some(c) = &credentials {
                args.extend(["-u", c]);
            }
            let (status, head, body) = curl(&url(path), &args);
            assert_eq!(status, 401, "{credentials:?} {path}: {head}");
            assert!(
                head.lines()
                    .any(|l| l == "WWW-Authenticate: Basic realm=\"powerlens\""),
                "{head}"
            );
            assert!(!body.contains("powerlens_"), "{body}");
        }
    }
    // A wrong password tried right after the right one is still wrong (nothing cached
    // lets it in), and the right one still right after wrong ones.
    assert_eq!(
        curl(
            &url("/metrics"),
            &["--cacert", ca, "-u", &format!("{USER}:x")]
        )
        .0,
        401
    );
    assert_eq!(
        curl(&url("/metrics"), &["--cacert", ca, "-u", &right]).0,
        200
    );

    // Listed in auth_excluded_paths: open.
    let (status, _, body) = curl(&url("/healthz"), &["--cacert", ca]);
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // Plain HTTP to the TLS port: a 400 that says what to do, no metrics.
    let (status, _, body) = curl(&format!("http://127.0.0.1:{port}/metrics"), &["-u", &right]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("serves HTTPS"), "{body}");
    // A certificate the client does not trust: no connection (curl's 60).
    let (status, why, _) = curl(&url("/metrics"), &["-u", &right]);
    assert_eq!(status, 0, "{why}");
    assert!(why.contains("exit Some(60)"), "{why}");

    // Clients that give up before the answer (a check of a cost-12 hash takes longer than
    // 0.1 s): the answer goes to a closed socket, an error for that connection only (it
    // was a SIGPIPE that ended the agent, when rustls wrote with writev).
    for _ in 0..3 {
        let (status, _, _) = curl(
            &url("/metrics"),
            &["--cacert", ca, "-u", "slow:wrong", "--max-time", "0.1"],
        );
        assert_eq!(status, 0, "answered within 0.1 s");
    }
    std::thread::sleep(Duration::from_secs(4));
    served.assert_alive("of a client that left");

    // A TLS hello dribbled: cut off at the 5 s deadline (with a margin for a busy machine).
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let t = Instant::now();
    slow.write_all(&[0x16, 0x03]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let _ = slow.write_all(&[0x01]);
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(12),
        "closed after {waited:?}"
    );
    assert_eq!(
        curl(&url("/metrics"), &["--cacert", ca, "-u", &right]).0,
        200
    );
    served.stop();
}

/// `client_auth_type: RequireAndVerifyClientCert`: without a certificate the CA signed,
/// no TLS connection; with one, the metrics.
#[test]
#[ignore = "live: the agent serving real clients"]
fn client_certificates_are_required_when_configured() {
    if !have_curl() {
        return;
    }
    let _serial = serial();
    let Some(served) = Served::start(
        "tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
    ) else {
        return;
    };
    let url = served.url("/metrics");
    let d = |f: &str| served.file(f);
    let (status, why, _) = curl(&url, &["--cacert", &d("ca.crt")]);
    assert_eq!(status, 0, "served without a client certificate: {why}");
    // The server's own certificate is for serverAuth only: refused as a client's.
    let (status, why, _) = curl(
        &url,
        &[
            "--cacert",
            &d("ca.crt"),
            "--cert",
            &d("agent.crt"),
            "--key",
            &d("agent.key"),
        ],
    );
    assert_eq!(
        status, 0,
        "served with a server certificate as a client's: {why}"
    );
    let (status, head, body) = curl(
        &url,
        &[
            "--cacert",
            &d("ca.crt"),
            "--cert",
            &d("client.crt"),
            "--key",
            &d("client.key"),
        ],
    );
    assert_eq!(status, 200, "{head}");
    // The program's version, which the command hands the agent library.
    assert!(
        body.contains(&format!(
            "powerlens_build_info{{version=\"{}\",",
            env!("CARGO_PKG_VERSION")
        )),
        "{body}"
    );
    // min_version TLS13: a TLS 1.2 client is refused.
    let (status, why, _) = curl(
        &url,
        &[
            "--cacert",
            &d("ca.crt"),
            "--cert",
            &d("client.crt"),
            "--key",
            &d("client.key"),
            "--tls-max",
            "1.2",
        ],
    );
    assert_eq!(status, 0, "served TLS 1.2 under min_version TLS13: {why}");
    served.stop();
}

/// A bad web config stops the agent at start, before it listens: exit 2, one line naming
/// the file, the key or line, and the fix.
#[test]
fn a_bad_web_config_is_refused_at_start() {
    // The watchdog: an agent that took a bad file would serve until killed.
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let have_certs = certificates(dir.path()).is_some();
    let hash = "$2y$10$k01fl0ntZdGuCjfHW36i3uGKGbkmEBdHOxEQFSH89Ncbgqpk.hSL6";
    let mut cases = vec![
        (
            "basic_auth_users:\n  prometheus: s3cret\n",
            vec!["line 2", "not a bcrypt hash", "htpasswd"],
        ),
        (
            "tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\n  cert_fle: x\n",
            vec!["line 4", "unknown key `cert_fle`", "cert_file, key_file"],
        ),
        (
            "tls_srever_config:\n  cert_file: agent.crt\n",
            vec!["line 1", "unknown key `tls_srever_config`"],
        ),
        ("basic_auth_users: [\n", vec!["not valid YAML"]),
        (
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: agent.key\n",
            vec!["cert_file", "missing.crt", "check the path"],
        ),
        (
            "tls_server_config:\n  cert_file: not-a-cert.pem\n  key_file: agent.key\n",
            vec!["cert_file", "not-a-cert.pem", "no certificate"],
        ),
        (
            "basic_auth_users:\n  'a:b': HASH\n",
            vec!["line 2", "cannot log in", "rename it"],
        ),
        (
            "auth_excluded_paths: [/debug]\n",
            vec!["auth_excluded_paths", "/debug", "remove it"],
        ),
        (
            "rate_limit:\n  interval: 1s\n",
            vec!["line 1", "`rate_limit` is not supported"],
        ),
    ];
    if have_certs {
        // The client's key with the agent's certificate.
        cases.push((
            "tls_server_config:\n  cert_file: agent.crt\n  key_file: client.key\n",
            vec!["key_file is not the private key of cert_file"],
        ));
    }
    std::fs::write(dir.path().join("not-a-cert.pem"), "hello\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_powerlens");
    for (i, (text, expected)) in cases.iter().enumerate() {
        let text = text.replace("HASH", hash);
        let path = write_config(dir.path(), &format!("bad{i}.yml"), &text);
        let port = free_port();
        let out = Command::new(bin)
            .args([
                "agent",
                "--reduced",
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .arg("--web-config")
            .arg(&path)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert_eq!(err.lines().count(), 1, "{text}: one line: {err}");
        assert!(
            err.starts_with(&format!(
                "powerlens: error: --web-config {}: ",
                path.display()
            )),
            "{err}"
        );
        for e in expected {
            assert!(err.contains(e), "{text}: `{e}` not in {err}");
        }
        assert!(!err.contains("s3cret"), "the password echoed: {err}");
    }
    let out = Command::new(bin)
        .args(["agent", "--web-config", "/nonexistent/web.yml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("/nonexistent/web.yml") && err.contains("No such file"),
        "{err}"
    );
}

/// The line printed for an address other hosts reach says what protects it: a warning
/// without TLS or without authentication, a plain note with both.
#[test]
fn the_exposure_line_says_what_is_configured() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(()) = certificates(dir.path()) else {
        return;
    };
    let hash = bcrypt_hash(PASSWORD);
    let tls = "tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\n";
    let users = format!("basic_auth_users:\n  {USER}: {hash}\n");
    let tree = fixture();
    for (config, expected) in [
        (None, "warning: serving on 0.0.0.0:PORT, reachable from other hosts, without TLS or authentication"),
        (Some(tls.to_string()), "warning: serving on 0.0.0.0:PORT, reachable from other hosts, over TLS but without authentication"),
        (Some(users.clone()), "warning: serving on 0.0.0.0:PORT, reachable from other hosts, with basic auth (1 user) over plain HTTP"),
        (Some(format!("{tls}{users}")), "serving on 0.0.0.0:PORT, reachable from other hosts: TLS and basic auth (1 user)"),
    ] {
        let port = free_port();
        let mut args = vec![
            "agent".to_string(),
            "--reduced".into(),
            "--duration".into(),
            "1s".into(),
            "--listen".into(),
            format!("0.0.0.0:{port}"),
        ];
        if let Some(text) = &config {
            let path = write_config(dir.path(), &format!("{port}.yml"), text);
            args.extend(["--web-config".into(), path.to_str().unwrap().into()]);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_powerlens"))
            .env("POWERLENS_SYSFS_ROOT", tree.sys_path(""))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let expected = expected.replace("PORT", &port.to_string());
        let line = err
            .lines()
            .find(|l| l.contains("reachable from other hosts"))
            .unwrap_or_else(|| panic!("no exposure line: {err}"));
        assert!(line.starts_with(&format!("powerlens: {expected}")), "{line}");
        assert_eq!(line.contains("warning"), expected.starts_with("warning"));
    }
}

/// Certificates are renewed and users added while the agent runs, as exporter-toolkit
/// users do: the agent serves the renewed certificate (a CA made for the renewal verifies
/// it, the old one no longer does) and the new user, without a restart; a web config
/// edited into something that does not load is refused with a warning and the agent
/// serves as before.
#[test]
#[ignore = "live: the agent serving real clients"]
fn a_renewed_certificate_and_a_new_user_are_served_without_a_restart() {
    if !have_curl() {
        return;
    }
    let _serial = serial();
    let hash = bcrypt_hash(PASSWORD);
    let config = |users: &str| {
        format!("tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\nbasic_auth_users:\n{users}")
    };
    let Some(mut served) = Served::start(&config(&format!("  {USER}: {hash}\n"))) else {
        return;
    };
    let dir = served.dir.path().to_path_buf();
    let url = served.url("/metrics");
    let (old_ca, user) = (served.file("ca.crt"), format!("{USER}:{PASSWORD}"));
    let status = |ca: &str, user: &str| curl(&url, &["--cacert", ca, "-u", user]).0;
    assert_eq!(status(&old_ca, &user), 200);

    // The renewal: another CA's certificate and key, renamed into place (key first, as a
    // renewal script would), and a second user in a config renamed into place.
    let renewed = dir.join("renewed");
    std::fs::create_dir(&renewed).unwrap();
    certificates(&renewed).unwrap();
    for f in ["agent.key", "agent.crt"] {
        std::fs::copy(renewed.join(f), dir.join(format!("{f}.new"))).unwrap();
        std::fs::rename(dir.join(format!("{f}.new")), dir.join(f)).unwrap();
    }
    let second = format!("grafana:{PASSWORD}");
    let users = format!("  {USER}: {hash}\n  grafana: {hash}\n");
    write_config(&dir, "web.yml.new", &config(&users));
    std::fs::rename(dir.join("web.yml.new"), dir.join("web.yml")).unwrap();
    let new_ca = renewed.join("ca.crt").to_str().unwrap().to_string();
    let start = Instant::now();
    while status(&new_ca, &second) != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the renewed certificate and the new user were not served: {:?}",
            curl(&url, &["--cacert", &new_ca, "-u", &second])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status(&new_ca, &user), 200, "the first user still");
    let (old, why, _) = curl(&url, &["--cacert", &old_ca, "-u", &user]);
    assert_eq!(old, 0, "the old CA no longer verifies the agent: {why}");

    // An edit that does not load: refused, served as before.
    write_config(
        &dir,
        "web.yml",
        "tls_server_config:\n  cert_file: agent.crt\n",
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        status(&new_ca, &second),
        200,
        "served as before the bad edit"
    );
    served.assert_alive("after a bad edit");
    let stderr = served.stop();
    assert!(
        stderr.contains("changed: serving with TLS and basic auth (2 users) from now on"),
        "{stderr}"
    );
    assert!(
        stderr.contains("key_file") && stderr.contains("serves with the web config as it was"),
        "{stderr}"
    );
}
