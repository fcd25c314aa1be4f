//! `powerlens demo`: the main job on built-in workloads — how much energy each costs to
//! retire its work, and a plain verdict — on any machine, meter or not.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use powerlens_core::provenance::Provenance;
use powerlens_core::run::{RunResult, RunSummary};
use powerlens_core::stacks::attribution::StackMetricsKept;
use powerlens_core::verdict::{self, Ratios};
use powerlens_report::table::{sig, Table};
use serde::Serialize;

use crate::args::GlobalArgs;
use crate::cmd::run::MeterArgs;
use crate::progress;
use crate::progress::AnalysisOnStderr;
use crate::series::{self, SeriesOptions};
use crate::units::parse_positive_duration;
use powerlens_record::analyse::{analyse, AnalyseOptions};
use powerlens_record::interrupt;
use powerlens_record::meter::Meter;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Measures six built-in workloads with `run`:
  barrier on 1 CPU and on every CPU    the energy to retire the same work (race to idle)
  spin on 1 CPU and on every CPU       what each busy CPU draws (the scheduler power study)
  sleepy with 100 ms and 1 ms periods  what frequent wake-ups cost over the same time
and prints the table and a verdict for each pair. Without an energy meter (virtual
machines) the figures are estimates from the power model and are labelled so.

It ends as the Windows 7 vs Windows 8 study does, with two systems side by side: it
records the two sleepers (`powerlens record`: a trace as root, else a REDUCED procfs
profile, and says which) and prints the comparison summary of `powerlens diff` — A the
1 ms sleeper, B the 100 ms one. --recordings DIR keeps the two recordings for `report`
and `diff`; --no-diff skips this part.")]
pub struct DemoArgs {
    /// Measured runs per workload.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// How long each workload runs.
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Keep the two sleepers' recordings in DIR (created if missing) for `powerlens
    /// report` and `powerlens diff`; by default they are written to a temporary
    /// directory and removed.
    #[arg(long, value_name = "DIR", conflicts_with = "no_diff")]
    pub recordings: Option<PathBuf>,

    /// Skip the closing diff of the two sleepers (and their recordings).
    #[arg(long)]
    pub no_diff: bool,

    #[command(flatten)]
    pub meter: MeterArgs,
}

#[derive(Debug, Serialize)]
struct Scenario {
    name: String,
    result: RunResult,
}

#[derive(Debug, Serialize)]
struct Verdict {
    baseline: String,
    candidate: String,
    ratios: Ratios,
    /// Only for the pair that retires the same work; the others differ in work by design.
    class: Option<verdict::VerdictClass>,
    sentence: String,
    /// Where the energy behind the sentence comes from; an estimate also says so in it.
    provenance: String,
}

/// The three lessons: the same work on more CPUs (energy to retire it), what a busy CPU
/// draws, and what frequent wake-ups cost over the same time.
fn verdicts(s: &[Scenario], cpus: usize, secs: f64, energy: &Provenance) -> Vec<Verdict> {
    let qualifier = verdict::estimated_qualifier(energy).unwrap_or_default();
    let pair = |b: usize, c: usize| -> Option<(Ratios, &RunSummary, &RunSummary)> {
        let (bs, cs) = (s[b].result.summary.as_ref()?, s[c].result.summary.as_ref()?);
        Some((Ratios::of(bs, cs), bs, cs))
    };
    let mut out = Vec::new();
    if let Some((r, _, _)) = pair(0, 1) {
        out.push(Verdict {
            baseline: s[0].name.clone(),
            candidate: s[1].name.clone(),
            class: Some(verdict::classify(&r)),
            sentence: format!(
                "Same work, {}: {}{qualifier}",
                s[0].name,
                verdict::sentence(&format!("on {cpus} CPUs it"), &r)
            ),
            provenance: energy.label(),
            ratios: r,
        });
    }
    if let Some((r, b, c)) = pair(2, 3) {
        out.push(Verdict {
            baseline: s[2].name.clone(),
            candidate: s[3].name.clone(),
            class: None,
            sentence: verdict::busy_cpu_sentence(b, c, cpus) + &qualifier,
            provenance: energy.label(),
            ratios: r,
        });
    }
    if let Some((r, b, c)) = pair(4, 5) {
        out.push(Verdict {
            baseline: s[4].name.clone(),
            candidate: s[5].name.clone(),
            class: None,
            sentence: verdict::wakeup_cost_sentence(b, c, secs) + &qualifier,
            provenance: energy.label(),
            ratios: r,
        });
    }
    out
}

