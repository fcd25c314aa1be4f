use super::*;
use serde_json::json;

/// The findings of one section, in order.
fn findings_of<'a>(d: &'a Diff, section: &str) -> Vec<&'a str> {
    d.summary
        .iter()
        .filter(|f| f.section == section)
        .map(|f| f.finding.as_str())
        .collect()
}

/// A 1 s recording of a target whose two threads cause every idle wake-up.
fn report(wakeups_per_s: f64, mean_idle_us: f64, cpu: f64, energy_j: f64) -> Value {
    let idle_wakeups = wakeups_per_s / 2.0;
    let idle_time_s = idle_wakeups * mean_idle_us / 1e6;
    json!({
        "system": {
            "target": "pid 1", "recording_span": "whole_run", "cpus": 2, "elapsed_s": 1.0,
            "idle_wakeups_per_s": wakeups_per_s,
            "mean_idle_per_wakeup_us": mean_idle_us,
            "idleness_efficiency_pct": 100.0,
            "running_frequency_mhz": null,
            "idle_states": [
                {"index": 0, "name": "POLL", "target_residency_us": 0},
                {"index": 1, "name": "C6", "target_residency_us": 600}
            ],
            "energy_domains": [{"name": "package", "energy_j": energy_j}]
        },
        "energy": {
            "provenance": {"kind": "measured", "source": "rapl-powercap"},
            "total_j": energy_j, "target_j": energy_j / 2.0
        },
        "processes": [{"pid": 7, "comm": "app", "effective_parallelism": 1.0, "cpu_time_s": cpu}],
        "threads": [
            {"tid": 9, "pid": 7, "comm": "worker", "cpu_time_s": cpu / 2.0, "sync_switches": 10, "preempt_switches": 0, "wait_time_s": 0.5, "inactive_time_s": 0.0,
             "idle_wakeups": idle_wakeups, "idle_time_s": idle_time_s, "wakeups_received_total": 10},
            {"tid": 8, "pid": 7, "comm": "worker", "cpu_time_s": cpu / 2.0, "sync_switches": 5, "preempt_switches": 1, "wait_time_s": 0.25, "inactive_time_s": 0.01,
             "idle_wakeups": idle_wakeups, "idle_time_s": idle_time_s, "wakeups_received_total": 6}
        ]
    })
}

#[test]
fn a_report_against_itself_is_all_ones_and_zeros() {
    let r = report(100.0, 900.0, 0.5, 3.0);
    let d = diff(&r, &r, Rows::Thread, None);
    assert!(d.system.len() > 10);
    for m in &d.system {
        assert_eq!(m.a, m.b, "{}", m.metric);
        if m.a.is_number() {
            assert_eq!(m.ratio, Some(1.0), "{}", m.metric);
            assert_eq!(m.difference, Some(0.0), "{}", m.metric);
        }
    }
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    assert!(d.rows.iter().all(|r| r.a.is_some() && r.b.is_some()));
}

