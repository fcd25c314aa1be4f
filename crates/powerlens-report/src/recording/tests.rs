use super::*;
use crate::names::NameFit;
use powerlens_core::provenance::Provenance;
use powerlens_core::sched::event::{Event, EventKind, InterruptKind, SwitchedOut, IDLE_TID};
use powerlens_core::sched::report::RecordingReport;
use powerlens_core::sched::report::{
    build, EnergyInput, IdleStateInfo, RecordingContext, SysfsIdle, ThreadInfo,
};

const MS: u64 = 1_000_000;

fn switch(t: u64, cpu: u32, prev: u32, how: SwitchedOut, next: u32) -> Event {
    Event {
        time_ns: t * MS,
        cpu,
        kind: EventKind::Switch { prev, how, next },
    }
}

fn ev(t: u64, cpu: u32, kind: EventKind) -> Event {
    Event {
        time_ns: t * MS,
        cpu,
        kind,
    }
}

fn wakeup(t: u64, cpu: u32, tid: u32) -> Event {
    ev(
        t,
        cpu,
        EventKind::Wakeup {
            tid,
            target_cpu: cpu,
            new_thread: false,
        },
    )
}

/// Process 100 (solver: 100, 101) and process 200 (logger: 200) on 2 CPUs, 100 ms.
/// cpu0: 100 runs 0..60, preempted by 200 (60..70), 100 again 70..80, then idle.
/// cpu1: idle until 101 is woken by 100 at 10 (switch at 12), 101 runs 12..50, blocks;
/// a timer wakes 200 at 90 on cpu1, which runs 90..100. The switch-in of 101 is lost.
fn stream() -> Vec<Event> {
    use SwitchedOut::*;
    vec![
        switch(0, 0, IDLE_TID, Preempted, 100),
        switch(0, 1, 200, Blocked, IDLE_TID),
        wakeup(10, 0, 101),
        // (lost: switch idle → 101 on cpu1 at 12)
        switch(50, 1, 101, Blocked, IDLE_TID),
        wakeup(59, 0, 200),
        switch(60, 0, 100, Preempted, 200),
        switch(70, 0, 200, Blocked, 100),
        switch(80, 0, 100, Blocked, IDLE_TID),
        ev(
            89,
            1,
            EventKind::InterruptEnter(InterruptKind::Timer {
                timer: 0,
                function: 0,
            }),
        ),
        wakeup(89, 1, 200),
        ev(89, 1, EventKind::InterruptExit),
        switch(90, 1, IDLE_TID, Preempted, 200),
    ]
}

fn context(energy: bool) -> RecordingContext {
    let info = |tid, pid, comm: &str| ThreadInfo {
        tid,
        pid,
        comm: comm.into(),
    };
    let sysfs = |cpu, index, entries, ms: u64| SysfsIdle {
        cpu,
        index,
        entries,
        time_ns: ms * MS,
    };
    RecordingContext {
        threads: vec![
            info(100, 100, "solver"),
            info(101, 100, "solver-w1"),
            info(200, 200, "logger"),
        ],
        target_pids: Some([100].into_iter().collect()),
        idle_states: Ok(vec![
            IdleStateInfo {
                index: 0,
                name: "POLL".into(),
                latency_us: 0,
                target_residency_us: 0,
            },
            IdleStateInfo {
                index: 1,
                name: "C1".into(),
                latency_us: 2,
                target_residency_us: 20_000,
            },
        ]),
        sysfs_idle: Ok(vec![
            sysfs(0, 0, 2, 5),
            sysfs(0, 1, 1, 15),
            sysfs(1, 0, 3, 10),
            sysfs(1, 1, 2, 50),
        ]),
        energy: if energy {
            Ok(EnergyInput {
                total_j: 3.0,
                domains: vec![("package-0".into(), 3.0), ("package-0/core".into(), 2.0)],
                provenance: Provenance::Measured {
                    source: "fake-meter".into(),
                },
                idle_power_w: 10.0,
            })
        } else {
            Err(Provenance::Unavailable {
                reason: "no energy source on this machine".into(),
                fix: Some("powerlens record --meter CMD".into()),
            })
        },
        frequency_samples: Vec::new(),
        lost_records: vec![(0, 0), (1, 2)],
        unavailable_events: Vec::new(),
        span: None,
        tracing_cost: Err("not measured in this fixture".into()),
        tracing_path: None,
        recorder_pid: None,
        start_up_s: None,
        untraced: Default::default(),
    }
}

fn report(energy: bool) -> RecordingReport {
    let ctx = context(energy);
    let mut a = ctx.analysis();
    for e in stream() {
        a.feed(&e);
    }
    build(&a.finish(100 * MS), &ctx)
}

fn opts(
    by: By,
    sort: Option<&str>,
    top: Option<usize>,
    show: &[&str],
    hide: &[&str],
) -> GridOptions {
    GridOptions {
        by,
        sort: sort.map(str::to_string),
        top,
        show: show.iter().map(|s| s.to_string()).collect(),
        hide: hide.iter().map(|s| s.to_string()).collect(),
        names: NameFit::Full,
    }
}

