//! `powerlens wake report RESULT…`: compares saved results and draws them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use powerlens_core::wake::WakeResult;
use powerlens_report::wake::{self as view, Loaded};

pub const LONG_ABOUT: &str = "\
Compare results saved with `powerlens wake -o RESULT`: a table of every result and state
(datapoints kept and dropped, UserLatency and wake latency median, p99.9 and max in µs,
the declared exit latency and whether it is exceeded), and two SVG files in --out:

  latency-scatter.svg    wake latency against silent time per datapoint (as the waltr
                         thesis plots it), or UserLatency against LDist when any result
                         lacks the idle trace (silent time unavailable)
  latency-histogram.svg  the same latency's distribution, share of datapoints per bin

With --html FILE, also one self-contained page (no network access; prints cleanly) with the
comparison table (sortable), both plots and each result's text report.

Example: powerlens wake report wake-poll wake-haltpoll --out plots --html wake.html";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result directories written by `powerlens wake -o`.
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,

    /// Where to write the SVG files.
    #[arg(long, value_name = "DIR", default_value = "wake-report")]
    pub out: PathBuf,

    /// Also write one self-contained HTML page to FILE: the comparison table (sortable), the
    /// latency scatter and histogram with axes in µs, and each result's text report.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Print the results' JSON (an array of info.json documents) instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn load(dir: &Path) -> anyhow::Result<Loaded> {
    let info = dir.join("info.json");
    let text = std::fs::read_to_string(&info).with_context(|| {
        format!(
            "{}: not a wake result (fix: give a directory written by `powerlens wake -o`)",
            info.display()
        )
    })?;
    let result: WakeResult = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a powerlens wake info.json", info.display()))?;
    let csv = dir.join("datapoints.csv");
    let text =
        std::fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
    let points =
        view::parse_datapoints_csv(&text).map_err(|e| anyhow::anyhow!("{}: {e}", csv.display()))?;
    let label = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    Ok(Loaded {
        label,
        result,
        points,
    })
}

pub fn execute(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let loaded = args
        .results
        .iter()
        .map(|d| load(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if loaded.iter().all(|l| l.points.is_empty()) {
        bail!("the results hold no kept datapoint: nothing to plot");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let scatter = args.out.join("latency-scatter.svg");
    std::fs::write(&scatter, view::scatter_svg(&loaded))
        .with_context(|| format!("writing {}", scatter.display()))?;
    let histogram = args.out.join("latency-histogram.svg");
    std::fs::write(&histogram, view::histogram_svg(&loaded))
        .with_context(|| format!("writing {}", histogram.display()))?;
    if let Some(path) = &args.html {
        crate::cmd::export::write_whole(path, view::html(&loaded).as_bytes())?;
    }
    if args.json {
        let docs: Vec<&WakeResult> = loaded.iter().map(|l| &l.result).collect();
        println!("{}", serde_json::to_string_pretty(&docs)?);
    } else {
        print!("{}", view::compare_text(&loaded));
        println!("wrote {} and {}", scatter.display(), histogram.display());
        if let Some(path) = &args.html {
            println!("wrote {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