#[test]
fn battery_figures_are_compared_when_a_report_has_them() {
    let (mut a, mut b) = (
        report(1050.0, 900.0, 0.5, 3.0),
        report(10.5, 95_000.0, 0.25, 1.5),
    );
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(!d.system.iter().any(|m| m.metric.starts_with("battery")));
    assert!(!d.summary.iter().any(|f| f.finding.contains("on battery")));
    // 50 Wh = 180 000 J: 60 000 recordings of 3 J, 120 000 of 1.5 J; 3 W and 1.5 W
    // over the 1 s recordings: 16 h 40 min and 33 h 20 min.
    a["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 60000.0, "life_h": 50.0 / 3.0});
    b["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 120000.0, "life_h": 50.0 / 1.5});
    // Issue 29, point 8: figures of the machine over each window say so.
    for r in [&mut a, &mut b] {
        r["battery"]["battery_charges"] = json!("machine");
    }
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(d.summary.iter().any(|f| f.finding.starts_with(
        "on battery, a charge of 50 Wh, paying for the whole machine's energy over each recording window, retires A's recorded work 60000 times"
    )), "{:?}", d.summary);
    for r in [&mut a, &mut b] {
        r["battery"]
            .as_object_mut()
            .unwrap()
            .remove("battery_charges");
    }
    let d = diff(&a, &b, Rows::Thread, None);
    let m = d
        .system
        .iter()
        .find(|m| m.metric == "battery.runs_per_charge")
        .unwrap();
    assert_eq!((m.ratio, m.difference), (Some(0.5), Some(-60000.0)));
    let f = d
        .summary
        .iter()
        .find(|f| f.finding.contains("on battery"))
        .unwrap();
    assert_eq!(f.section, ENERGY);
    assert_eq!(
        f.finding,
        "on battery, a charge of 50 Wh retires A's recorded work 60000 times and B's 120000 times, and lasts 16 h 40 min at A's power and 33 h 20 min at B's"
    );
}

#[test]
fn figures_are_the_reports_own_with_hand_computed_ratios() {
    let (a, b) = (
        report(1050.0, 900.0, 0.5, 3.0),
        report(10.5, 95_000.0, 0.25, 1.5),
    );
    let d = diff(&a, &b, Rows::Thread, None);
    let m = |k: &str| d.system.iter().find(|m| m.metric == k).unwrap().clone();
    let w = m("idle_wakeups_per_s");
    assert_eq!((w.a, w.b), (json!(1050.0), json!(10.5)));
    assert_eq!(w.ratio, Some(100.0));
    assert_eq!(w.difference, Some(1039.5));
    assert_eq!(m("idle_states.C6.target_residency_us").ratio, Some(1.0));
    assert_eq!(m("energy_domains.package.energy_j").ratio, Some(2.0));
    assert_eq!(m("energy.target_j").difference, Some(0.75));
    // Text figures compare as equal or not, without a ratio.
    assert_eq!(m("target").ratio, None);
    let sections: Vec<&str> = d.summary.iter().map(|f| f.section).collect();
    for s in [IDLENESS, SCHEDULING, ACTIVE_WORK, ENERGY] {
        assert!(sections.contains(&s), "{s}: {:?}", d.summary);
    }
    let said = |s: &str| d.summary.iter().any(|f| f.finding.contains(s));
    assert!(
        said("A's target wakes the CPUs from idle 100× as often as B's: its threads caused 1050 idle wake-ups in A (1050.0/s) and 10 in B (10.5/s) of the 16 and 16 wake-ups they received; the whole machine: 1050.0/s in A and 10.5/s in B"),
        "{:?}",
        d.summary
    );
    assert!(said(
        "the CPUs idled 900 µs on average before A's target woke them, which reaches the 600 µs target residency of the deepest idle state, C6 of its own machine"
    ));
    assert!(said(
        "the CPUs idled 95.0 ms on average before B's target woke them, which reaches"
    ));
    assert!(said(
        "B's target retires its work with 50% less energy: the target's share of the energy is 1.500 J in A and 0.750 J in B; the whole machine: E = P × t = 3.00 W × 1.000 s = 3.000 J in A"
    ));
    assert!(
        !said("ESTIMATED"),
        "measured energy is not called estimated"
    );
    // Judged against a target machine instead: its deepest state decides.
    let target = JudgedStates {
        source: "target client".into(),
        states: vec![crate::sched::report::IdleStateInfo {
            index: 3,
            name: "C10".into(),
            latency_us: 100,
            target_residency_us: 5_000,
        }],
    };
    let d = diff(&a, &b, Rows::Thread, Some(&target));
    let expected = "the CPUs idled 900 µs on average before A's target woke them, which is below the 5.0 ms target residency of the deepest idle state, C10 of the target client";
    assert!(
        d.summary.iter().any(|f| f.finding == expected),
        "{:?}",
        d.summary
    );
}

/// Two system-wide windows of 10 s and 20 s at 3 W and 1.5 W: B's total energy is the
/// same 30 J, and "retires its work with 0% less energy" would be a finding about the
/// windows' lengths. The power compares; the energies are said not to be work's.
#[test]
fn windows_compare_by_power_not_by_energy_to_retire_work() {
    let (mut a, mut b) = (
        report(100.0, 900.0, 0.5, 30.0),
        report(100.0, 900.0, 0.5, 30.0),
    );
    a["system"]["recording_span"] = json!("window");
    a["system"]["elapsed_s"] = json!(10.0);
    b["system"]["elapsed_s"] = json!(20.0);
    let d = diff(&a, &b, Rows::Thread, None);
    let energy = findings_of(&d, ENERGY);
    assert_eq!(
        energy,
        ["B draws 50% less power: P = E / t = 30.000 J / 10.000 s = 3.00 W in A, 30.000 J / 20.000 s = 1.50 W in B (the target's share: 15.000 J and 15.000 J). These energies are not the energy to retire the same work: A is a window of time (system-wide or attached to a process), not a run of a command; record each as `powerlens record -- CMD` to compare that"]
    );
    b["system"]["elapsed_s"] = json!(10.0);
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(
        d.summary.iter().any(|f| {
            f.finding.starts_with(
        "A and B draw the same power to within 0.5%: P = E / t = 30.000 J / 10.000 s = 3.00 W in A"
    )
        }),
        "{:?}",
        d.summary
    );
    // On battery, a window's charge is a time, not a number of runs.
    for r in [&mut a, &mut b] {
        r["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 6000.0, "life_h": 50.0 / 3.0});
    }
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(
        d.summary.iter().any(|f| {
            f.finding
            == "on battery, a charge of 50 Wh lasts 16 h 40 min at A's power and 16 h 40 min at B's"
        }),
        "{:?}",
        d.summary
    );
    // A recording that does not say what it covers is not taken for a whole run either.
    a["system"]["recording_span"] = Value::Null;
    b["system"]["recording_span"] = json!("cut_short");
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(d.summary.iter().any(|f| f.finding.ends_with(
        "A's recording does not say what it covers, B is part of a run of the command (it ended before the command did); record each as `powerlens record -- CMD` to compare that"
    )), "{:?}", d.summary);
    assert!(!d
        .summary
        .iter()
        .any(|f| f.finding.contains("retires its work")));
}

#[test]
fn threads_match_by_command_name_and_order_and_the_rest_is_one_sided() {
    let a = report(1.0, 1.0, 0.5, 1.0);
    let mut b = a.clone();
    b["threads"][0]["comm"] = json!("other");
    let d = diff(&a, &b, Rows::Thread, None);
    let keys: Vec<(&str, bool, bool)> = d
        .rows
        .iter()
        .map(|r| (r.key.as_str(), r.a.is_some(), r.b.is_some()))
        .collect();
    // Sorted by tid: tid 8 is the first "worker", tid 9 the second.
    assert_eq!(
        keys,
        [
            ("app / worker", true, true),
            ("app / worker #2", true, false),
            ("app / other", false, true)
        ]
    );
    let first = &d.rows[0];
    assert_eq!(first.difference["sync_switches"], json!(0.0));
    assert!(!first.difference.contains_key("tid"));
}

#[test]
fn estimated_energy_says_so_and_missing_energy_gives_no_guess() {
    let mut a = report(1.0, 1.0, 0.5, 2.0);
    a["energy"]["provenance"] =
        json!({"kind": "estimated", "model": "default-linear", "parameters": "p"});
    let b = report(1.0, 1.0, 0.5, 1.0);
    let d = diff(&a, &b, Rows::Process, None);
    let energy: Vec<&Finding> = d.summary.iter().filter(|f| f.section == ENERGY).collect();
    assert!(
        energy[0].finding.contains("ESTIMATED, not measured"),
        "{energy:?}"
    );
    let mut none = b.clone();
    none["energy"] = json!({"provenance": {"kind": "unavailable", "reason": "r", "fix": null}});
    let d = diff(&a, &none, Rows::Process, None);
    let energy: Vec<&Finding> = d.summary.iter().filter(|f| f.section == ENERGY).collect();
    assert!(energy[0].finding.contains("unavailable"), "{energy:?}");
    assert!(
        d.notes.iter().any(|n| n.contains("only in A")),
        "{:?}",
        d.notes
    );
}

/// Issue 29, point 1: the 1 ms sleeper's threads caused 1,306 idle wake-ups and the
/// 100 ms one's 13, while other processes woke the machine more in B. The finding is
/// the target's, with the machine's rate as context and who made its difference.
#[test]
fn idle_wakeups_are_judged_on_the_targets_rows_not_the_machine() {
    let (mut a, mut b) = (report(0.0, 900.0, 0.5, 3.0), report(0.0, 900.0, 0.5, 3.0));
    for (r, caused, machine) in [(&mut a, 1306.0, 2000.0), (&mut b, 13.0, 2340.0)] {
        r["system"]["idle_wakeups_per_s"] = json!(machine);
        r["threads"][0]["idle_wakeups"] = json!(caused);
        r["threads"][0]["idle_time_s"] = json!(caused * 0.0009);
        r["threads"][1]["idle_wakeups"] = json!(0);
        r["threads"][1]["idle_time_s"] = json!(0.0);
    }
    let d = diff(&a, &b, Rows::Thread, None);
    let first = &d.summary[0];
    assert_eq!(first.section, IDLENESS);
    assert_eq!(
        first.finding,
        "A's target wakes the CPUs from idle 100× as often as B's: its threads caused 1306 idle wake-ups in A (1306.0/s) and 13 in B (13.0/s) of the 16 and 16 wake-ups they received; the whole machine: 2000.0/s in A and 2340.0/s in B, where other processes make 1633.0/s of the difference against the target's 1293.0/s"
    );
    // With a handful of idle wake-ups (or none), the wake-ups received still say
    // which target asks for the CPUs more often.
    for r in [&mut a, &mut b] {
        r["threads"][0]["idle_wakeups"] = json!(0);
    }
    a["threads"][0]["wakeups_received_total"] = json!(2658);
    let d = diff(&a, &b, Rows::Thread, None);
    a["threads"][1]["idle_wakeups"] = json!(4);
    assert!(d.summary[0].finding.starts_with(
        "A's target is woken 166× as often as B's (2664 wake-ups received in A, 16 in B), but too few found a CPU idle to compare idle wake-ups (0 in A, 0 in B): other work kept the CPUs busy"
    ), "{}", d.summary[0].finding);
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(d.summary[0].finding.starts_with(
        "A's target is woken 166× as often as B's (2664 wake-ups received in A, 16 in B), but too few found a CPU idle to compare idle wake-ups (4 in A, 0 in B)"
    ), "{}", d.summary[0].finding);
}

/// Issue 29, points 1 and 4: the target's share decides which retires its work with
/// less energy; a gap other processes make is said to be theirs; a recording against
/// itself wins nothing.
#[test]
fn energy_is_judged_on_the_targets_share_and_other_work_is_named() {
    let (mut a, mut b) = (report(10.0, 900.0, 0.5, 3.0), report(10.0, 900.0, 0.5, 3.0));
    // A: 0.302 J of the target's in 4.05 J; B: 0.013 J in 3.00 J, of which other
    // processes' work is 0.76 J more in A.
    for (r, total, target, other) in [(&mut a, 4.05, 0.302, 2.76), (&mut b, 3.0, 0.013, 2.0)] {
        r["energy"]["total_j"] = json!(total);
        r["energy"]["target_j"] = json!(target);
        r["energy"]["other_j"] = json!(other);
    }
    let d = diff(&a, &b, Rows::Thread, None);
    let energy = findings_of(&d, ENERGY);
    assert_eq!(
        energy,
        ["B's target retires its work with 96% less energy: the target's share of the energy is 0.302 J in A and 0.013 J in B; the whole machine: E = P × t = 4.05 W × 1.000 s = 4.050 J in A, 3.00 W × 1.000 s = 3.000 J in B; 0.760 J of the machine's 1.050 J gap is other processes' work (the target's share differs by 0.289 J): record with less beside it, or compare the target's share"]
    );
    let d = diff(&a, &a, Rows::Thread, None);
    let energy = &d
        .summary
        .iter()
        .find(|f| f.section == ENERGY)
        .unwrap()
        .finding;
    assert!(
        energy.starts_with("A's and B's targets retire their work with the same energy to within 0.5%: the target's share"),
        "{energy}"
    );
    assert!(!energy.contains("0% less"), "{energy}");
    // Without a target share (an older report), the machine's energy decides, and a
    // tie is still no win.
    for r in [&mut a, &mut b] {
        r["energy"]["target_j"] = Value::Null;
        r["energy"]["total_j"] = json!(3.0);
    }
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(
        d.summary.iter().any(|f| f.finding.starts_with(
            "A and B retire their work with the same energy to within 0.5%: E = P × t"
        )),
        "{:?}",
        d.summary
    );
}

/// Issue 29, point 3: `sh` started gzip and used 0.0018 s; the finding is about gzip,
/// and equal parallelism on both sides (two single-threaded programs) says nothing.
#[test]
fn parallelism_is_the_busiest_process_and_only_when_it_differs() {
    let mut a = report(10.0, 900.0, 0.5, 3.0);
    a["processes"] = json!([
        {"pid": 7, "comm": "sh", "effective_parallelism": 1.0, "cpu_time_s": 0.0018},
        {"pid": 8, "comm": "gzip", "effective_parallelism": 1.9, "cpu_time_s": 1.2}
    ]);
    let mut b = a.clone();
    b["processes"][1]["effective_parallelism"] = json!(1.0);
    let said = |d: &Diff| -> Vec<String> {
        d.summary
            .iter()
            .filter(|f| f.finding.contains("CPUs busy"))
            .map(|f| f.finding.clone())
            .collect()
    };
    assert_eq!(
        said(&diff(&a, &b, Rows::Process, None)),
        ["the process that did most of the target's work keeps 1.90 CPUs busy on average while it runs in A (gzip) and 1.00 in B (gzip)"]
    );
    assert!(said(&diff(&b, &b, Rows::Process, None)).is_empty());
}

/// Issue 29, point 4: examples are not figures; a figure one side has no value for is
/// said with that side's own reason and the right number; a battery section one side
/// lacks is said to come from --battery-wh.
#[test]
fn one_sided_figures_are_noted_with_their_true_reason() {
    let mut a = report(10.0, 900.0, 0.5, 3.0);
    a["system"]["cpu_time_accounts"] =
        json!({"cpu_time_s": 1.0, "switch_interval_examples": ["tid 68", "tid 70"]});
    let mut b = a.clone();
    b["system"]["mean_idle_per_wakeup_us"] = Value::Null;
    b["unavailable"] = json!([{"figure": "mean idle per wake-up", "reason": "no idle wake-up in the recording", "fix": null}]);
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(
        !d.system.iter().any(|m| m.metric.contains("examples")),
        "{:?}",
        d.system
    );
    assert!(d
        .system
        .iter()
        .any(|m| m.metric == "cpu_time_accounts.cpu_time_s"));
    assert_eq!(
        d.notes,
        ["B has no value for 1 figure A has (mean_idle_per_wakeup_us): B's report says why: mean idle per wake-up: no idle wake-up in the recording"]
    );
    b["battery"] = json!({"available": true, "energy_full_wh": 50.0, "life_h": 16.0});
    let d = diff(&a, &b, Rows::Thread, None);
    assert_eq!(
        d.notes[1],
        "B was recorded with --battery-wh (or on a discharging battery) and A was not: 3 battery figures of B shown with A's side null; record A with --battery-wh to compare them"
    );
    assert!(
        !d.notes.iter().any(|n| n.contains("newer or reduced")),
        "{:?}",
        d.notes
    );
    // Lost trace records make a side's counts short: said, with the fix.
    b["system"]["lost_records"] = json!(161007);
    let d = diff(&a, &b, Rows::Thread, None);
    assert!(d.notes.iter().any(|n| n.starts_with(
        "B's recording lost 161007 trace records (the recorder's rings overflowed): its counts of switches and wake-ups are short"
    )), "{:?}", d.notes);
}

/// A reduced recording traced no waits nor idle wake-ups: the findings say they are
/// unknown, never 0 s, and the notes name the reduced recording as the reason.
#[test]
fn a_reduced_side_is_no_zero_for_what_it_did_not_trace() {
    let a = report(10.0, 900.0, 0.5, 3.0);
    let mut b = a.clone();
    b["system"]["idle_wakeups_per_s"] = Value::Null;
    for t in b["threads"].as_array_mut().unwrap() {
        for k in [
            "wait_time_s",
            "inactive_time_s",
            "idle_wakeups",
            "idle_time_s",
            "wakeups_received_total",
        ] {
            t[k] = Value::Null;
        }
        t["cpu_time_source"] = json!("procfs");
    }
    let d = diff(&a, &b, Rows::Thread, None);
    assert_eq!(
        findings_of(&d, IDLENESS)[0],
        "idle wake-ups are unknown in at least one recording (a reduced recording has no scheduler trace): no finding on them"
    );
    assert_eq!(
        findings_of(&d, SCHEDULING)[1],
        "wait and inactive time are unknown in at least one recording (a reduced recording has no scheduler trace): no finding on them"
    );
    assert!(
        d.notes.iter().any(|n| n.starts_with(
            "B has no value for 1 figure A has (idle_wakeups_per_s): B is a reduced recording"
        )),
        "{:?}",
        d.notes
    );
}

/// A short command's CPU time and waits keep their digits: 1.8 ms against 1.2 ms is 1.5×,
/// never "0.002 s in A, 0.001 s in B".
#[test]
fn a_short_commands_times_keep_their_digits() {
    let (mut a, b) = (
        report(100.0, 900.0, 0.0018, 3.0),
        report(100.0, 900.0, 0.0012, 3.0),
    );
    a["threads"][0]["wait_time_s"] = json!(0.0004);
    a["threads"][1]["wait_time_s"] = json!(0.0002);
    let d = diff(&a, &b, Rows::Thread, None);
    let active = findings_of(&d, ACTIVE_WORK);
    assert!(
        active[0].ends_with("(0.0018 s in A, 0.0012 s in B)"),
        "{active:?}"
    );
    // A waits 0.4 + 0.2 ms; B 0.5 + 0.25 s.
    let scheduling = findings_of(&d, SCHEDULING);
    assert!(
        scheduling.iter().any(|f| f.contains(
            "they wait 0.00060 s and stay runnable but not running (inactive) 0.010 s in A, against 0.750 s and 0.010 s in B"
        )),
        "{scheduling:?}"
    );
}

/// Issue 51 (6): namesakes are matched by role where the command lines are known; a
/// process whose command line one side lacks falls back to its name among the rows left;
/// a matched pair more than tenfold apart in CPU time is noted.
#[test]
fn namesakes_match_by_role_and_far_apart_pairs_are_noted() {
    let build = |order: [(u64, &str, f64); 3]| {
        json!({
            "system": {"elapsed_s": 1.0}, "energy": {},
            "processes": order.iter().map(|(pid, _, cpu)| json!({"pid": pid, "comm": "cc1", "cpu_time_s": cpu})).collect::<Vec<_>>(),
            "threads": []
        })
    };
    let cmds = |order: [(u64, &str, f64); 3], known: usize| -> Commands {
        order
            .iter()
            .take(known)
            .map(|(pid, file, _)| {
                (
                    *pid,
                    vec![
                        "cc1".into(),
                        "-quiet".into(),
                        (*file).into(),
                        "-o".into(),
                        format!("/tmp/cc{pid}.s"),
                    ],
                )
            })
            .collect()
    };
    // A starts big.c first, B last; B's third cc1 (big.c) has no command line.
    let a = [(10, "big.c", 1.0), (11, "main.c", 0.02), (12, "m1.c", 0.03)];
    let b = [(20, "main.c", 0.021), (21, "m1.c", 0.5), (22, "big.c", 1.1)];
    let d = diff_with_commands(
        &build(a),
        &build(b),
        Rows::Process,
        None,
        [&cmds(a, 3), &cmds(b, 2)],
    );
    let pair = |key: &str| {
        let r = d
            .rows
            .iter()
            .find(|r| r.key == key)
            .unwrap_or_else(|| panic!("{key}: {:?}", d.rows));
        (
            r.a.as_ref().map(|v| v["pid"].clone()),
            r.b.as_ref().map(|v| v["pid"].clone()),
        )
    };
    assert_eq!(pair("cc1 [main.c]"), (Some(json!(11)), Some(json!(20))));
    assert_eq!(pair("cc1 [m1.c]"), (Some(json!(12)), Some(json!(21))));
    // B's big.c has no role: matched by name with the row left, A's big.c.
    assert_eq!(pair("cc1 [big.c]"), (Some(json!(10)), Some(json!(22))));
    assert_eq!(d.rows.len(), 3);
    // m1.c: 0.03 s against 0.5 s is more than tenfold; main.c and big.c are not.
    let far: Vec<&String> = d.notes.iter().filter(|n| n.contains("tenfold")).collect();
    assert_eq!(far.len(), 1, "{:?}", d.notes);
    assert!(far[0].starts_with("the matched rows \"cc1 [m1.c]\" differ more than tenfold in CPU time (0.030 s in A, 0.500 s in B)"), "{}", far[0]);
}
