//! Running the powerlens binary from integration tests against a chosen sysfs root and
//! results database, so that no test reads the host's meters or writes the user's database.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod agent;
pub mod machines;
pub mod replay;

use std::path::Path;
use std::process::{Command, Output};

/// The binary with `POWERLENS_SYSFS_ROOT` at `sysfs`, the real procfs, and `POWERLENS_DB`
/// at `db`.
pub fn command(sysfs: &Path, db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_powerlens"));
    c.env("POWERLENS_SYSFS_ROOT", sysfs)
        .env_remove("POWERLENS_PROCFS_ROOT")
        .env("POWERLENS_DB", db);
    c
}

/// The binary reading nothing of this machine: sysfs and procfs at `tree`'s (an empty
/// tree reads as a machine with no CPUs, meters or processes), `POWERLENS_DB` at `db`, and
/// no other `POWERLENS_` setting of the test's environment. What it prints then comes
/// from the files it is given alone.
pub fn command_on_fixture(tree: &powerlens_sys::fixture::FixtureTree, db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_powerlens"));
    c.env("POWERLENS_SYSFS_ROOT", tree.sys_path(""))
        .env("POWERLENS_PROCFS_ROOT", tree.proc_path(""))
        .env("POWERLENS_DB", db)
        .env_remove("POWERLENS_POWER_MODEL")
        .env_remove("POWERLENS_PERF_RINGS");
    c
}

/// Runs the binary to completion (see [`command`]).
pub fn powerlens(sysfs: &Path, db: &Path, args: &[&str]) -> Output {
    command(sysfs, db).args(args).output().unwrap()
}

/// Records `powerlens workload ARGS` live, with the default options, into `rec`.
pub fn record_workload(rec: &Path, workload: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_powerlens");
    let mut args = vec![
        bin,
        "record",
        "-o",
        rec.to_str().unwrap(),
        "--quiet-command",
        "--",
        bin,
        "workload",
    ];
    args.extend_from_slice(workload);
    with_tracefs(&args, &[])
}

/// Runs the binary to completion on this machine's own sysfs and procfs (any override in
/// the test's environment removed).
pub fn on_this_machine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT")
        .args(args)
        .output()
        .unwrap()
}

/// The JSON on stdout; on failure, panics showing stdout and stderr.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&o.stdout), stderr(o)))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` (a powerlens command line) where tracefs is mounted: directly when the host
/// has it, else inside a private mount namespace that mounts it (the host is untouched).
pub fn with_tracefs(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = if Path::new("/sys/kernel/tracing/events").is_dir() {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        c
    } else {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tracefs nodev /sys/kernel/tracing && exec \"$@\"")
            .arg("sh")
            .args(args);
        c
    };
    c.env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Runs headless Chromium on `args`; `None` (after printing why) when it is not installed
/// (scripts/test.sh installs Debian's chromium).
pub fn chromium(args: &[&str]) -> Option<Output> {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .output();
    match out {
        Ok(o) => Some(o),
        Err(e) => {
            powerlens_sys::skip_test!("chromium not runnable ({e}); apt-get install chromium");
            None
        }
    }
}

/// Checks an HTML page written by powerlens without a browser: self-contained (nothing
/// to fetch, no external resource), `markup` absent (a label with HTML metacharacters was
/// escaped) and `escaped` (its escaped form) present. Returns the page.
pub fn assert_self_contained(html: &Path, markup: &str, escaped: &str) -> String {
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.len() < 5 << 20, "{} bytes", page.len());
    let mut tmp = html.as_os_str().to_owned();
    tmp.push(".tmp");
    assert!(!Path::new(&tmp).exists(), "FILE.tmp left behind");
    // The SVG namespace is a name, not a fetch.
    let without_ns = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    assert!(!page.contains("<link") && !page.contains(" src="));
    assert!(!page.contains(markup), "{markup} is markup in the page");
    assert!(page.contains(escaped), "{escaped} missing from the page");
    page
}