/// The recording's measured cost per event with the fixture stream: the target
/// (pid 100) has 3 switches (100 at 60 and 80 ms, 101 at 50 ms) and 2 wake-ups (100's,
/// at 10 and 59 ms) in its threads' context; the other events are the logger's or the
/// idle task's.
fn traced_report(switch_ns: f64, waking_ns: f64) -> RecordingReport {
    traced_report_with_stacks(switch_ns, waking_ns, None)
}

/// As [`traced_report`], with sampled stacks costing `stack_ns` apart on each switch that
/// carried one (the fixture stream has no stacks).
fn traced_report_with_stacks(
    switch_ns: f64,
    waking_ns: f64,
    stack_ns: Option<f64>,
) -> RecordingReport {
    report_of(&traced_context(switch_ns, waking_ns, stack_ns))
}

/// The HTML page of a report of the fixture stream, by thread, without counters.
fn html_of(report: &RecordingReport) -> String {
    let timeline = crate::html::TimelineBuilder::new(0, 100 * MS, &[], 10).finish();
    crate::html::page(&crate::html::HtmlInput {
        title: "t",
        report,
        grid: &opts(By::Thread, None, None, &[], &[]),
        counters: &[],
        counters_missing: "no meter",
        timeline: &timeline,
        frequency_samples: &[],
    })
    .unwrap()
}

/// The fixture stream's report with `ctx`.
fn report_of(ctx: &RecordingContext) -> RecordingReport {
    let mut a = ctx.analysis();
    for e in stream() {
        a.feed(&e);
    }
    build(&a.finish(100 * MS), ctx)
}

/// The context of [`traced_report_with_stacks`].
fn traced_context(switch_ns: f64, waking_ns: f64, stack_ns: Option<f64>) -> RecordingContext {
    use powerlens_core::sched::tracing_cost::{
        EventCosts, TracingPath, PATH_PERF_RING, SWITCH, UNWIND_STACK_COPY, WAKING,
    };
    let mut ctx = context(true);
    ctx.tracing_path = Some(TracingPath {
        events: PATH_PERF_RING.to_string(),
        in_kernel_events: Vec::new(),
        stack_unwinding: Some(UNWIND_STACK_COPY.to_string()),
        user_stack_bytes: Some(512),
        stack_samples_per_s: Some(10_000),
        max_stack_sample_period: Some(37),
        stack_samples_dropped: Some(3),
    });
    ctx.tracing_cost = Ok(EventCosts {
        event_cost_ns: [
            (SWITCH.to_string(), switch_ns),
            (WAKING.to_string(), waking_ns),
        ]
        .into_iter()
        .collect(),
        stack_cost_ns: stack_ns
            .map(|ns| (SWITCH.to_string(), ns))
            .into_iter()
            .collect(),
        stacks: true,
        ..Default::default()
    });
    // The logger process as the recorder: 200 runs 60..70 on cpu0 and 90..100 on cpu1.
    ctx.recorder_pid = Some(200);
    ctx
}

/// Issue 28: with the command's untraced runs (`record --untraced-runs`), the report sets
/// what recording added, measured, beside the estimate, in text, JSON and HTML; and says
/// why not when the recorded run's CPU time is not known.
#[test]
fn untraced_runs_set_what_recording_added_beside_the_estimate() {
    use powerlens_core::run::ExitStatus;
    use powerlens_core::sched::untraced::{UntracedRecord, UntracedRun};
    let run = |cpu_s, wall_s| UntracedRun {
        cpu_s,
        wall_s,
        exit: ExitStatus {
            code: Some(0),
            signal: None,
        },
    };
    let mut ctx = traced_context(10e6, 5e6, None);
    ctx.untraced = UntracedRecord {
        runs: vec![run(0.05, 0.09), run(0.07, 0.11), run(0.06, 0.10)],
        recorded_cpu_s: Some(0.12),
        recorded_wall_s: Some(0.15),
        unreadable: None,
    };
    let r = report_of(&ctx);
    // By hand: the median 0.06 s; 0.12 − 0.06 = 0.06 s added (100%); the target's
    // estimate is 0.040 s (3 switches × 10 ms + 2 wake-ups × 5 ms), 67% of it.
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    let u = &v["system"]["perturbation"]["untraced_runs"];
    assert_eq!(u["runs"], 3);
    assert_eq!(u["median_cpu_s"], 0.06);
    assert_eq!(u["recorded_cpu_s"], 0.12);
    assert!(
        (u["added_cpu_s"].as_f64().unwrap() - 0.06).abs() < 1e-12,
        "{u}"
    );
    assert!(
        (u["estimate_share"].as_f64().unwrap() - 0.04 / 0.06).abs() < 1e-9,
        "{u}"
    );
    // The wall time: 0.15 s against a median 0.10 s, 1.5×.
    assert_eq!(u["recorded_wall_s"], 0.15);
    assert_eq!(u["median_wall_s"], 0.1);
    assert!(
        (u["wall_ratio"].as_f64().unwrap() - 1.5).abs() < 1e-9,
        "{u}"
    );
    let text = system(&r);
    let line = "untraced               measured against 3 untraced runs of the command (getrusage): recorded, it used 0.120 s of CPU time, untraced a median 0.060 s (0.050–0.070 s): recording added 0.060 s (100%), and the estimate above is 67% of it. The rest is not the events' own cost";
    assert!(text.contains(line), "{text}");
    let wall =
        ". Its wall time: 0.150 s recorded, untraced a median 0.100 s (0.090–0.110 s), 1.50×\n";
    assert!(text.contains(wall), "{text}");
    let html = html_of(&r);
    assert!(
        html.contains("Untraced runs: measured against 3 untraced runs of the command"),
        "{html}"
    );
    // Without them: no key, no line.
    let plain: serde_json::Value = serde_json::from_str(&json(&traced_report(10e6, 5e6))).unwrap();
    assert!(plain["system"]["perturbation"]
        .get("untraced_runs")
        .is_none());
    assert!(!system(&traced_report(10e6, 5e6)).contains("untraced   "));
    // A command that did not exit while recorded: no comparison, and the report says why.
    ctx.untraced.recorded_cpu_s = None;
    let cut = report_of(&ctx);
    assert!(cut
        .system
        .perturbation
        .as_ref()
        .unwrap()
        .untraced_runs
        .is_none());
    let missing = cut
        .unavailable
        .iter()
        .find(|u| u.figure.contains("perturbation.untraced_runs"))
        .expect("the comparison is said to be unavailable");
    assert!(
        missing
            .reason
            .contains("did not exit while it was recorded"),
        "{missing:?}"
    );
}

