//! `powerlens diff A B`: two recordings side by side, as the Windows 7 vs Windows 8 power
//! study compares two systems.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use powerlens_core::diff::{self, Commands, Rows};
use powerlens_core::stacks::attribution::StackMetricsKept;
use powerlens_core::stacks::grid::Grouping;
use powerlens_report::diff::{self as view, Sides};
use powerlens_store::RecordingReader;
use serde_json::Value;

use crate::args::GlobalArgs;
use crate::cmd::report::target_states;
use crate::progress::AnalysisOnStderr;
use powerlens_record::analyse::{analyse, AnalyseOptions};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens diff before.rec after.rec
  powerlens diff fast.rec slow.rec --by process
  powerlens diff a.rec b.rec --json | jq '.summary'
  powerlens diff a.rec b.rec --html diff.html    # the summary, plots and tables, one offline file
  powerlens diff a.rec b.rec --target server     # judge idle periods against a server's C6

The page starts with a headline: elapsed time, the target's CPU time, energy, switches
and wake-ups of A and B, with the ratio B / A and the difference B − A (B relative to A,
as compare gives a candidate relative to its baseline). --all adds every figure of
`report`'s system section (and its energy section, as energy.*), in the same direction;
--json has them all (`system[]`, whose `ratio` and `difference` keep their A / B and
A − B), and `a` and `b` are the very values the two reports print. Rows are matched across the recordings: processes by
command and, where names collide, by role (the words of the command line that set a
process apart from its namesakes: the `cc1` that compiled main.c with the `cc1` that
compiled main.c), threads by their process and thread name in order of creation, functions
by symbol; a matched pair that differs more than tenfold in CPU time is noted; a row found in one recording only is shown as such. The comparison summary gives
findings in the four sections of the Windows 7 vs Windows 8 power study: idleness,
scheduling, active work, energy (with E = P × t).")]
pub struct DiffArgs {
    /// The first recording (A).
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// The second recording (B).
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Which rows to match and compare.
    #[arg(long, value_enum, default_value_t = DiffBy::Thread)]
    pub by: DiffBy,

    /// Print the comparison as JSON: `system[]` (metric, a, b, ratio, difference),
    /// `rows[]` (key, a, b, difference), `summary[]` (section, finding), `notes[]`.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,

    /// Print the system figures, then the matched rows, as CSV.
    #[arg(long)]
    pub csv: bool,

    /// Write the comparison as one offline HTML page to FILE: the summary, A's and B's
    /// idle-state residency, wake-ups per second and energy per domain as bars on one
    /// axis, the system figures and the matched rows as sortable tables.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "csv"])]
    pub html: Option<PathBuf>,

    /// Show every system figure of the reports (tracing costs, idle-state constants, …)
    /// below the headline; JSON and CSV always have them.
    #[arg(long)]
    pub all: bool,

    /// Treat every process as the target in both recordings (as `report --all-processes`).
    #[arg(long)]
    pub all_processes: bool,

    /// Judge the mean idle before a wake-up against a target machine's deepest idle state
    /// (as `report --target`: server, client, or a JSON file).
    #[arg(long, value_name = "NAME|FILE")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffBy {
    Process,
    Thread,
    /// Per function (needs stacks in both recordings).
    Function,
}

pub fn execute(global: &GlobalArgs, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let (rows, by) = match args.by {
        DiffBy::Process => (Rows::Process, "process"),
        DiffBy::Thread => (Rows::Thread, "thread"),
        DiffBy::Function => (Rows::Function, "function"),
    };
    // A bad --target fails before the analyses.
    let target = args.target.as_deref().map(target_states).transpose()?;
    let roots = global.roots()?;
    let options = AnalyseOptions {
        all_processes: args.all_processes,
        grouping: (rows == Rows::Function).then_some(Grouping::Function),
        stacks: true,
        stack_metrics: match rows {
            Rows::Function => StackMetricsKept::All,
            _ => StackMetricsKept::Advice,
        },
        roots: &roots,
        battery_wh: None,
        function_scope: Default::default(),
    };
    let a = report_json(&args.a, &options, "A").context("A")?;
    let b = report_json(&args.b, &options, "B").context("B")?;
    let commands = [
        commands_of(&args.a).context("A")?,
        commands_of(&args.b).context("B")?,
    ];
    let diff =
        diff::diff_with_commands(&a, &b, rows, target.as_ref(), [&commands[0], &commands[1]]);
    let sides = Sides {
        a: args.a.display().to_string(),
        b: args.b.display().to_string(),
        by,
    };
    if let Some(path) = &args.html {
        let page = view::html(&diff, &sides, &a, &b);
        super::export::write_whole(path, page.as_bytes())?;
        eprintln!("wrote {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let out = if args.json {
        view::json(&diff, &sides) + "\n"
    } else if args.csv {
        view::csv(&diff)
    } else {
        let opts = view::TextOptions {
            all: args.all,
            fit: super::report::text_name_fit(),
        };
        view::text(&diff, &sides, &opts)
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// The command line of each process that exec'ed while recording (`commands` samples:
/// none in a recording made before they were recorded), for matching namesakes by role.
fn commands_of(path: &Path) -> anyhow::Result<Commands> {
    let reader = RecordingReader::open(path)?;
    let mut out = Commands::new();
    reader.samples("commands", |_, v| {
        if let (Some(pid), Some(argv)) = (v["pid"].as_u64(), v["argv"].as_array()) {
            let argv = argv.iter().filter_map(|w| w.as_str().map(String::from));
            out.insert(pid, argv.collect());
        }
    })?;
    Ok(out)
}

/// The recording's report as the JSON value `report --json` prints, so that the diff's
/// figures are that report's own.
/// One side's report, its warnings and notes named after it (`note: A (a.rec): …`).
fn report_json(path: &Path, options: &AnalyseOptions<'_>, side: &str) -> anyhow::Result<Value> {
    let mut shown = AnalysisOnStderr::named(format!("{side} ({}): ", path.display()));
    let analysed = analyse(path, options, &mut shown)?;
    Ok(serde_json::to_value(&analysed.report)?)
}