/// Opens the page in headless Chromium: no console message (no script error, nothing
/// fetched), `markup` (a label with HTML metacharacters) is a text node, not elements, and
/// a screenshot is far from blank (its PNG more than 5 times a blank page's of the same
/// size: a page with only its title is about 1.8 times). Prints why and
/// returns when Chromium is missing.
pub fn assert_renders_in_chromium(html: &Path, markup: &str, tag: &str) {
    let url = format!("file://{}", html.display());
    let Some(dom) = chromium(&["--dump-dom", &url]) else {
        return;
    };
    assert!(dom.status.success(), "{}", stderr(&dom));
    let log = stderr(&dom);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let dom = String::from_utf8_lossy(&dom.stdout);
    // The label is a text node (serialized escaped), never an element.
    let as_text = markup
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(dom.contains(&as_text), "{as_text} not in the DOM: {dom}");
    assert!(
        !dom.contains(&format!("<{tag}>")),
        "a <{tag}> element: {dom}"
    );

    let dir = html.parent().unwrap();
    let blank = dir.join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let shot = |page: &Path, png: &Path| -> u64 {
        let o = chromium(&[
            &format!("--screenshot={}", png.display()),
            "--window-size=1100,1600",
            &format!("file://{}", page.display()),
        ])
        .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::metadata(png).unwrap().len()
    };
    let blank_png = shot(&blank, &dir.join("blank.png"));
    let page_png = shot(html, &dir.join("page.png"));
    assert!(
        page_png > 5 * blank_png,
        "screenshot {page_png} bytes vs blank {blank_png}"
    );
}

/// One element of a page section as Chromium laid it out: its tag (and class), right edge,
/// width and height in CSS pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct Laid {
    pub element: String,
    pub right: f64,
    pub width: f64,
    pub height: f64,
}

/// Lays out `html` in headless Chromium at a window `width` px wide and returns the
/// viewport's width and the elements between the `<h2>` whose text starts with `heading`
/// and the next `<h2>`, measured by a script added to a copy of the page (the page itself
/// stays script-free but for its sorting). `None`, saying why, without Chromium.
pub fn layout_in_chromium(html: &Path, width: u32, heading: &str) -> Option<(f64, Vec<Laid>)> {
    let page = std::fs::read_to_string(html).unwrap();
    let probe = format!(
        "<script>(function(){{var vw=document.documentElement.clientWidth,out=[];
var h=[].slice.call(document.querySelectorAll('h2')).filter(function(x){{return x.textContent.indexOf({heading:?})==0}})[0];
for(var el=h&&h.nextElementSibling;el&&el.tagName!='H2';el=el.nextElementSibling){{var r=el.getBoundingClientRect();
out.push([el.tagName.toLowerCase()+(el.getAttribute('class')?'.'+el.getAttribute('class'):''),r.right,r.width,r.height].join(','));}}
document.body.setAttribute('data-layout',vw+'|'+out.join('|'));}})();</script></body>"
    );
    let copy = html.with_extension(format!("layout{width}.html"));
    std::fs::write(&copy, page.replace("</body>", &probe)).unwrap();
    let out = chromium(&[
        &format!("--window-size={width},1200"),
        "--dump-dom",
        &format!("file://{}", copy.display()),
    ])?;
    assert!(out.status.success(), "{}", stderr(&out));
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom.find("data-layout=\"").expect("the probe ran") + "data-layout=\"".len();
    let layout = &dom[at..at + dom[at..].find('"').unwrap()];
    let mut parts = layout.split('|');
    let viewport: f64 = parts.next().unwrap().parse().unwrap();
    let laid = parts
        .filter(|p| !p.is_empty())
        .map(|p| {
            let f: Vec<&str> = p.split(',').collect();
            Laid {
                element: f[0].to_string(),
                right: f[1].parse().unwrap(),
                width: f[2].parse().unwrap(),
                height: f[3].parse().unwrap(),
            }
        })
        .collect();
    Some((viewport, laid))
}

