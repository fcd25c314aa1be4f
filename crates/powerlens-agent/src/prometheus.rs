//! The agent's metrics in the Prometheus text exposition format 0.0.4, or in OpenMetrics
//! 1.0 when the scraper asks for it. Names follow Prometheus's conventions: base units
//! (joules, seconds, watts, bytes), counters end in `_total`.

use std::fmt::Write;

use powerlens_core::monitor::cgroup::identify;
use powerlens_core::monitor::{Counters, Monitor};

/// Everything one scrape shows.
pub struct AgentMetrics<'a> {
    pub monitor: &'a Monitor,
    /// Wake-up metrics exist only when the agent traces (a reduced agent samples procfs,
    /// which has no wake-ups: they are absent, not zero).
    pub traced: bool,
    /// Per-process series (`--by process`); per-cgroup series only without.
    pub per_process: bool,
    /// `trace`, `windows` (traced for `trace_duty` of each interval), or `reduced` with
    /// the reason.
    pub mode: &'a str,
    /// The share of each interval traced: 1 when tracing throughout, 0 when reduced.
    pub trace_duty: f64,
    pub mode_reason: &'a str,
    pub version: &'a str,
    /// How the events come from the kernel: `bpf`, `perf_ring`, or `none` when reduced.
    pub tracing_path: &'a str,
    /// (cpu, state name, cumulative seconds), the kernel's cpuidle counters.
    pub idle_states: &'a [(u32, String, f64)],
    pub lost_records: Option<u64>,
    pub self_cpu_s: f64,
    pub self_resident_bytes: u64,
    pub interval_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`
    Text,
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when it is listed, as
    /// Prometheus lists it first since 2.5; the text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A float as both formats want it (`+Inf`, `NaN`; integers without an exponent).
fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x}")
    }
}

struct Writer {
    out: String,
    format: Format,
}

impl Writer {
    /// A metric family's header. `name` is the sample name (with `_total` for counters,
    /// `_info` for an info metric, which the text format calls a gauge).
    fn family(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let (family, kind) = match (self.format, kind) {
            (Format::OpenMetrics, "counter") => (name.strip_suffix("_total").unwrap_or(name), kind),
            (Format::OpenMetrics, "info") => (name.strip_suffix("_info").unwrap_or(name), kind),
            (Format::Text, "info") => (name, "gauge"),
            _ => (name, kind),
        };
        let _ = writeln!(self.out, "# HELP {family} {help}");
        let _ = writeln!(self.out, "# TYPE {family} {kind}");
        if let (Format::OpenMetrics, Some(unit)) = (self.format, unit) {
            let _ = writeln!(self.out, "# UNIT {family} {unit}");
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }
}

/// A cgroup path's labels: `cgroup`, and `unit`, `container_id`, `pod_uid` when the path
/// names them (derived from the path: they add no series).
fn cgroup_labels(cgroup: &str) -> Vec<(&'static str, String)> {
    let id = identify(cgroup);
    let mut l = vec![("cgroup", cgroup.to_string())];
    l.extend(id.unit.map(|u| ("unit", u)));
    l.extend(id.container_id.map(|c| ("container_id", c)));
    l.extend(id.pod_uid.map(|p| ("pod_uid", p)));
    l
}

/// The exposition.
pub fn render(m: &AgentMetrics<'_>, format: Format) -> String {
    let mut w = Writer {
        out: String::with_capacity(8192),
        format,
    };
    let mon = m.monitor;

    w.family(
        "powerlens_node_energy_joules_total",
        "counter",
        Some("joules"),
        "Energy of the node since the agent started, per domain; source names the meter or the power model, provenance says which.",
    );
    for ((domain, source, basis), j) in mon.node() {
        w.sample(
            "powerlens_node_energy_joules_total",
            &[
                ("domain", domain),
                ("source", source),
                ("provenance", basis.label()),
            ],
            j.shown(),
        );
    }
    w.family(
        "powerlens_idle_energy_joules_total",
        "counter",
        Some("joules"),
        "The idle (baseline) share of the node's energy, per domain: the idle power times the time.",
    );
    for (domain, j) in mon.idle() {
        w.sample(
            "powerlens_idle_energy_joules_total",
            &[("domain", domain)],
            j.shown(),
        );
    }
    w.family(
        "powerlens_node_power_watts",
        "gauge",
        Some("watts"),
        "The node's power over the last interval (domains that count in the total).",
    );
    if let Some(p) = mon.last_power_w() {
        w.sample("powerlens_node_power_watts", &[], p);
    }

    let process_rows: Vec<(Vec<(&str, String)>, Counters)> = if !m.per_process {
        Vec::new()
    } else {
        mon.processes()
            .iter()
            .map(|(k, s)| {
                // A per-pid series names its process; a (cgroup, comm) series has no pid.
                let mut l: Vec<(&str, String)> = k
                    .key
                    .map(|key| ("pid", key.pid.to_string()))
                    .into_iter()
                    .collect();
                l.push(("comm", k.comm.clone()));
                l.extend(cgroup_labels(&k.cgroup));
                l.push(("provenance", k.basis.label().to_string()));
                (l, s.counters.shown())
            })
            .chain(mon.other().iter().map(|(basis, c)| {
                (
                    vec![
                        ("comm", "other".to_string()),
                        ("provenance", basis.label().to_string()),
                    ],
                    c.shown(),
                )
            }))
            .collect()
    };
    let labels =
        |l: &Vec<(&'static str, String)>, with_provenance: bool| -> Vec<(&'static str, String)> {
            l.iter()
                .filter(|(k, _)| with_provenance || *k != "provenance")
                .cloned()
                .collect()
        };
    let emit =
        |w: &mut Writer, name: &str, l: Vec<(&str, String)>, extra: &[(&str, &str)], v: f64| {
            let mut all: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
            all.extend_from_slice(extra);
            w.sample(name, &all, v);
        };
    if m.per_process {
        w.family(
        "powerlens_process_energy_joules_total",
        "counter",
        Some("joules"),
        "Energy attributed to processes: the node's energy less the idle share, split by the CPU time the scheduler charged each process. A series holds the processes of one name in one cgroup (one process with a pid label under --by pid); the top series of each interval are added to, comm=\"other\" holds the rest, so that processes + idle = node.",
    );
        for (l, c) in &process_rows {
            emit(
                &mut w,
                "powerlens_process_energy_joules_total",
                labels(l, true),
                &[],
                c.energy_j,
            );
        }
        w.family(
        "powerlens_process_cpu_seconds_total",
        "counter",
        Some("seconds"),
        "CPU time of the process, the kernel's own account (sched_stat_runtime when traced throughout, /proc/PID/stat otherwise).",
    );
        for (l, c) in &process_rows {
            emit(
                &mut w,
                "powerlens_process_cpu_seconds_total",
                labels(l, false),
                &[],
                c.cpu_s,
            );
        }
        if m.traced {
            // In windows the counts are estimates: say so in every wake-up family's help.
            let basis = if m.trace_duty < 1.0 {
                format!(
                    " Estimated: the wake-ups seen while the agent traced ({}% of each interval, at a random place in it) times the interval over the time traced.",
                    number(m.trace_duty * 100.0)
                )
            } else {
                String::new()
            };
            w.family(
            "powerlens_process_wakeups_total",
            "counter",
            None,
            &format!("Wake-ups the process's threads received, by what issued them: another thread, a timer, an interrupt (hardware or softirq) or an IPI / idle CPU.{basis}"),
        );
            for (l, c) in &process_rows {
                let wk = &c.wakeups;
                for (cause, n) in [
                    ("thread", wk.thread),
                    ("timer", wk.timer),
                    ("irq", wk.irq + wk.softirq),
                    ("ipi", wk.ipi_or_idle),
                ] {
                    emit(
                        &mut w,
                        "powerlens_process_wakeups_total",
                        labels(l, false),
                        &[("cause", cause)],
                        n,
                    );
                }
            }
            w.family(
            "powerlens_process_idle_wakeups_total",
            "counter",
            None,
            &format!("Times a thread of the process was the first to run on a CPU that had been idle: each one pulled a CPU out of an idle state.{basis}"),
        );
            for (l, c) in &process_rows {
                emit(
                    &mut w,
                    "powerlens_process_idle_wakeups_total",
                    labels(l, false),
                    &[],
                    c.wakeups.idle,
                );
            }
            w.family(
            "powerlens_process_unrecorded_wakeups_total",
            "counter",
            None,
            &format!("Times a thread of the process ran again after blocking with no wake-up recorded (a lost record, or a wake-up issued where the kernel fires no tracepoint): powerlens_process_wakeups_total is short of these, and the two together bound the idle wake-ups.{basis}"),
        );
            for (l, c) in &process_rows {
                emit(
                    &mut w,
                    "powerlens_process_unrecorded_wakeups_total",
                    labels(l, false),
                    &[],
                    c.wakeups.unrecorded,
                );
            }
            w.family(
            "powerlens_process_tracing_cpu_seconds_total",
            "counter",
            Some("seconds"),
            "CPU time the agent's own tracing cost the process (inside powerlens_process_cpu_seconds_total): the events recorded in its threads' context times each kind's cost, measured when the agent started. Estimated: the direct cost of each event, a lower bound.",
        );
            for (l, c) in &process_rows {
                emit(
                    &mut w,
                    "powerlens_process_tracing_cpu_seconds_total",
                    labels(l, false),
                    &[],
                    c.tracing_cpu_s,
                );
            }
        }
    }
    w.family(
        "powerlens_cgroup_energy_joules_total",
        "counter",
        Some("joules"),
        "Energy attributed to the processes of each cgroup (v2 path), every process counted whatever its rank; unit, container_id and pod_uid when the path names them.",
    );
    for ((cgroup, basis), j) in mon.cgroups() {
        let mut l = cgroup_labels(cgroup);
        l.insert(1, ("provenance", basis.label().to_string()));
        let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        w.sample("powerlens_cgroup_energy_joules_total", &l, j.shown());
    }
    w.family(
        "powerlens_cpu_idle_state_seconds_total",
        "counter",
        Some("seconds"),
        "Time each CPU spent in each idle state since boot, the kernel's cpuidle counters.",
    );
    for (cpu, state, s) in m.idle_states {
        w.sample(
            "powerlens_cpu_idle_state_seconds_total",
            &[("cpu", &cpu.to_string()), ("state", state)],
            *s,
        );
    }
    if let Some(lost) = m.lost_records {
        w.family(
            "powerlens_lost_records_total",
            "counter",
            None,
            "Trace records lost because a ring filled faster than the agent read it (raise --buffer-pages).",
        );
        w.sample("powerlens_lost_records_total", &[], lost as f64);
    }
    if m.traced {
        w.family(
            "powerlens_tracing_cpu_seconds_total",
            "counter",
            Some("seconds"),
            "CPU time the agent's tracing cost the processes it watches, all of them (the tracepoint handlers run in their time, not the agent's: it is not in powerlens_self_cpu_seconds_total). Estimated: the events recorded in each process's threads times each kind's cost, measured when the agent started; a lower bound.",
        );
        w.sample(
            "powerlens_tracing_cpu_seconds_total",
            &[],
            mon.tracing_cpu_s(),
        );
        w.family(
            "powerlens_traced_seconds_total",
            "counter",
            Some("seconds"),
            "Time the agent's tracepoints were on: the intervals' length when it traces throughout, --trace-duty of them when it traces in windows. The wake-up counters are scaled by the time elapsed over this.",
        );
        w.sample("powerlens_traced_seconds_total", &[], mon.traced_s());
    }
    w.family(
        "powerlens_self_cpu_seconds_total",
        "counter",
        Some("seconds"),
        "CPU time the agent itself used (user + system, getrusage).",
    );
    w.sample("powerlens_self_cpu_seconds_total", &[], m.self_cpu_s);
    w.family(
        "powerlens_self_resident_memory_bytes",
        "gauge",
        Some("bytes"),
        "The agent's resident memory.",
    );
    w.sample(
        "powerlens_self_resident_memory_bytes",
        &[],
        m.self_resident_bytes as f64,
    );
    w.family(
        "powerlens_intervals_total",
        "counter",
        None,
        "Intervals the agent has closed.",
    );
    w.sample("powerlens_intervals_total", &[], mon.intervals() as f64);
    w.family(
        "powerlens_build_info",
        "info",
        None,
        "The agent's version, how it measures (trace: tracing throughout; windows: procfs for CPU time, tracing for trace_duty of each interval; reduced: procfs samples, with the reason), the path its tracing takes (bpf: switches and wake-ups collected in the kernel by BPF programs, the rest through perf ring buffers; perf_ring: perf ring buffers, one per CPU, throughout; none when reduced), the share of time it traces and its interval.",
    );
    // A reduced agent traces nothing, whatever it was asked.
    let tracing_path = if m.mode == "reduced" {
        "none"
    } else {
        m.tracing_path
    };
    w.sample(
        "powerlens_build_info",
        &[
            ("version", m.version),
            ("mode", m.mode),
            ("tracing_path", tracing_path),
            ("reason", m.mode_reason),
            ("trace_duty", &number(m.trace_duty)),
            ("interval_seconds", &number(m.interval_s)),
        ],
        1.0,
    );
    if format == Format::OpenMetrics {
        w.out.push_str("# EOF\n");
    }
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::monitor::{
        Basis, DomainInterval, IntervalInput, MonitorConfig, ProcessInfo, ProcessInterval,
        ProcessKey,
    };
    use powerlens_core::sched::analysis::WakeupCauses;
    use powerlens_core::sched::tracing_cost::PATH_PERF_RING;

    /// Per pid: the tests that name a process by its pid label.
    fn monitor() -> Monitor {
        monitor_keyed(true)
    }

    fn monitor_keyed(per_pid: bool) -> Monitor {
        let mut m = Monitor::new(MonitorConfig {
            top: 1,
            min_cpu: 0.0,
            per_pid,
            ..MonitorConfig::default()
        });
        let p = |pid: u32, comm: &str, ns: u64| ProcessInterval {
            info: ProcessInfo {
                key: ProcessKey {
                    pid,
                    serial: pid as u64,
                },
                comm: comm.into(),
                any_comm: String::new(),
                cgroup: Some("/system.slice/a\"b.service".into()),
                parent: None,
            },
            runtime_ns: ns,
            wakeups: WakeupCauses {
                timer: 3,
                softirq: 1,
                irq: 1,
                ..WakeupCauses::default()
            },
            idle_wakeups: 2,
            unrecorded_wakeups: 1,
            // Exact in binary: 0.25 s for pid 10, 0.5 s for pid 11.
            tracing_cpu_s: if pid == 10 { 0.25 } else { 0.5 },
        };
        m.close_interval(IntervalInput {
            end_ns: 1_000_000_000,
            elapsed_s: 1.0,
            domains: vec![DomainInterval {
                name: "package-0".into(),
                joules: 10.0,
                counts_in_total: true,
                idle_w: 2.0,
            }],
            source: "rapl-powercap".into(),
            basis: Basis::Measured,
            processes: vec![p(10, "spin\nner", 3), p(11, "x", 1)],
            traced_s: 1.0,
        });
        m
    }

    fn metrics(m: &mut Monitor) -> AgentMetrics<'_> {
        // As the agent does after a scrape: the test reads the values a second scrape shows.
        m.mark_shown();
        AgentMetrics {
            monitor: m,
            traced: true,
            per_process: true,
            mode: "trace",
            trace_duty: 1.0,
            mode_reason: "",
            version: "0.1.0",
            tracing_path: PATH_PERF_RING,
            idle_states: &[],
            lost_records: Some(0),
            self_cpu_s: 0.5,
            self_resident_bytes: 1 << 20,
            interval_s: 1.0,
        }
    }

    /// Issue 28: the agent says what its tracing cost the processes it watches, per
    /// process and in total, and says nothing of it when it does not trace.
    #[test]
    fn the_agent_exports_its_tracing_cost_to_the_watched_processes() {
        let mut m = monitor();
        let text = render(&metrics(&mut m), Format::Text);
        assert!(text.contains("# TYPE powerlens_process_tracing_cpu_seconds_total counter"));
        let value = |line_start: &str| {
            text.lines()
                .find(|l| l.starts_with(line_start))
                .unwrap_or_else(|| panic!("no {line_start} in\n{text}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
        };
        assert_eq!(
            value("powerlens_process_tracing_cpu_seconds_total{pid=\"10\""),
            0.25
        );
        // Top 1: pid 11 is in `other`.
        assert_eq!(
            value("powerlens_process_tracing_cpu_seconds_total{comm=\"other\""),
            0.5
        );
        assert_eq!(value("powerlens_tracing_cpu_seconds_total "), 0.75);
        let mut reduced = metrics(&mut m);
        reduced.traced = false;
        let text = render(&reduced, Format::Text);
        assert!(!text.contains("tracing_cpu_seconds"), "{text}");
    }

    #[test]
    fn text_exposition_escapes_labels_and_closes_on_the_node() {
        let mut m = monitor();
        let text = render(&metrics(&mut m), Format::Text);
        assert!(text.contains("# TYPE powerlens_node_energy_joules_total counter"));
        assert!(text.contains(
            "powerlens_node_energy_joules_total{domain=\"package-0\",source=\"rapl-powercap\",provenance=\"measured\"} 10"
        ));
        assert!(text.contains("comm=\"spin\\nner\""), "newline escaped");
        assert!(
            text.contains("cgroup=\"/system.slice/a\\\"b.service\""),
            "quote escaped"
        );
        assert!(text.contains(
            "powerlens_process_energy_joules_total{comm=\"other\",provenance=\"measured\"} 2"
        ));
        assert!(
            text.contains("cause=\"irq\"} 2"),
            "irq and softirq together"
        );
        assert!(!text.contains("# EOF"));
        assert!(text.contains("# TYPE powerlens_build_info gauge"));
        // Σ process energy + idle = node, read back from the text.
        let value = |prefix: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
                .sum()
        };
        let processes = value("powerlens_process_energy_joules_total{");
        let idle = value("powerlens_idle_energy_joules_total{");
        assert!(
            (processes + idle - 10.0).abs() < 1e-9,
            "{processes} + {idle}"
        );
    }

    #[test]
    fn openmetrics_has_units_family_names_and_eof() {
        let mut m = monitor();
        let text = render(&metrics(&mut m), Format::OpenMetrics);
        assert!(text.contains("# TYPE powerlens_node_energy_joules counter"));
        assert!(text.contains("# UNIT powerlens_node_energy_joules joules"));
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains("# TYPE powerlens_build info\npowerlens_build_info{"));
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
    }

    /// `--by cgroup`: the cgroups' series, none per process, and they still close.
    #[test]
    fn by_cgroup_there_are_no_process_series() {
        let mut m = monitor();
        let mut metrics = metrics(&mut m);
        metrics.per_process = false;
        let text = render(&metrics, Format::Text);
        assert!(!text.contains("powerlens_process_"), "{text}");
        let cgroups: f64 = text
            .lines()
            .filter(|l| l.starts_with("powerlens_cgroup_energy_joules_total{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum();
        assert!(
            (cgroups + 2.0 - 10.0).abs() < 1e-9,
            "cgroups {cgroups} + idle 2 = node 10"
        );
        assert!(text.contains("unit=\"a\\\"b.service\""), "{text}");
    }

    #[test]
    fn a_reduced_agent_shows_no_wakeups() {
        let mut m = monitor();
        let mut metrics = metrics(&mut m);
        metrics.traced = false;
        metrics.lost_records = None;
        let text = render(&metrics, Format::Text);
        assert!(!text.contains("wakeups"));
        assert!(!text.contains("lost_records"));
    }

    /// Issue 29: the wake-ups the trace did not see are a series of their own, so that
    /// idle wake-ups never exceed the wake-ups without a word; and an agent that traces
    /// in windows says its wake-ups are estimates, and for how much of the time it traced.
    #[test]
    fn unrecorded_wakeups_and_the_traced_time_are_series_and_windows_are_said() {
        let mut m = monitor();
        let mut metrics = metrics(&mut m);
        let text = render(&metrics, Format::Text);
        assert!(
            text.contains(
                "powerlens_process_unrecorded_wakeups_total{pid=\"10\",comm=\"spin\\nner\","
            ),
            "{text}"
        );
        assert!(
            text.contains("powerlens_traced_seconds_total 1\n"),
            "{text}"
        );
        assert!(
            !text.contains("Estimated: the wake-ups seen"),
            "traced throughout: exact"
        );
        metrics.mode = "windows";
        metrics.trace_duty = 0.05;
        let text = render(&metrics, Format::Text);
        let help = text
            .lines()
            .find(|l| l.starts_with("# HELP powerlens_process_wakeups_total"))
            .unwrap();
        assert!(
            help.contains(
                "Estimated: the wake-ups seen while the agent traced (5% of each interval"
            ),
            "{help}"
        );
        assert!(text.contains("mode=\"windows\""), "{text}");
        assert!(text.contains("tracing_path=\"perf_ring\""), "{text}");
        assert!(text.contains("trace_duty=\"0.05\""), "{text}");
    }

    /// Issue 29, series a fleet can keep: by default a process series is keyed by its
    /// cgroup (with the unit the path names) and its name, with no pid label.
    #[test]
    fn by_default_process_series_have_no_pid_and_name_their_unit() {
        let mut m = monitor_keyed(false);
        let text = render(&metrics(&mut m), Format::Text);
        assert!(!text.contains("pid=\""), "{text}");
        assert!(
            text.contains(
                "powerlens_process_energy_joules_total{comm=\"spin\\nner\",cgroup=\"/system.slice/a\\\"b.service\",unit=\"a\\\"b.service\",provenance=\"measured\"} "
            ),
            "{text}"
        );
        assert!(text.contains(
            "powerlens_process_cpu_seconds_total{comm=\"spin\\nner\",cgroup=\"/system.slice/a\\\"b.service\",unit=\"a\\\"b.service\"} "
        ));
    }
}
