//! `powerlens agent`: the live session, closed interval by interval into the monitor's
//! series, served to Prometheus over HTTP. The interval loop runs here; the agent library
//! (`powerlens_agent`) serves scrapes from the state the last interval left.

mod messages;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};

use powerlens_agent::{Listening, Options};
use powerlens_core::monitor::MonitorConfig;
use powerlens_record::interrupt;
use powerlens_record::live::{LiveSession, Mode, Tracing};

use crate::args::GlobalArgs;
use crate::cmd::live::LiveArgs;
use crate::units::parse_positive_duration;

/// The default address: loopback only. Serving elsewhere takes an explicit `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9877";

/// `--web-config`'s long help: the prose as one line per paragraph, so that clap wraps it
/// at the width of every other option's help; the example file keeps its own lines.
const WEB_CONFIG_HELP: &str = "TLS and basic auth, from a web config in the format of \
Prometheus's exporter-toolkit (node_exporter's --web.config.file): `tls_server_config` \
(cert_file, key_file; client_auth_type and client_ca_file for client certificates; \
min_version), `basic_auth_users` (user: bcrypt hash, made by \
`htpasswd -nBC 10 \"\" | tr -d ':\\n'`) and `auth_excluded_paths` (e.g. /healthz). \
Everything is protected unless listed there. Unknown or unsupported keys are refused. \
Changes to the file and to the files it names are loaded while the agent runs (renew \
certificates without a restart). Example file:

  tls_server_config:
    cert_file: agent.crt   # relative to this file's directory
    key_file: agent.key
  basic_auth_users:
    prometheus: $2y$10$k01fl0ntZdGuCjfHW36i3uGKGbkmEBdHOxEQFSH89Ncbgqpk.hSL6

(docs/AGENT.md#security)";

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens agent                                  # serve http://127.0.0.1:9877/metrics
  powerlens agent --interval 5s --top 50
  powerlens agent --listen 0.0.0.0:9877 --web-config /etc/powerlens/web.yml
                                                   # other hosts, over HTTPS with basic auth
  curl -s localhost:9877/metrics | grep powerlens_process_energy

Every interval the agent reads the energy meter (RAPL, perf power PMU, battery, hwmon; the
power model, labelled estimated, when there is none) and attributes the interval's energy:
an idle (baseline) share, and the rest split over processes by the CPU time the scheduler
charged them (/proc/PID/stat). A process series holds the processes of one name in one
cgroup (--by pid for one per process); the top N of each interval are added to and
comm=\"other\" holds the rest, so that the processes and the idle share add up to
the node exactly. Wake-ups by cause and idle wake-ups come from the scheduler tracepoints
(root or CAP_PERFMON), on for --trace-duty of each interval (5%) and scaled to it: the
tracepoint handlers run in the watched processes' own time, so tracing all the time would
slow a switch-heavy service by 1.5-3x on this kind of machine. Without tracing privileges
the agent has no wake-ups and says so in powerlens_build_info.

Endpoints: /metrics (Prometheus text 0.0.4, or OpenMetrics when the scraper asks),
/healthz, and / (a page linking both). Metrics, the attribution rule, the security model,
a scrape config and a Grafana dashboard: docs/AGENT.md.")]
pub struct AgentArgs {
    /// Address to serve on. The default answers on loopback only; any other address is
    /// reachable from the network: protect it with --web-config.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: String,

    /// TLS and basic auth, from a web config in the format of Prometheus's exporter-toolkit
    /// (docs/AGENT.md#security).
    #[arg(long, value_name = "FILE", long_help = WEB_CONFIG_HELP)]
    pub web_config: Option<PathBuf>,

    /// Process series added to per interval (by energy); the rest is comm="other".
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,

    /// A series' processes must keep at least this share of one CPU busy over an
    /// interval, in percent, for it to be added to; below it, they are in comm="other".
    #[arg(long, value_name = "PERCENT", default_value_t = 1.0)]
    pub min_cpu: f64,

    /// What a process series is: the processes of one name in one cgroup (comm: 140
    /// short-lived gzip pids are one series), one process with a pid label (pid: every
    /// short-lived process leaves a series until --series-ttl), or none, per-cgroup series
    /// only (cgroup). Per-cgroup series come with each (docs/AGENT.md, "Series and
    /// cardinality").
    #[arg(long, value_enum, default_value = "comm")]
    pub by: By,

    /// Drop a process series nothing was added to for this long (its processes exited or
    /// left the top). Keep it above the scrape interval, or the last increase is lost.
    #[arg(long, value_name = "DURATION", default_value = "5min", value_parser = parse_positive_duration)]
    pub series_ttl: Duration,

    /// Share of each interval the scheduler tracepoints are on, in percent (at a random
    /// place in it), for the wake-ups: they are scaled to the interval and labelled as
    /// estimates. CPU time and energy come from /proc either way, which costs the
    /// watched processes nothing. 100 traces throughout: exact wake-ups, and CPU time
    /// from the trace, at 1.5-3x the run time of switch-heavy processes (docs/AGENT.md,
    /// "What watching costs").
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0, value_parser = parse_duty)]
    pub trace_duty: f64,

    /// Stop after this long (default: until SIGINT or SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,

    #[command(flatten)]
    pub live: LiveArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Comm,
    /// `process` was this value's name before series were keyed by name by default.
    #[value(alias = "process")]
    Pid,
    Cgroup,
}