/// Running as root (live tracing, tmpfs mounts, cpuidle settings).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Live tests that trace every CPU or steer a fake meter by wall time run one at a time
/// within a test binary, so that one test's load is not another's (cargo runs the
/// binaries one after another). The holder also has a [`watchdog`]: a live test is where
/// a hung workload would hang.
pub fn serial() -> Serial {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let lock = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    Serial {
        _watchdog: watchdog(live_test_limit()),
        _lock: lock,
    }
}

/// The serial lock and the watchdog of a live test, released together at its end.
pub struct Serial {
    // The watchdog first: it is dropped (disarmed) before the lock is released.
    _watchdog: Watchdog,
    _lock: std::sync::MutexGuard<'static, ()>,
}

/// For a test that records live (tracepoints on every CPU): the serial lock, or `None`,
/// saying why, when not root.
pub fn live_recording() -> Option<Serial> {
    if !is_root() {
        powerlens_sys::skip_test!("recording tracepoints needs root");
        return None;
    }
    Some(serial())
}

/// How long a live test may run: 300 s (the slowest takes about 30 s here), or
/// `POWERLENS_TEST_LIMIT_S`.
pub fn live_test_limit() -> std::time::Duration {
    let secs = std::env::var("POWERLENS_TEST_LIMIT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300.0);
    std::time::Duration::from_secs_f64(secs)
}

/// Ends the whole test binary (exit status 124, as `timeout`) if the test holding it is
/// still running after `limit`, after killing the processes it started: a hung live
/// workload must fail its test binary, not hold CI for its 90 minutes. Disarmed when
/// dropped.
pub struct Watchdog(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

pub fn watchdog(limit: std::time::Duration) -> Watchdog {
    let (disarm, armed) = std::sync::mpsc::channel::<()>();
    // The test harness names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    std::thread::spawn(move || {
        if armed.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            eprintln!(
                "{test}: still running after {limit:?}; killing the processes it started and ending this test binary (exit 124) so that a hung test does not hold the suite"
            );
            kill_children();
            std::process::exit(124);
        }
    });
    Watchdog(disarm)
}

/// SIGKILLs the processes this one started (found by their parent pid in /proc), and
/// theirs, leaves first.
fn kill_children() {
    fn children_of(pid: u32) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|stat| {
                        // After the command, which may hold spaces, in parentheses.
                        let rest = &stat[stat.rfind(')')? + 2..];
                        rest.split(' ').nth(1)?.parse::<u32>().ok()
                    })
                    == Some(pid)
            })
            .collect()
    }
    fn kill_tree(pid: u32) {
        for child in children_of(pid) {
            kill_tree(child);
            // SAFETY: kill has no memory preconditions.
            unsafe {
                libc::kill(child as libc::pid_t, libc::SIGKILL);
            }
        }
    }
    kill_tree(std::process::id());
}

/// A fixture sysfs for a live recording or agent: this machine's online CPUs, and the real
/// tracefs reached through a link, so that only the parts a test fakes (a meter, cpuidle)
/// differ.
pub fn fixture_with_live_tracing() -> powerlens_sys::fixture::FixtureTree {
    let tree = powerlens_sys::fixture::FixtureTree::new();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    tree.online_cpus(online.trim());
    std::fs::create_dir_all(tree.sys_path("kernel")).unwrap();
    std::os::unix::fs::symlink("/sys/kernel/tracing", tree.sys_path("kernel/tracing")).unwrap();
    tree
}

