//! `--html FILE` on `run`, `compare`, `sweep` and `wake report`: each page is
//! self-contained, shows the figures the same invocation prints as JSON, draws one point per
//! run, ratio or datapoint, shows a label with HTML metacharacters as text, and renders in
//! headless Chromium without console messages and far from blank.
//!
//! The meter is the power model (an empty sysfs tree): the pages are checked against the
//! JSON of the same run, so what the energy is does not matter here.

use std::path::Path;
use std::process::Command;

mod common;
use common::{assert_renders_in_chromium, assert_self_contained, json, powerlens, stderr};

fn circles(page: &str) -> usize {
    page.matches("<circle").count()
}

#[test]
fn run_page_plots_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("run.html");
    let out = powerlens(
        dir.path(),
        &dir.path().join("r.db"),
        &[
            "run",
            "--runs",
            "3",
            "--no-save",
            "--json",
            "--html",
            html.to_str().unwrap(),
            "--",
            "echo",
            "<i>pwn</i>",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let page = assert_self_contained(&html, "<i>pwn</i>", "echo &#39;&lt;i&gt;pwn&lt;/i&gt;&#39;");
    // Energy, wall time and CPU time of each of the 3 runs.
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert_eq!(circles(&page), 3 * 3, "{page}");
    for want in [
        ">energy [J]</text>",
        ">wall time [s]</text>",
        "run (in the order measured)",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    // The runs' table: one row per run, numbered 1..3.
    for run in 1..=3 {
        assert!(page.contains(&format!("<tr><td class=\"n\" data-v=\"{run}\">{run}</td>")));
    }
    assert_renders_in_chromium(&html, "<i>pwn</i>", "i");
}

#[test]
fn compare_page_shows_the_verdict_and_every_ratio_with_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("compare.html");
    let out = powerlens(
        dir.path(),
        &dir.path().join("r.db"),
        &[
            "compare",
            "--runs",
            "3",
            "--no-save",
            "--json",
            "-n",
            "<i>pwn</i>",
            "-n",
            "b&\"x\"",
            "--html",
            html.to_str().unwrap(),
            "--",
            "sleep 0.2",
            "sleep 0.4",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let page = assert_self_contained(&html, "<i>pwn</i>", "&lt;i&gt;pwn&lt;/i&gt;");
    assert!(page.contains("b&amp;&quot;x&quot;"));
    let c = &v["candidates"][0];
    let verdict = c["verdict"].as_str().unwrap();
    let escaped = verdict
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;");
    // No meter here: the page's verdict carries the estimate caveat (issue 17 point 1).
    assert!(verdict.contains("ESTIMATED, not measured"), "{verdict}");
    assert!(
        page.contains(&format!("<p>{escaped}</p>")),
        "{escaped}\n{page}"
    );
    // The forest plot: one dot per ratio, a bar per interval, the dashed line at 1.
    let ratios = c["ratios"].as_object().unwrap();
    let intervals = c["ratio_ci95"].as_object().unwrap();
    // Fieller's interval is bounded where the baseline's mean is clearly away from zero (its
    // time at least); the others show n/a.
    assert!(intervals.contains_key("time"), "{c}");
    assert_eq!(circles(&page), ratios.len(), "{page}");
    assert_eq!(page.matches("stroke-width=\"3\"").count(), intervals.len());
    assert_eq!(page.matches("stroke-dasharray").count(), 1);
    // The table shows the JSON's ratios and intervals.
    for (key, ratio) in ratios {
        let ratio = ratio.as_f64().unwrap();
        let interval = match intervals.get(key) {
            Some(i) => format!(
                "<td>{:.4} … {:.4}</td>",
                i[0].as_f64().unwrap(),
                i[1].as_f64().unwrap()
            ),
            None => "<td>n/a</td>".to_string(),
        };
        let cells = [
            format!(
                "data-v=\"{}\">{ratio:.4}</td>",
                format!("{ratio:.4}").parse::<f64>().unwrap()
            ),
            interval,
        ];
        for cell in cells {
            assert!(page.contains(&cell), "{key}: {cell}\n{page}");
        }
    }
    assert_renders_in_chromium(&html, "<i>pwn</i>", "i");
}

#[test]
fn sweep_page_draws_the_plot_and_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("sweep.html");
    let out = powerlens(
        dir.path(),
        &dir.path().join("r.db"),
        &[
            "sweep",
            "--param",
            "tag=<i>a</i>,b,c",
            "--runs",
            "1",
            "--no-save",
            "--json",
            "--html",
            html.to_str().unwrap(),
            "--",
            "echo",
            "{tag}",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let page = assert_self_contained(&html, "<i>a</i>", "&lt;i&gt;a&lt;/i&gt;");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    // Energy and time of each combination.
    assert_eq!(circles(&page), 2 * rows.len(), "{page}");
    for want in [
        ">energy per run [J]</text>",
        ">wall time per run [s]</text>",
        ">tag</text>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    // One table row per combination, its value first.
    for tag in ["&lt;i&gt;a&lt;/i&gt;", "b", "c"] {
        assert!(page.contains(&format!("<tr><td>{tag}</td>")), "{tag}");
    }
    assert_renders_in_chromium(&html, "<i>a</i>", "i");
}

/// Two results measured here (`wake --no-trace`, root only), one in a directory named with
/// HTML metacharacters: the page's table shows each result's medians as info.json has
/// them, the scatter one point per kept datapoint, the histogram one polygon per result.
#[test]
#[ignore = "live: measures wake latency on this machine (root)"]
fn wake_report_page_has_the_table_scatter_and_histograms() {
    if !common::is_root() {
        powerlens_sys::skip_test!("powerlens wake needs root (SCHED_FIFO, cpuidle)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let label = "<b>pwn&\"x\"";
    let results = [(dir.path().join(label), 50), (dir.path().join("plain"), 30)];
    for (out, n) in &results {
        let o = Command::new(env!("CARGO_BIN_EXE_powerlens"))
            .args(["wake", "--no-trace", "--datapoints", &n.to_string(), "-o"])
            .arg(out)
            .env_remove("POWERLENS_SYSFS_ROOT")
            .env(
                "POWERLENS_SETTINGS_JOURNAL",
                dir.path().join("journal.json"),
            )
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let html = dir.path().join("wake.html");
    let o = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["wake", "report"])
        .args(results.iter().map(|r| &r.0))
        .arg("--out")
        .arg(dir.path().join("plots"))
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = assert_self_contained(&html, "<b>", "&lt;b&gt;pwn&amp;&quot;x&quot;");
    let mut kept = 0;
    for (path, _) in &results {
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path.join("info.json")).unwrap())
                .unwrap();
        for state in info["states"].as_array().unwrap() {
            kept += state["count"].as_u64().unwrap() as usize;
            let median = state["user_latency_ns"]["median"].as_f64().unwrap();
            let cell = format!("{:.2}", median / 1e3);
            assert!(
                page.contains(&format!(
                    "data-v=\"{}\">{cell}</td>",
                    cell.parse::<f64>().unwrap()
                )),
                "{cell} missing"
            );
        }
    }
    assert!(kept > 0);
    // --no-trace: UserLatency against LDist; 40 histogram bins per result and state.
    let series = 2;
    assert_eq!(circles(&page), kept + series * 40, "{page}");
    for want in [
        ">UserLatency [µs]</text>",
        "launch distance LDist [µs] (silent time unavailable)",
        ">datapoints [%]</text>",
        "<h2>Result &lt;b&gt;pwn&amp;&quot;x&quot;</h2>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    assert_renders_in_chromium(&html, "<b>pwn&\"x\"", "b");
}

#[test]
fn an_unwritable_html_target_is_named_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("missing-dir").join("r.html");
    let out = powerlens(
        dir.path(),
        &dir.path().join("r.db"),
        &[
            "run",
            "--runs",
            "1",
            "--no-save",
            "--html",
            target.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&target.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(!Path::new(&target).exists());
}

/// A result directory in the documented format (docs/WAKE.md: info.json and datapoints.csv)
/// of `n` measurements with the idle trace delivered, so silent time is available: the
/// measurement `i` has LDist 500 µs + i ns, silent time 100 µs + i µs and wake latency
/// 2 µs + 10·i ns.
fn synthetic_wake_result(dir: &Path, state: &str, n: u64) {
    use powerlens_core::wake::{state_report, Delivered, Raw, WakeResult};
    let raws: Vec<Raw> = (0..n)
        .map(|i| {
            let l = 1_000_000 * (i + 1);
            Raw {
                ltime_ns: l,
                ldist_ns: 500_000 + i,
                tbi_ns: Some(l - 100_000 - i * 1_000),
                tai_ns: Some(l + 2_000 + i * 10),
                tintr_ns: Some(l + 3_000),
                user_wake_ns: l + 50_000 + i * 100,
                cstate: state.to_string(),
                woken_by_our_timer: Some(true),
                interrupts: 0,
                softirqs: 0,
            }
        })
        .collect();
    let delivered = Delivered {
        idle: true,
        timer: true,
        untraced: false,
    };
    let result = WakeResult {
        cpu: 1,
        cpuidle_driver: "haltpoll".into(),
        ldist_min_ns: 300_000,
        ldist_max_ns: 8_000_000,
        self_overhead: None,
        trace_unavailable: vec![],
        lost_records: 0,
        notes: vec![],
        stopped_early: None,
        states: vec![state_report(state, Some(1), &raws, &delivered, 1)],
    };
    let rows: Vec<_> = raws
        .iter()
        .map(|r| (r.clone(), r.datapoint(&delivered)))
        .collect();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("info.json"),
        serde_json::to_string_pretty(&result).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("datapoints.csv"),
        powerlens_report::wake::datapoints_csv(&rows),
    )
    .unwrap();
}

/// Synthetic results with the idle trace (any user, any kernel): the page plots wake
/// latency against silent time, one point per datapoint, and a state named with HTML
/// metacharacters is text.
#[test]
fn wake_report_page_plots_wake_latency_against_silent_time() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    synthetic_wake_result(&a, "<i>C1</i>", 30);
    synthetic_wake_result(&b, "POLL", 20);
    let html = dir.path().join("wake.html");
    let o = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["wake", "report"])
        .args([&a, &b])
        .arg("--out")
        .arg(dir.path().join("plots"))
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = assert_self_contained(&html, "<i>C1</i>", "<td>&lt;i&gt;C1&lt;/i&gt;</td>");
    for want in [
        "<h2>wake latency per datapoint</h2>",
        ">silent time [µs]</text>",
        ">wake latency [µs]</text>",
        "<h2>wake latency histogram</h2>",
        ">datapoints [%]</text>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    assert!(!page.contains("launch distance"));
    // 50 datapoints, 40 histogram bins for each of the 2 results.
    assert_eq!(circles(&page), 50 + 2 * 40);
    // The table's UserLatency median of result a: 50 µs + 100·i ns over i in 0..30.
    assert!(page.contains(">51.45</td>"), "{page}");
    assert_renders_in_chromium(&html, "<i>C1</i>", "i");
}