pub fn execute(global: &GlobalArgs, args: AgentArgs) -> anyhow::Result<ExitCode> {
    // A server outlives its clients: a write to one that has gone is an error for that
    // connection, never a signal that ends the agent (main restores SIGPIPE's default for
    // the commands whose output is piped to `head`).
    // SAFETY: a signal disposition, set before any of the agent's threads start.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let roots = global.roots()?;
    let addr = resolve(&args.listen)?;
    // Bound first: a bad web config or a port in use is told before the tracepoints are
    // opened.
    let listening = Listening::bind(addr, args.web_config.as_deref()).map_err(messages::error)?;
    if let Some(exposure) = listening.exposure() {
        eprintln!("powerlens: {}", messages::exposure(&exposure));
    }
    interrupt::install();
    let tracing = if args.trace_duty >= 100.0 {
        Tracing::Continuous
    } else {
        Tracing::Windows {
            duty: args.trace_duty / 100.0,
        }
    };
    // Ctrl-C and SIGTERM wake the session at once; a --duration is asked every 50 ms.
    let stop_check = args.duration.map(|_| Duration::from_millis(50));
    let mut session = LiveSession::start(&roots, &args.live.options(tracing, stop_check))?;
    match session.mode() {
        Mode::Trace => {}
        Mode::Windows { duty } => eprintln!(
            "powerlens: CPU time from /proc; wake-ups traced {}% of each interval and scaled to it (estimates; --trace-duty 100 for exact ones, at a cost to the watched processes)",
            duty * 100.0
        ),
        Mode::Reduced { reason } => {
            let fix = if args.live.reduced {
                "drop --reduced for them"
            } else {
                "run as root or with CAP_PERFMON for them"
            };
            eprintln!(
                "powerlens: warning: {reason}; the agent samples /proc only (REDUCED: per-process CPU time and energy, no wake-ups): {fix}"
            );
        }
    }
    if let Some(line) = session.describe_cpu_time() {
        eprintln!("powerlens: {line}");
    }
    if let Some(line) = session.describe_tracing() {
        eprintln!("powerlens: {line}");
    }
    eprintln!("powerlens: {}", session.describe_energy());
    let options = Options {
        monitor: MonitorConfig {
            top: args.top,
            min_cpu: args.min_cpu / 100.0,
            per_pid: args.by == By::Pid,
            series_ttl_ns: args.series_ttl.as_nanos().min(u64::MAX as u128) as u64,
            ..MonitorConfig::default()
        },
        per_process: args.by != By::Cgroup,
        interval: args.live.interval,
        version: env!("CARGO_PKG_VERSION"),
        tracing_path: session.tracing_path(),
    };
    let scheme = listening.scheme();
    let protection = listening
        .protection()
        .map_or(String::new(), |p| format!(" with {p}"));
    let agent = listening
        .serve(session.mode(), options, messages::reload)
        .map_err(messages::error)?;
    eprintln!(
        "powerlens: serving {scheme}://{addr}/metrics{protection}, one interval every {:?} (Ctrl-C or SIGTERM to stop)",
        args.live.interval
    );
    let started = Instant::now();
    let stop = || interrupt::interrupted() || args.duration.is_some_and(|d| started.elapsed() >= d);
    while let Some(interval) = session.next_interval(&stop)? {
        for note in &interval.notes {
            eprintln!("powerlens: warning: {note}");
        }
        agent.close_interval(interval);
        crate::allocator::give_back_freed_memory();
    }
    eprintln!("powerlens: agent stopped");
    Ok(ExitCode::SUCCESS)
}

/// `--trace-duty`: a percentage above 0 and at most 100.
fn parse_duty(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a number: write a percentage, e.g. 5"))?;
    if v > 0.0 && v <= 100.0 {
        Ok(v)
    } else {
        Err(format!(
            "{v} is outside (0, 100]: 100 traces throughout; for no tracing at all use --reduced"
        ))
    }
}

fn resolve(listen: &str) -> anyhow::Result<SocketAddr> {
    listen
        .to_socket_addrs()
        .with_context(|| {
            format!("--listen {listen}: write HOST:PORT, e.g. {DEFAULT_LISTEN} or [::1]:9877")
        })?
        .next()
        .with_context(|| format!("--listen {listen} resolves to no address"))
}
