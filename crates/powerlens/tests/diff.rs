//! `powerlens diff`: a 1 ms sleeper against a 100 ms sleeper, recorded live. The oracle for
//! every figure is each recording's own `report --json`; the wake-up ratio follows from
//! the periods (about 1000/s against 10/s of the sleeper, plus the system's own).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;
use common::{
    assert_renders_in_chromium, assert_self_contained, live_recording, on_this_machine,
    record_workload, stderr,
};

fn powerlens(args: &[&str]) -> Output {
    on_this_machine(args)
}

fn ok_json(o: Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn record_sleeper(rec: &Path, period: &str) {
    let o = record_workload(rec, &["sleepy", "--period", period, "--duration", "0.6s"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The value at a diff metric's key in a report: `system` figures by their dotted path,
/// `energy.*` in the energy section; arrays by the element's `name`. Null where the report
/// has no such figure (a metric of the other recording only).
fn at<'a>(report: &'a Value, metric: &str) -> &'a Value {
    let (mut v, path) = match metric.strip_prefix("energy.") {
        Some(rest) => (&report["energy"], rest),
        None => (&report["system"], metric),
    };
    let mut rest = path;
    while !rest.is_empty() {
        v = match v {
            Value::Object(m) => {
                // Keys may hold dots ("haltpoll idle" does not, but be exact): the longest
                // key that prefixes the rest.
                let Some(key) = m
                    .keys()
                    .filter(|k| rest == k.as_str() || rest.starts_with(&format!("{k}.")))
                    .max_by_key(|k| k.len())
                else {
                    return &Value::Null;
                };
                rest = rest[key.len()..].trim_start_matches('.');
                &m[key]
            }
            Value::Array(items) => {
                // An element is named by its `name`, its `cpu` (cpuN) or its index.
                let label = |i: usize, x: &Value| match (&x["name"], &x["cpu"]) {
                    (Value::String(n), _) => n.clone(),
                    (_, Value::Number(c)) => format!("cpu{c}"),
                    _ => i.to_string(),
                };
                let Some((i, tail)) = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (i, label(i, x)))
                    .filter(|(_, n)| rest == n || rest.starts_with(&format!("{n}.")))
                    .max_by_key(|(_, n)| n.len())
                    .map(|(i, n)| (i, rest[n.len()..].trim_start_matches('.')))
                else {
                    return &Value::Null;
                };
                rest = tail;
                &items[i]
            }
            _ => panic!("{metric}: a leaf before {rest}"),
        };
    }
    v
}

#[test]
fn a_short_sleeper_against_a_long_one() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (dir.path().join("1ms.rec"), dir.path().join("100ms.rec"));
    record_sleeper(&fast, "1ms");
    record_sleeper(&slow, "100ms");
    let (fast, slow) = (fast.to_str().unwrap(), slow.to_str().unwrap());
    let d = ok_json(powerlens(&["diff", fast, slow, "--json"]));
    let a = ok_json(powerlens(&["report", fast, "--json"]));
    let b = ok_json(powerlens(&["report", slow, "--json"]));

    let system = d["system"].as_array().unwrap();
    assert!(system.len() > 20, "{}", system.len());
    for m in system {
        let key = m["metric"].as_str().unwrap();
        assert_eq!(&m["a"], at(&a, key), "{key} of A");
        assert_eq!(&m["b"], at(&b, key), "{key} of B");
    }
    let metric = |k: &str| system.iter().find(|m| m["metric"] == k).unwrap();
    let wakeups = metric("idle_wakeups_per_s");
    let ratio = wakeups["ratio"].as_f64().unwrap();
    let (x, y) = (
        wakeups["a"].as_f64().unwrap(),
        wakeups["b"].as_f64().unwrap(),
    );
    assert!((ratio - x / y).abs() < 1e-9 * ratio);
    // The sleepers add about 1000/s and 10/s to the system's own wake-ups, which a busy
    // machine raises in both (a ratio above 5 failed once under load). The difference is
    // the sleepers': of their 990/s, at least 300/s must find a CPU idle on 2 CPUs.
    assert!(
        x - y > 300.0 && ratio > 2.0,
        "idle wake-ups/s {x} against {y}: {wakeups}"
    );

    let sleeper = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str().unwrap().ends_with("/ sleepy-0"))
        .expect("the sleeping thread's row");
    assert!(
        sleeper["a"].is_object() && sleeper["b"].is_object(),
        "{sleeper}"
    );
    let switches = |r: &Value| r["sync_switches"].as_f64().unwrap();
    assert_eq!(
        sleeper["difference"]["sync_switches"].as_f64().unwrap(),
        switches(&sleeper["a"]) - switches(&sleeper["b"])
    );
    // About 600 sleeps against 6.
    assert!(
        switches(&sleeper["a"]) > 20.0 * switches(&sleeper["b"]),
        "{sleeper}"
    );

    let mut sections: Vec<&str> = d["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["section"].as_str().unwrap())
        .collect();
    sections.dedup();
    assert!(sections.len() >= 3, "{sections:?}");
    assert!(d["summary"][0]["finding"]
        .as_str()
        .unwrap()
        .starts_with("A wakes the CPUs from idle"));
    // Both are whole runs of their command (the sleeper exits inside the recording), so the
    // energy finding compares the energy to retire each run.
    assert_eq!(metric("recording_span")["a"], "whole_run");
    assert_eq!(metric("recording_span")["b"], "whole_run");
    let findings: Vec<&str> = d["summary"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["section"] == "energy")
        .map(|f| f["finding"].as_str().unwrap())
        .collect();
    assert!(
        findings.iter().any(|f| f.contains("retires its work with")),
        "{findings:?}"
    );

    // A recording against itself: every number's ratio is 1 and its difference 0.
    let same = ok_json(powerlens(&["diff", fast, fast, "--json"]));
    for m in same["system"].as_array().unwrap() {
        if m["a"].is_number() {
            assert_eq!(m["ratio"], 1.0, "{m}");
            assert_eq!(m["difference"], 0.0, "{m}");
        }
    }
    assert!(same["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["a"].is_object() && r["b"].is_object()));

    // The text page and CSV carry the same comparison.
    let text = powerlens(&["diff", fast, slow]);
    let page = String::from_utf8(text.stdout).unwrap();
    assert!(page.contains("Comparison summary"), "{page}");
    // Each side's energy says where it comes from, as its report does.
    let kind = |r: &Value| {
        r["energy"]["provenance"]["kind"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let energy_line = page.lines().find(|l| l.starts_with("energy: ")).unwrap();
    assert!(
        energy_line.starts_with(&format!("energy: A {} (", kind(&a))),
        "{energy_line}"
    );
    assert!(
        energy_line.contains(&format!(", B {} (", kind(&b))),
        "{energy_line}"
    );
    let csv = powerlens(&["diff", fast, slow, "--csv"]);
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.starts_with("metric,a,b,ratio,difference\n"), "{csv}");

    // The HTML page, with a recording whose path is markup (a directory named `<i>pwn<`
    // holding `i>.rec`): escaped everywhere, self-contained, rendered by Chromium.
    let odd_dir = dir.path().join("<i>pwn<");
    std::fs::create_dir(&odd_dir).unwrap();
    let odd = odd_dir.join("i>.rec");
    std::fs::copy(slow, &odd).unwrap();
    let html = dir.path().join("diff.html");
    let o = powerlens(&[
        "diff",
        fast,
        odd.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = assert_self_contained(&html, "<i>pwn</i>", "&lt;i&gt;pwn&lt;/i&gt;");
    for part in [
        "Comparison summary",
        "Idle-state residency",
        "Wake-ups per second",
        "Energy per domain",
        "idle_wakeups_per_s",
        "sleepy-0",
    ] {
        assert!(page.contains(part), "{part} missing");
    }
    assert!(page.matches("<svg").count() >= 3);
    assert_renders_in_chromium(&html, "<i>pwn</i>", "i");
}

#[test]
fn what_is_not_a_recording_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "not a recording").unwrap();
    let junk = junk.to_str().unwrap();
    for args in [["diff", junk, junk], ["diff", junk, "/nonexistent/b.rec"]] {
        let o = powerlens(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("notes.txt"), "{err}");
        assert!(o.stdout.is_empty());
    }
}