pub fn execute(global: &GlobalArgs, args: DemoArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let meter = Meter::open(&roots, &args.meter.options())?;
    eprintln!("{}", meter.describe());
    interrupt::install();
    let exe = std::env::current_exe().context("locating the powerlens executable")?;
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let secs = args.duration.as_secs_f64();
    let workload = |extra: &[String]| -> Vec<String> {
        let mut argv = vec![exe.display().to_string(), "workload".into()];
        argv.extend(extra.iter().cloned());
        argv.push("--quiet".into());
        argv
    };
    let args_of = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
    // The same total work on 1 and on all CPUs: ~`secs` seconds on one CPU of a release
    // build (a compute unit is about 1.5 µs there).
    let units = ((secs / 1.5e-6) / 200.0).max(1.0) as u64;
    let plan: Vec<(String, Vec<String>)> = vec![
        (
            "barrier, 1 CPU".into(),
            workload(&args_of(&format!(
                "barrier --threads 1 --iterations 200 --work {units}"
            ))),
        ),
        (
            format!("barrier, {cpus} CPUs"),
            workload(&args_of(&format!(
                "barrier --threads {cpus} --iterations 200 --work {units}"
            ))),
        ),
        (
            "spin, 1 CPU".into(),
            workload(&args_of(&format!("spin --threads 1 --duration {secs}s"))),
        ),
        (
            format!("spin, {cpus} CPUs"),
            workload(&args_of(&format!(
                "spin --threads {cpus} --duration {secs}s"
            ))),
        ),
        (
            "sleepy, 100 ms period".into(),
            workload(&args_of(&format!(
                "sleepy --period 100ms --duration {secs}s"
            ))),
        ),
        (
            "sleepy, 1 ms period".into(),
            workload(&args_of(&format!("sleepy --period 1ms --duration {secs}s"))),
        ),
    ];
    let options = SeriesOptions {
        runs: args.runs as usize,
        warmup: 0,
        prepare: None,
        window: None,
        ignore_failure: false,
        show_output: false,
    };
    let bar = progress::bar((plan.len() * options.runs) as u64, "demo");
    let mut scenarios = Vec::new();
    for (name, argv) in plan {
        bar.set_prefix(name.clone());
        let series = series::run_series(&meter, &argv, &options, &bar)?;
        let stopped_early = series.stopped_early.clone();
        let result = series::result_of(&meter, argv, None, None, series);
        scenarios.push(Scenario { name, result });
        if let Some(why) = stopped_early {
            bar.finish_and_clear();
            anyhow::bail!("the demo stopped: {why}");
        }
    }
    bar.finish_and_clear();
    let verdicts = verdicts(&scenarios, cpus, secs, &meter.provenance());
    // The meter's thread stops before the recordings, which open their own.
    let provenance = meter.provenance();
    drop(meter);
    let closing = (!args.no_diff).then(|| closing_diff(global, &args, &exe));

    if args.json {
        let mut doc = serde_json::json!({
            "provenance": provenance,
            "scenarios": scenarios,
            "verdicts": verdicts,
        });
        match &closing {
            Some(Ok(c)) => doc["diff"] = c.json.clone(),
            Some(Err(why)) => doc["diff_unavailable"] = serde_json::json!(why),
            None => {}
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("energy: {}\n", provenance.label());
    let mut t = Table::new([
        "workload",
        "wall s",
        "CPU s",
        "energy J",
        "± 95% CI",
        "power W",
        "EDP J·s",
    ]);
    for s in &scenarios {
        if let Some(sum) = &s.result.summary {
            let half = sum
                .energy_j
                .ci95
                .map(|[lo, hi]| sig((hi - lo) / 2.0, 2))
                .unwrap_or_else(|| "n/a".into());
            t.row([
                s.name.clone(),
                sig(sum.wall_s.mean, 4),
                sig(sum.cpu_s.mean, 3),
                sig(sum.energy_j.mean, 4),
                half,
                sig(sum.power_w.mean, 4),
                sig(sum.edp_js.mean, 4),
            ]);
        }
    }
    print!("{}", t.render());
    println!();
    for v in &verdicts {
        println!("{}", v.sentence);
    }
    if provenance.is_estimate() {
        println!(
            "\nThese are ESTIMATES from the power model ({}), because no meter can be read here; `powerlens info` says why and how to fix it.",
            provenance.label()
        );
    }
    match &closing {
        Some(Ok(c)) => print!("{}", c.text),
        Some(Err(why)) => println!("\nNo closing diff of the two sleepers: {why}"),
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// The two sleepers recorded and put side by side: what `diff` would print of them.
struct ClosingDiff {
    /// The comparison summary, with what the recordings are and where they are.
    text: String,
    /// `diff --json`'s document, with `recordings`, `reduced` and `kept` beside it.
    json: serde_json::Value,
}

/// The sleepers of the demo, A then B of the diff: the frequent waker against the rare one.
const SLEEPERS: [(&str, &str); 2] = [("sleepy-1ms", "1ms"), ("sleepy-100ms", "100ms")];

/// Records the two sleepers with `powerlens record` (a child process each, as a user
/// would run it: tracing needs its own mount namespace and threads of its own) and diffs
/// them. `Err` says why there is no diff and how to get one.
fn closing_diff(global: &GlobalArgs, args: &DemoArgs, exe: &Path) -> Result<ClosingDiff, String> {
    let (dir, kept) = match &args.recordings {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("--recordings {}: {e}", dir.display()))?;
            (dir.clone(), true)
        }
        None => {
            let dir = std::env::temp_dir().join(format!("powerlens-demo-{}", std::process::id()));
            std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
            (dir, false)
        }
    };
    let result = record_and_diff(global, args, exe, &dir, kept);
    if !kept {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn record_and_diff(
    global: &GlobalArgs,
    args: &DemoArgs,
    exe: &Path,
    dir: &Path,
    kept: bool,
) -> Result<ClosingDiff, String> {
    let secs = args.duration.as_secs_f64();
    let spinner = progress::spinner("recording the two sleepers for the closing diff");
    let mut paths = Vec::new();
    for (name, period) in SLEEPERS {
        let rec = dir.join(format!("{name}.rec"));
        if rec.exists() {
            return Err(format!(
                "{} exists: give --recordings an empty directory",
                rec.display()
            ));
        }
        let mut c = Command::new(exe);
        for (flag, root) in [
            ("--sysfs-root", &global.sysfs_root),
            ("--procfs-root", &global.procfs_root),
        ] {
            if let Some(root) = root {
                c.arg(flag).arg(root);
            }
        }
        c.args([
            "record",
            "--no-stacks",
            "--baseline",
            "0",
            "--quiet-command",
            "-o",
        ])
        .arg(&rec);
        if let Some(model) = &args.meter.power_model {
            c.arg("--power-model").arg(model);
        }
        c.arg("--")
            .arg(exe)
            .args(["workload", "sleepy", "--period", period, "--duration"])
            .arg(format!("{secs}s"))
            .arg("--quiet")
            .stdout(Stdio::null());
        let out = c
            .output()
            .map_err(|e| format!("running `powerlens record`: {e}"))?;
        if !out.status.success() || interrupt::interrupted() {
            spinner.finish_and_clear();
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(format!(
                "recording the {period} sleeper failed ({last}); `powerlens record` needs the machine's sysfs and procfs (and root for a full trace)"
            ));
        }
        paths.push(rec);
    }
    let roots = global.roots().map_err(|e| e.to_string())?;
    let mut reports = Vec::new();
    let mut reduced = false;
    let options = AnalyseOptions {
        all_processes: false,
        grouping: None,
        stacks: false,
        stack_metrics: StackMetricsKept::Advice,
        roots: &roots,
        battery_wh: None,
        function_scope: Default::default(),
    };
    for (rec, side) in paths.iter().zip(["A", "B"]) {
        let mut shown = AnalysisOnStderr::named(format!("{side} ({}): ", rec.display()));
        let analysed = analyse(rec, &options, &mut shown).map_err(|e| format!("{e:#}"))?;
        reduced |= analysed.report.cpus.is_empty();
        reports.push(serde_json::to_value(&analysed.report).map_err(|e| e.to_string())?);
    }
    spinner.finish_and_clear();
    let diff = powerlens_core::diff::diff(
        &reports[0],
        &reports[1],
        powerlens_core::diff::Rows::Thread,
        None,
    );
    let sides = powerlens_report::diff::Sides {
        a: paths[0].display().to_string(),
        b: paths[1].display().to_string(),
        by: "thread",
    };
    let mut json: serde_json::Value =
        serde_json::from_str(&powerlens_report::diff::json(&diff, &sides))
            .map_err(|e| e.to_string())?;
    json["reduced"] = serde_json::json!(reduced);
    json["kept"] = serde_json::json!(kept);
    let mut text = format!(
        "\nThe two sleepers side by side (`powerlens diff`, A = the 1 ms sleeper, B = the 100 ms one, {secs} s each){}:\n",
        if reduced {
            ", from REDUCED recordings (procfs only: no tracing privileges), so without idle or wake-up figures"
        } else {
            ""
        }
    );
    text += &powerlens_report::diff::summary_text(&diff);
    if kept {
        text += &format!("the recordings: powerlens diff {} {}\n", sides.a, sides.b);
    } else {
        text += "(the recordings were temporary: --recordings DIR keeps them for `report` and `diff`)\n";
    }
    Ok(ClosingDiff { text, json })
}