/// Issue 28: with sampled stacks the report gives what a stack adds apart
/// (`system.tracing_stack_cost_ns`) and says so in the provenance; only events that
/// carried a stack pay it (this stream has none: the target's estimate is unchanged).
#[test]
fn a_sampled_stack_costs_apart_and_only_where_one_was_recorded() {
    let r = traced_report_with_stacks(10e6, 5e6, Some(1e6));
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert_eq!(v["system"]["tracing_stack_cost_ns"]["sched_switch"], 1e6);
    let p = r.system.perturbation.as_ref().unwrap();
    assert!((p.tracing_cpu_s - 0.040).abs() < 1e-12, "{p:?}");
    let provenance = v["system"]["tracing_provenance"].as_str().unwrap();
    assert!(
        provenance
            .contains("carried a sampled stack, what the stack added (sched_switch 1000000 ns)"),
        "{provenance}"
    );
    // Without sampled stacks the key is absent.
    let v: serde_json::Value = serde_json::from_str(&json(&traced_report(10e6, 5e6))).unwrap();
    assert!(v["system"].get("tracing_stack_cost_ns").is_none());
}

/// Issue 28: the perturbation line, past the 10% threshold and below it, in text, JSON
/// and HTML, with the target's tracing time computed by hand from the stream.
#[test]
fn the_perturbation_line_warns_past_its_threshold_in_text_json_and_html() {
    // 3 × 10 ms + 2 × 5 ms of the target's CPU time: past 10% of it.
    let heavy = traced_report(10e6, 5e6);
    let p = heavy.system.perturbation.as_ref().unwrap();
    assert!((p.tracing_cpu_s - 0.040).abs() < 1e-12, "{p:?}");
    assert!(p.slowed, "{p:?}");
    let text = system(&heavy);
    assert!(
        text.contains("WARNING: tracing cost the target an estimated 0.040 s of its"),
        "{text}"
    );
    assert!(
        text.contains("describe a run slowed by the tracing"),
        "{text}"
    );
    assert!(text.contains("--no-stacks"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&json(&heavy)).unwrap();
    assert_eq!(v["system"]["perturbation"]["slowed"], true);
    // What the recorder (here the logger, by hand 20 ms) ran beside the target, apart.
    let recorder = v["system"]["perturbation"]["recorder_cpu_s"]
        .as_f64()
        .unwrap();
    assert!((recorder - 0.020).abs() < 1e-12, "{recorder}");
    let recorder_line =
        "recorder               powerlens's own threads used 0.020 s of CPU time beside the target";
    assert!(text.contains(recorder_line), "{text}");
    assert_eq!(v["system"]["tracing_event_cost_ns"]["sched_switch"], 10e6);
    // The whole recording: also the logger's 2 switches (0 and 70 ms) and the idle
    // task's 2 switches and wake-up.
    let whole = v["system"]["tracing_cpu_s"].as_f64().unwrap();
    assert!(
        (whole - (7.0 * 10e6 + 3.0 * 5e6) / 1e9).abs() < 1e-12,
        "{whole}"
    );
    let rows = v["threads"].as_array().unwrap();
    let row = |tid: u64| rows.iter().find(|r| r["tid"] == tid).unwrap();
    assert!((row(100)["tracing_cpu_s"].as_f64().unwrap() - 0.030).abs() < 1e-12);
    assert!((row(101)["tracing_cpu_s"].as_f64().unwrap() - 0.010).abs() < 1e-12);
    // Its energy is the row's energy in the proportion of its CPU time.
    let r100 = row(100);
    let share = r100["tracing_cpu_s"].as_f64().unwrap() / r100["cpu_time_s"].as_f64().unwrap();
    let expected = r100["energy_j"].as_f64().unwrap() * share;
    assert!((r100["tracing_energy_j"].as_f64().unwrap() - expected).abs() < 1e-12);
    assert!(v["system"]["tracing_provenance"]
        .as_str()
        .unwrap()
        .starts_with("estimated: "));
    let html = html_of(&heavy);
    assert!(
        html.contains("Perturbation — WARNING: tracing cost the target an estimated 0.040 s"),
        "{html}"
    );
    assert!(
        html.contains("Recorder: powerlens&#39;s own threads used 0.020 s of CPU time"),
        "{html}"
    );
    // Every traced recording says which path it took, in each form.
    assert_eq!(v["system"]["tracing_path"]["events"], "perf_ring");
    assert_eq!(v["system"]["tracing_path"]["stack_unwinding"], "stack_copy");
    assert_eq!(v["system"]["tracing_path"]["user_stack_bytes"], 512);
    assert_eq!(v["system"]["tracing_path"]["stack_samples_per_s"], 10_000);
    assert_eq!(v["system"]["tracing_path"]["max_stack_sample_period"], 37);
    assert_eq!(v["system"]["tracing_path"]["stack_samples_dropped"], 3);
    assert!(
        text.contains("sampled to at most 10000 a second per CPU and event (down to 1 in 37)"),
        "{text}"
    );
    assert!(
        text.contains("; 3 stack samples dropped (their event's record did not follow them)"),
        "{text}"
    );
    let path = "perf ring buffers, one per CPU; stacks at switches, wake-ups and timer arming unwound from a 512-byte copy of the thread's stack";
    assert!(
        text.contains(&format!("tracing path           {path}")),
        "{text}"
    );
    let escaped = path.replace('\'', "&#39;");
    assert!(html.contains(&format!("Tracing path: {escaped}")), "{html}");

    // 3 × 10 µs: well under 10%: said, without a warning, and not as 0.000 s.
    let light = traced_report(10e3, 0.0);
    let p = light.system.perturbation.as_ref().unwrap();
    assert!(!p.slowed, "{p:?}");
    let text = system(&light);
    assert!(
        text.contains("tracing cost the target an estimated 0.000030 s"),
        "{text}"
    );
    assert!(!text.contains("WARNING"), "{text}");

    // A recording without measured costs says the figure is unavailable, not zero.
    let old = report(true);
    assert!(old.system.perturbation.is_none());
    assert!(old
        .unavailable
        .iter()
        .any(|u| u.figure.starts_with("tracing cost")));
}

/// Issue 17 point 1: an estimate by the model chosen for the machine's class says which
/// model, for which class and why, in the energy section (text and the HTML page's
/// paragraphs) and in the JSON provenance.
#[test]
fn an_estimate_names_its_machine_class_and_why() {
    let model = powerlens_core::model::PowerModel::for_machine(
        &powerlens_core::model::class::MachineFacts {
            cpu_model: Some("AMD EPYC 7B13 64-Core Processor".into()),
            logical_cpus: 128,
            ..Default::default()
        },
    );
    let mut ctx = context(false);
    ctx.energy = Ok(EnergyInput {
        total_j: model.energy_j(0.1, 0.11),
        domains: vec![("system".into(), model.energy_j(0.1, 0.11))],
        provenance: model.provenance(),
        idle_power_w: model.idle_w,
    });
    let mut a = ctx.analysis();
    for e in stream() {
        a.feed(&e);
    }
    let r = build(&a.finish(100 * MS), &ctx);
    let text = energy(&r);
    assert!(
            text.contains("[estimated (server-vcpu-linear)]")
                && text.contains("model: server-vcpu-linear is the power model for a server machine, chosen because AMD EPYC 7B13 64-Core Processor is a server part (EPYC)\n"),
            "{text}"
        );
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    let p = &v["energy"]["provenance"];
    assert_eq!(p["machine_class"], "server", "{p}");
    assert_eq!(
        p["machine_class_reason"],
        "AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"
    );
    // A measured figure has no model to explain.
    assert!(!energy(&report(true)).contains("model:"));
}

#[test]
fn default_thread_grid_snapshot() {
    let g = grid(&report(true), &GridOptions::default()).unwrap();
    assert_eq!(
            g,
            "\
tid  pid  command      CPU s  sync sw  preempt sw   wait s  inactive s  migr  woken  woke others  idle wake-ups  idle before µs  energy J
100  100  solver     0.07000        1           1  0.02000     0.01000     0      0            2              1               0     1.077
101  100  solver-w1  0.04000        1           0  0.05000           0     0      1            0              1           10000    0.6154
          total       0.1100        2           1  0.07000     0.01000     0      1            2              2            5000     1.692
"
        );
}

#[test]
fn sort_top_and_show() {
    let r = report(true);
    let g = grid(
        &r,
        &opts(
            By::Thread,
            Some("wait_time_s"),
            Some(1),
            &["tid", "comm", "cpu_time_s", "wait_time_s", "energy_j"],
            &[],
        ),
    )
    .unwrap();
    assert_eq!(
        g,
        "\
tid  command         CPU s   wait s  energy J
101  solver-w1     0.04000  0.05000    0.6154
     total, all 2   0.1100  0.07000     1.692
"
    );
    // Text columns sort ascending, numbers descending.
    let by_comm = grid(&r, &opts(By::Thread, Some("comm"), None, &["comm"], &[])).unwrap();
    assert_eq!(by_comm, "command\nsolver\nsolver-w1\ntotal\n");
    let by_cpu = grid(&r, &opts(By::Thread, None, None, &["tid"], &[])).unwrap();
    assert_eq!(by_cpu, "tid\n100\n101\ntotal\n");
    let all = grid(&r, &opts(By::Thread, None, None, &["all"], &["pid"])).unwrap();
    assert!(all.starts_with("tid  command"), "{all}");
    assert!(all.contains("by timer") && all.contains("MHz"), "{all}");
}

#[test]
fn process_grid_with_hidden_columns() {
    let g = grid(
        &report(true),
        &opts(
            By::Process,
            None,
            None,
            &[],
            &[
                "sync_switches",
                "preempt_switches",
                "wait_time_s",
                "inactive_time_s",
                "migrations",
                "wakeups_received_total",
                "wakeups_caused",
            ],
        ),
    )
    .unwrap();
    assert_eq!(
        g,
        "\
pid  command  threads   CPU s  idle wake-ups  idle before µs  parallelism  energy J
100  solver         2  0.1100              2            5000        1.571     1.692
     total          2  0.1100              2            5000                  1.692
"
    );
}

#[test]
fn unknown_columns_list_the_valid_ones() {
    let r = report(true);
    let e = grid(&r, &opts(By::Thread, Some("energy"), None, &[], &[])).unwrap_err();
    assert_eq!((e.option, e.name.as_str()), ("--sort", "energy"));
    let msg = e.to_string();
    assert!(
            msg.starts_with("--sort: unknown column 'energy' for the thread grid; valid columns: tid, pid, comm, cpu_time_s,"),
            "{msg}"
        );
    assert!(msg.contains("energy_j (see --list)"), "{msg}");
    // A process-only column in the thread grid, and the reverse.
    let e = grid(&r, &opts(By::Thread, None, None, &["threads"], &[])).unwrap_err();
    assert_eq!(e.option, "--show");
    let e = csv(&r, &opts(By::Process, None, None, &[], &["tid"])).unwrap_err();
    assert_eq!(e.option, "--hide");
    assert!(!e.valid.contains(&"tid") && e.valid.contains(&"effective_parallelism"));
}

/// Issue 17 point 9: the text headers ("CPU s", "sync sw") are accepted as well as
/// the keys, and `--list` shows both.
#[test]
fn columns_by_their_header_too() {
    let r = report(true);
    let by_header = grid(
        &r,
        &opts(By::Thread, Some("wait s"), None, &["tid", "CPU S"], &[]),
    );
    let by_key = grid(
        &r,
        &opts(
            By::Thread,
            Some("wait_time_s"),
            None,
            &["tid", "cpu_time_s"],
            &[],
        ),
    );
    assert_eq!(by_header.unwrap(), by_key.unwrap());
    let l = list_columns(By::Thread);
    assert!(l.contains("the column key or the header"), "{l}");
    assert!(
        l.lines()
            .any(|line| line.starts_with("sync_switches") && line.contains("sync sw")),
        "{l}"
    );
}

#[test]
fn list_describes_every_column() {
    let l = list_columns(By::Thread);
    for c in columns(By::Thread) {
        assert!(
            l.lines()
                .any(|line| line.starts_with(c.key) && line.contains(c.description)),
            "{}",
            c.key
        );
    }
    assert!(
        l.contains("wakeups_timer               by timer        hidden"),
        "{l}"
    );
    assert!(!l.contains("effective_parallelism"));
    assert!(list_columns(By::Process).contains("effective_parallelism"));
}

#[test]
fn csv_one_line_per_row() {
    let r = report(true);
    let c = csv(
        &r,
        &opts(
            By::Thread,
            None,
            None,
            &[
                "tid",
                "pid",
                "comm",
                "cpu_time_s",
                "wakeups_thread",
                "mean_idle_before_wakeup_us",
                "frequency_mhz",
                "energy_j",
            ],
            &[],
        ),
    )
    .unwrap();
    assert_eq!(
        c,
        "\
tid,pid,comm,cpu_time_s,wakeups_thread,mean_idle_before_wakeup_us,frequency_mhz,energy_j
100,100,solver,0.07,0,0,,1.0769230769230769
101,100,solver-w1,0.04,1,10000,,0.6153846153846154
"
    );
    // Default CSV: every column of the grid.
    let all = csv(&r, &GridOptions::default()).unwrap();
    let header: Vec<&str> = all.lines().next().unwrap().split(',').collect();
    assert_eq!(
        header,
        columns(By::Thread)
            .iter()
            .map(|c| c.key)
            .collect::<Vec<_>>()
    );
    assert_eq!(all.lines().count(), 3);
    let p = csv(&r, &opts(By::Process, None, None, &[], &[])).unwrap();
    assert!(
        p.lines().nth(1).unwrap().starts_with("100,solver,2,0.11"),
        "{p}"
    );
}

#[test]
fn json_contract() {
    let r = report(true);
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert_eq!(v["system"]["elapsed_s"], 0.1);
    let t = &v["threads"][1];
    for key in [
        "tid",
        "pid",
        "comm",
        "cpu_time_s",
        "sync_switches",
        "preempt_switches",
        "wait_time_s",
        "inactive_time_s",
        "migrations",
        "idle_wakeups",
        "energy_j",
        "wakeups_caused",
        "mean_idle_before_wakeup_us",
    ] {
        assert!(!t[key].is_null(), "{key} in {t}");
    }
    assert_eq!(t["wakeups_received"]["thread"], 1);
    assert_eq!(t["idle_time_s"], 0.01);
    assert_eq!(
        (t["tid"].as_u64(), t["comm"].as_str()),
        (Some(101), Some("solver-w1"))
    );
    let c1 = &v["cpus"][1];
    assert_eq!(c1["cpu"], 1);
    let state = &c1["idle_states"][1];
    assert_eq!(state["name"], "C1");
    assert!(state["entries"].is_null() && state["time_s"].is_null());
    assert_eq!(
        (
            state["sysfs_entries"].as_u64(),
            state["sysfs_time_s"].as_f64()
        ),
        (Some(2), Some(0.05))
    );
    let e = &v["energy"];
    assert_eq!(e["provenance"]["kind"], "measured");
    let rows: f64 = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["energy_j"].as_f64().unwrap())
        .sum();
    let total = e["total_j"].as_f64().unwrap();
    let sum = e["idle_j"].as_f64().unwrap() + e["other_j"].as_f64().unwrap() + rows;
    assert!((sum - total).abs() <= 1e-9 * total, "{sum} vs {total}");
    assert_eq!(v["system"]["inferred_switch_ins"], 1);
    // Unavailable energy: nulls and the reason, never zeros.
    let v: serde_json::Value = serde_json::from_str(&json(&report(false))).unwrap();
    assert!(v["energy"]["total_j"].is_null() && v["threads"][0]["energy_j"].is_null());
    assert_eq!(v["energy"]["provenance"]["kind"], "unavailable");
    assert!(v["unavailable"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["figure"] == "energy" && u["fix"] == "powerlens record --meter CMD"));
}

