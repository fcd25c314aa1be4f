//! `powerlens demo` end to end on a machine without a meter (an empty sysfs root): every
//! scenario measured, figures labelled as estimates, and the same-work pair faster in
//! parallel when the machine has more than one CPU. Then on this machine's own sysfs, its
//! closing diff of the two sleepers (issue 15).

mod common;

#[test]
#[ignore = "live: measures real workloads on this machine"]
fn demo_measures_every_scenario_and_labels_estimates() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::command(dir.path(), &dir.path().join("r.db"))
        .args(["demo", "--runs", "1", "--duration", "0.1s", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenarios = v["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 6);
    for s in scenarios {
        let run = &s["result"]["runs"][0];
        assert!(run["energy_j"].as_f64().unwrap() > 0.0, "{}", s["name"]);
        assert_eq!(run["provenance"]["kind"], "estimated");
    }
    let verdicts = v["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 3);
    // Issue 17 point 1: "15.9 W per additional busy CPU" and "wake-ups cost 0.72 J" only
    // restated the model's inputs. Every finding on estimated energy says so in its own
    // sentence, with the provenance beside it.
    for f in verdicts {
        let sentence = f["sentence"].as_str().unwrap();
        assert!(sentence.contains("ESTIMATED, not measured"), "{sentence}");
        assert!(
            sentence.contains("measure with a meter to know"),
            "{sentence}"
        );
        assert!(
            f["provenance"].as_str().unwrap().starts_with("estimated ("),
            "{f}"
        );
    }
    // The barrier pair retires the same work: the kernel charges both about the same CPU
    // time, however many CPUs shared it (wall times depend on the machine's load; CPU time
    // of fixed work does not).
    let cpu = |i: usize| scenarios[i]["result"]["runs"][0]["cpu_s"].as_f64().unwrap();
    let (one, all) = (cpu(0), cpu(1));
    assert!(
        all > 0.5 * one && all < 2.0 * one,
        "barrier CPU time: 1 CPU {one} s, all CPUs {all} s"
    );
    // The sleepers' CPU time is not compared here: over 0.1 s the 1 ms sleeper's 100
    // wake-ups cost it a few milliseconds, while starting the process costs each 10–20 ms
    // and varies by more than that from run to run (a CI run read 17 ms against 22 ms,
    // one here 13 against 22). Their difference is checked where it is counted, in their
    // recorded switches, in the test below.
    // An empty sysfs cannot be recorded on: no closing diff, and it says why and what
    // `record` needs, rather than a diff of nothing.
    let why = v["diff_unavailable"].as_str().unwrap();
    assert!(
        why.contains("recording the 1ms sleeper failed")
            && why.contains("devices/system/cpu/online does not exist")
            && why.contains("needs the machine's sysfs"),
        "{why}"
    );
    assert!(v.get("diff").is_none());
}

#[test]
#[ignore = "live: measures real workloads on this machine"]
fn demo_ends_with_a_diff_of_its_two_sleepers() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let recs = dir.path().join("recs");
    let out = common::on_this_machine(&[
        "demo",
        "--runs",
        "1",
        "--duration",
        "0.2s",
        "--json",
        "--recordings",
        recs.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v = common::json(&out);
    let d = &v["diff"];
    let (a, b) = (recs.join("sleepy-1ms.rec"), recs.join("sleepy-100ms.rec"));
    assert_eq!(d["a"], a.to_str().unwrap(), "{d}");
    assert_eq!(d["b"], b.to_str().unwrap());
    assert_eq!(d["kept"], true);
    // Root records a trace; otherwise a reduced profile, and the diff says which.
    assert_eq!(d["reduced"], !common::is_root(), "{}", d["reduced"]);
    // The diff's figures are the two recordings' own reports.
    for (side, rec) in [("a", &a), ("b", &b)] {
        let report = common::json(&common::on_this_machine(&[
            "report",
            rec.to_str().unwrap(),
            "--json",
        ]));
        for key in ["elapsed_s", "busy_s"] {
            let m = d["system"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == key)
                .unwrap();
            assert_eq!(m[side], report["system"][key], "{key} of {side}");
        }
    }
    // The sleeper thread matched across the recordings: 0.2 s at 1 ms is 200 periods, at
    // 100 ms 2; each period ends in a sleep, a synchronization switch.
    let row = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str().unwrap().ends_with("/ sleepy-0"))
        .unwrap_or_else(|| panic!("no sleeper row: {}", d["rows"]));
    let switches = |side: &str| row[side]["sync_switches"].as_u64().unwrap();
    assert!(switches("a") >= 100, "1 ms sleeper: {row}");
    assert!(switches("b") <= 8, "100 ms sleeper: {row}");
    let sections: Vec<&str> = d["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["section"].as_str().unwrap())
        .collect();
    for s in ["idleness", "scheduling", "active work", "energy"] {
        assert!(sections.contains(&s), "{sections:?}");
    }
}