/// The kernel's count of the voluntary switches of a process's threads: each is a thread
/// that went to sleep, so each is a wake-up of it later.
pub fn voluntary_switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .map(|v| v.trim().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// A process's wake-ups a second over 5 s of a quiet machine, after a second to settle.
pub fn wakeups_per_second(pid: u32) -> f64 {
    use std::time::{Duration, Instant};
    std::thread::sleep(Duration::from_secs(1));
    let (before, start) = (voluntary_switches(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    (voluntary_switches(pid) - before) as f64 / start.elapsed().as_secs_f64()
}

/// A number of a JSON document; panics naming the value otherwise.
pub fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A live test's failure message names the recording's own diagnostics (docs/TESTING.md):
/// this line, from the recording's `report --json`. Its `key=value` fields, in this order
/// and named as the report names them: `system.lost_records`, `inferred_switch_ins` and
/// `unrecorded_wakeups`, each followed by the CPUs that hold any of it
/// (`inferred_switch_ins=3(cpu1=3)`); `system.tracing_path`'s `max_stack_sample_period`,
/// `stack_samples_dropped`, `stack_samples_per_s`, `events` and `stack_unwinding`; and
/// `system.start_up_s`. Strings stand without quotes; `null` is a figure the report does
/// not have (a reduced recording traced nothing, an older one did not say).
pub fn recording_diagnostics(report: &serde_json::Value) -> String {
    use serde_json::Value;
    let system = &report["system"];
    let path = &system["tracing_path"];
    let plain = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let with_cpus = |key: &str| {
        let cpus: Vec<String> = report["cpus"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c[key].as_u64().is_some_and(|n| n > 0))
            .map(|c| format!("cpu{}={}", c["cpu"], c[key]))
            .collect();
        let total = format!("{key}={}", plain(&system[key]));
        if cpus.is_empty() {
            total
        } else {
            format!("{total}({})", cpus.join(","))
        }
    };
    let mut fields: Vec<String> = ["lost_records", "inferred_switch_ins", "unrecorded_wakeups"]
        .map(with_cpus)
        .into();
    for key in [
        "max_stack_sample_period",
        "stack_samples_dropped",
        "stack_samples_per_s",
        "events",
        "stack_unwinding",
    ] {
        fields.push(format!("{key}={}", plain(&path[key])));
    }
    fields.push(format!("start_up_s={}", plain(&system["start_up_s"])));
    format!("recording: {}", fields.join(" "))
}

/// `got` equals `expected`, computed by hand, to 1e-9 relative (1e-12 absolute at zero):
/// the figures of the mock executor are exact, and only the order of the floating-point
/// operations differs between powerlens and the test.
#[track_caller]
pub fn assert_close(got: f64, expected: f64, what: &str) {
    let tolerance = (1e-9 * expected.abs()).max(1e-12);
    assert!(
        (got - expected).abs() <= tolerance,
        "{what}: {got} from powerlens, {expected} by hand"
    );
}

/// Both ends of an interval, as [`assert_close`].
#[track_caller]
pub fn assert_close_pair(got: &serde_json::Value, expected: [f64; 2], what: &str) {
    assert_close(num(&got[0]), expected[0], &format!("{what} low end"));
    assert_close(num(&got[1]), expected[1], &format!("{what} high end"));
}

/// Student's t quantile at 0.975 (a two-sided 95% interval) for `df` degrees of freedom,
/// in closed form where one exists, else from a table to 16 digits: the oracle of the
/// intervals the tests compute by hand.
pub fn t975(df: u32) -> f64 {
    let p = 0.975f64;
    match df {
        // tan(π (p − ½)) = 12.7062…
        1 => (std::f64::consts::PI * (p - 0.5)).tan(),
        // (2p − 1) / √(2p(1 − p)) = 4.3027…
        2 => (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt(),
        // α = 4p(1 − p): 2 √(cos(arccos(√α) / 3) / √α − 1) = 2.7764…
        4 => {
            let a = 4.0 * p * (1.0 - p);
            2.0 * ((a.sqrt().acos() / 3.0).cos() / a.sqrt() - 1.0).sqrt()
        }
        // No closed form: tables give 3.182 and 2.447.
        3 => 3.182_446_305_284_263,
        6 => 2.446_911_851_144_97,
        _ => panic!("no t(0.975, {df}) here: add it"),
    }
}

/// The 95% interval of a positive mean whose symmetric half-width is `half`, on the log
/// scale as powerlens takes it: mean / f … mean × f, f = exp(half / mean).
pub fn log_interval(mean: f64, half: f64) -> [f64; 2] {
    let f = (half / mean).exp();
    [mean / f, mean * f]
}

/// Variance of the mean, s² / n, of `values` (sample variance over n − 1).
pub fn var_of_mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0) / n
}

/// `powerlens SUBCOMMAND --mock-executor=SETUP --json ARGS…` (`args[0]` the subcommand) on
/// `tree`'s sysfs, saving to the tree's `results.db`: a meter of the tree is read on the
/// mock clock, over files the script's `draw` steps write (docs/COMPARE.md). Its JSON and
/// stderr; panics showing stderr unless it succeeds.
pub fn mock_on_fixture(
    tree: &powerlens_sys::fixture::FixtureTree,
    setup: &str,
    args: &[&str],
) -> (serde_json::Value, String) {
    let flag = format!("--mock-executor={setup}");
    let args = [&[args[0], flag.as_str(), "--json"], &args[1..]].concat();
    let out = powerlens(&tree.roots().sysfs, &tree.sys_path("results.db"), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    (json(&out), stderr(&out))
}

/// The provenance of figures the mock executor read from the fixture meter `source` of
/// `tree`.
pub fn mocked_fixture(tree: &powerlens_sys::fixture::FixtureTree, source: &str) -> String {
    format!(
        "mock executor: every run scripted, {source} read from the scripted fixture sysfs {}",
        tree.roots().sysfs.display()
    )
}

/// The provenance label of everything the mock executor produces.
pub const MOCKED: &str = "MOCKED (mock executor: every run scripted, nothing measured)";

/// The sentence that ends every verdict on mocked runs.
pub const MOCKED_VERDICT: &str = " MOCKED, not measured: no command ran and no meter was read; the mock executor scripted every run's time and energy (a test backend).";

/// CPU-bound work on every online CPU (`powerlens workload spin`, one thread a CPU, at the
/// test's own nice), for the tests of what powerlens promises on a busy machine; stopped
/// when dropped. [`Hog::busy_share`] says how busy it kept the machine meanwhile.
pub struct Hog {
    child: std::process::Child,
    started: (powerlens_sys::procfs::CpuTimes, std::time::Instant),
}

impl Hog {
    pub fn start() -> Hog {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let child = Command::new(env!("CARGO_BIN_EXE_powerlens"))
            .args(["workload", "spin", "--quiet", "--duration", "900"])
            .args(["--threads", &cpus.to_string()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Its threads running before anything is measured beside them.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Hog {
            child,
            started: (machine_cpu_times(), std::time::Instant::now()),
        }
    }

    /// The machine's busy share of its CPUs since the hog started (0–1).
    pub fn busy_share(&self) -> f64 {
        let now = machine_cpu_times();
        let capacity = self.started.1.elapsed().as_secs_f64() * f64::from(now.cpus.max(1));
        now.busy_since(&self.started.0) / capacity
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn machine_cpu_times() -> powerlens_sys::procfs::CpuTimes {
    powerlens_sys::procfs::read_cpu_times(&powerlens_sys::Roots::default()).unwrap()
}

/// Whether this machine's CPUs have cpuidle states in sysfs (a cpuidle driver is loaded):
/// without one, idle-state figures are unavailable, and the tests of what they show
/// check that instead.
pub fn machine_has_cpuidle() -> bool {
    Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state0").is_dir()
}

/// The sum of `key` over the function rows of `report --by function --json` whose module
/// ends with `module` (a program's own functions, `/stack_program`).
pub fn module_total(report: &serde_json::Value, module: &str, key: &str) -> f64 {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["module"].as_str().is_some_and(|m| m.ends_with(module)))
        .map(|f| f[key].as_f64().unwrap())
        .sum()
}

/// `record -o REC -a`, killed with SIGKILL `after_s` seconds after it was started; panics
/// unless the shell that ran it succeeded.
pub fn record_all_killed_after(rec: &Path, after_s: f64) {
    let script = format!(
        "{} record -o {} -a 2>/dev/null & pid=$!; sleep {after_s}; kill -9 $pid; wait $pid; exit 0",
        env!("CARGO_BIN_EXE_powerlens"),
        rec.display()
    );
    let out = with_tracefs(&["sh", "-c", &script], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The upper median of `values` (not empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