/// Issue 17 point 9: a kernel timer reads by its name, or says it is an unnamed kernel
/// address; the idle task is named, not "0".
#[test]
fn wakeup_causes_name_kernel_timers_and_the_idle_task() {
    use powerlens_core::sched::wakeups::WakeupCause;
    let timer = |addr: &str, name: Option<&str>, tid: Option<u32>| WakeupCause {
        kind: "timer".into(),
        count: 5,
        per_s: 5.0,
        armed_by_tid: tid,
        timer_function: Some(addr.into()),
        timer_function_name: name.map(str::to_string),
        ..WakeupCause::default()
    };
    let mut r = report(true);
    r.wakeup_causes = vec![
        timer("0xffffffff814332e0", Some("tick_nohz_handler"), None),
        timer("0xffffffff81000010", None, Some(0)),
    ];
    let t = wakeup_causes(&r, NameFit::Full);
    assert!(t.contains("tick_nohz_handler (kernel)"), "{t}");
    assert!(!t.contains("0xffffffff814332e0"), "{t}");
    assert!(t.contains("0xffffffff81000010 (kernel, unnamed)"), "{t}");
    assert!(t.contains("idle task (0)"), "{t}");
}

/// Issue 46: with sampled stacks, each cause says how many of its expiries (timers) or
/// idle exits (wake-ups) are held, in a `held` column with a note under the table and as
/// `held_expiries` / `held_idle_exits` in JSON; without sampled stacks there is no column.
#[test]
fn wakeup_causes_show_what_they_hold() {
    use powerlens_core::sched::wakeups::WakeupCause;
    let mut r = report(true);
    r.wakeup_causes = vec![
        WakeupCause {
            kind: "timer".into(),
            count: 10,
            per_s: 10.0,
            armed_by_tid: Some(42),
            function: Some("short_sleeper".into()),
            expiries: Some(300),
            held_expiries: Some(12),
            ..WakeupCause::default()
        },
        WakeupCause {
            kind: "irq".into(),
            count: 3,
            per_s: 3.0,
            irq: Some("virtio0".into()),
            ..WakeupCause::default()
        },
    ];
    let t = wakeup_causes(&r, NameFit::Full);
    let mut lines = t.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let at = header
        .iter()
        .position(|h| *h == "held")
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(header[at - 1], "cause", "{t}");
    let timer: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(&timer[3..5], ["short_sleeper", "12"], "{t}");
    assert!(t.contains("\nheld: of a timer's expiries"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert_eq!(v["wakeup_causes"][0]["held_expiries"], 12);
    assert!(v["wakeup_causes"][1].get("held_expiries").is_none());
    assert!(v["wakeup_causes"][1].get("held_idle_exits").is_none());

    r.wakeup_causes[0].held_expiries = None;
    let t = wakeup_causes(&r, NameFit::Full);
    assert!(!t.contains("held"), "{t}");
}

/// Issue 30: a node recording's C++ names made every row of the text grid wrap. The
/// text cuts them to the width asked for (function grid, wake-up causes); JSON and
/// CSV keep them whole.
#[test]
fn long_names_are_cut_in_text_only() {
    const LONG: &str = "v8::internal::compiler::turboshaft::Assembler<v8::internal::compiler::turboshaft::reducer_list<v8::internal::compiler::turboshaft::MachineLoweringReducer>>::ReduceCall(v8::internal::compiler::turboshaft::OpIndex, v8::internal::compiler::turboshaft::OptionalOpIndex)";
    let cut = crate::names::elide_middle(LONG, 60);
    let mut r = report(true);
    r.functions = vec![powerlens_core::stacks::grid::FunctionRow {
        function: LONG.into(),
        module: "/usr/bin/node".into(),
        stack: None,
        cpu_time_s: 1.0,
        user_time_s: None,
        system_time_s: None,
        samples: 1000,
        sync_switches: 0,
        preempt_switches: 0,
        wait_time_s: 0.0,
        inactive_time_s: 0.0,
        idle_wakeups: 0,
        mean_idle_before_wakeup_us: None,
        idle_after_s: 0.0,
        idle_states_after: Vec::new(),
        wakeups_caused: 0,
        energy_j: Some(2.0),
    }];
    r.wakeup_causes = vec![powerlens_core::sched::wakeups::WakeupCause {
        kind: "thread".into(),
        count: 5,
        per_s: 5.0,
        function: Some(LONG.into()),
        ..powerlens_core::sched::wakeups::WakeupCause::default()
    }];
    let opts = GridOptions {
        by: By::Function,
        names: NameFit::Cap(60),
        ..GridOptions::default()
    };
    let text = grid(&r, &opts).unwrap();
    assert!(text.contains(&format!("{cut}  node")), "{text}");
    assert!(!text.contains(LONG), "{text}");
    let causes = wakeup_causes(&r, NameFit::Cap(60));
    assert!(causes.contains(&cut) && !causes.contains(LONG), "{causes}");
    assert!(json(&r).contains(LONG));
    assert!(csv(&r, &opts).unwrap().contains(LONG));
    // Without a width, as the HTML page asks: whole.
    let whole = grid(
        &r,
        &GridOptions {
            names: NameFit::Full,
            ..opts
        },
    )
    .unwrap();
    assert!(whole.contains(LONG));
}

/// Issue 30: the function grid of a `node` recording's longest C++ name fits a
/// 120-column terminal: the least telling default columns leave, the grid says which, and
/// the name and its figures stay. Asked for with --show, or not on a terminal, every
/// column stays.
#[test]
fn the_function_grid_fits_a_120_column_terminal() {
    const LONG: &str = "v8::internal::compiler::turboshaft::Assembler<v8::internal::compiler::turboshaft::reducer_list<v8::internal::compiler::turboshaft::MachineLoweringReducer>>::ReduceCall(v8::internal::compiler::turboshaft::OpIndex, v8::internal::compiler::turboshaft::OptionalOpIndex)";
    let mut r = report(true);
    r.functions = vec![powerlens_core::stacks::grid::FunctionRow {
        function: LONG.into(),
        module: "/usr/bin/node".into(),
        stack: None,
        cpu_time_s: 1.25,
        user_time_s: None,
        system_time_s: None,
        samples: 1250,
        sync_switches: 3,
        preempt_switches: 7,
        wait_time_s: 0.5,
        inactive_time_s: 0.25,
        idle_wakeups: 2,
        mean_idle_before_wakeup_us: Some(125.0),
        idle_after_s: 0.125,
        idle_states_after: Vec::new(),
        wakeups_caused: 4,
        energy_j: Some(2.0),
    }];
    let opts = GridOptions {
        by: By::Function,
        names: NameFit::Terminal(120),
        ..GridOptions::default()
    };
    let text = grid(&r, &opts).unwrap();
    for line in text.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} > 120: {line}\n{text}",
            line.chars().count()
        );
    }
    assert!(
        text.contains(
            "left out to fit 120 columns (--show them, or widen the terminal): idle_after_s,"
        ),
        "{text}"
    );
    assert!(
        text.contains("v8::internal::") && text.contains("1.250") && text.contains("node"),
        "{text}"
    );
    // The whole grid was wider: the test would not show anything otherwise.
    let full = grid(
        &r,
        &GridOptions {
            names: NameFit::Cap(40),
            ..opts.clone()
        },
    )
    .unwrap();
    assert!(full.lines().any(|l| l.chars().count() > 120), "{full}");
    assert!(!full.contains("left out"));
    // Columns asked for stay, however wide.
    let asked = grid(
        &r,
        &GridOptions {
            show: vec![
                "function".into(),
                "idle_after_s".into(),
                "wakeups_caused".into(),
            ],
            ..opts.clone()
        },
    )
    .unwrap();
    assert!(
        asked.contains("idle after s") && !asked.contains("left out"),
        "{asked}"
    );
}

#[test]
fn text_view_sections() {
    let t = text(&report(true), &GridOptions::default()).unwrap();
    for needle in [
            "target                 pid 100\n",
            "idle wake-ups          3 (30.00 per s), mean idle before a wake-up 16667 µs\n",
            "target residency       POLL 0 µs (mean reaches it, 100.0% of idle periods do), C1 20000 µs (mean does NOT reach it, 33.3% of idle periods do)\n",
            "idleness efficiency    81.2% of idle-state time in C1 (deepest; from sysfs)\n",
            "inferred switch-ins    1 switch-ins inferred (kernel did not record them): cpu1 1\n",
            "  1  C1         n/a     n/a              2       0.05000        n/a\n",
            "  cpu1 trace n/a: no power:cpu_idle records from cpu1, while cpuidle sysfs counted 5 idle entries",
            "  MHz n/a: no power:cpu_frequency records and no cpufreq samples\n",
            "frequency              unavailable: no power:cpu_frequency records and no cpufreq samples\n",
            "  1  50.0%  0.05000  0.05000              2           25000  n/a         1     2\n",
            "\nby thread\ntid  pid  command",
            "solver (pid 100): 2 threads, busy max 0.07000 s / mean 0.05500 s = imbalance 1.27, effective parallelism 1.57\n",
            "  time with N threads running  0: 30.0%  1: 30.0%  2: 40.0%\n",
            "energy: total 3.000 J = idle/baseline 1.000 J + other processes 0.3077 J + rows above 1.692 J  [measured (fake-meter)]\n",
            "method: idle share = 10.00 W baseline × 0.100 s (capped at the total); the remaining 2.000 J split over threads by CPU time (frequency unknown)\n",
            "unavailable: idle residency from the trace: no power:cpu_idle records on cpu0, cpu1\n",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
    let t = text(&report(false), &GridOptions::default()).unwrap();
    assert!(
        t.contains("energy                 unavailable (no energy source on this machine)\n"),
        "{t}"
    );
    assert!(
        t.contains("method: no energy attribution: no energy source on this machine\n"),
        "{t}"
    );
    assert!(!t.contains("energy: total"), "{t}");
}

#[test]
fn reduced_recording_shows_blanks_not_zeros() {
    use powerlens_core::sched::analysis::{SchedSummary, ThreadStats};
    let summary = SchedSummary {
        start_ns: 0,
        end_ns: 100 * MS,
        threads: vec![ThreadStats {
            tid: 100,
            pid: Some(100),
            cpu_time_ns: 40 * MS,
            sync_switches: 7,
            preempt_switches: 2,
            ..ThreadStats::default()
        }],
        ..SchedSummary::default()
    };
    let r = build(&summary, &context(true));
    let g = grid(
        &r,
        &opts(
            By::Thread,
            None,
            None,
            &[
                "tid",
                "cpu_time_s",
                "sync_switches",
                "wait_time_s",
                "migrations",
                "idle_wakeups",
            ],
            &[],
        ),
    )
    .unwrap();
    assert_eq!(
        g,
        "\
tid      CPU s  sync sw  wait s  migr  idle wake-ups
100    0.04000        7
total  0.04000        7
"
    );
    let c = csv(
        &r,
        &opts(
            By::Thread,
            None,
            None,
            &["tid", "wait_time_s", "wakeups_timer"],
            &[],
        ),
    )
    .unwrap();
    assert_eq!(c, "tid,wait_time_s,wakeups_timer\n100,,\n");
    let t = text(&r, &GridOptions::default()).unwrap();
    assert!(
        t.contains("idle wake-ups          unavailable (no scheduler trace)\n"),
        "{t}"
    );
    assert!(t.contains("unavailable: wait time, inactive time, migrations, wake-ups, idle wake-ups, idle residency: reduced recording"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert!(v["threads"][0]["wait_time_s"].is_null());
    assert_eq!(v["threads"][0]["sync_switches"], 7);
}
