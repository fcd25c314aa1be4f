//! Where results are saved and how a run result becomes a database row.

use std::path::PathBuf;

use anyhow::Context;
use powerlens_core::run::RunResult;
use powerlens_store::{NewResult, ResultsDb, RunRow};

/// The default results database: `$XDG_DATA_HOME/powerlens/results.db`, else
/// `~/.local/share/powerlens/results.db`.
pub fn default_db_path() -> anyhow::Result<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(data) = var("XDG_DATA_HOME") {
        return Ok(data.join("powerlens/results.db"));
    }
    let home = var("HOME").context(
        "neither XDG_DATA_HOME nor HOME is set: give the results database with --db PATH",
    )?;
    Ok(home.join(".local/share/powerlens/results.db"))
}

pub fn db_path(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    explicit.map(Ok).unwrap_or_else(default_db_path)
}

/// Appends a run result; returns its id.
pub fn save_run(
    db: &mut ResultsDb,
    result: &RunResult,
    label: Option<String>,
) -> anyhow::Result<i64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let row = NewResult {
        created_unix: now,
        kind: "run".into(),
        command: powerlens_report::run::shell_words(&result.command),
        label,
        complete: result.complete,
        provenance: result.provenance.label(),
        mean_wall_s: result.summary.as_ref().map(|s| s.wall_s.mean),
        mean_energy_j: result.summary.as_ref().map(|s| s.energy_j.mean),
        document: serde_json::to_string(result)?,
        runs: result
            .runs
            .iter()
            .map(|r| RunRow {
                wall_s: r.wall_s,
                cpu_s: r.cpu_s,
                energy_j: r.energy_j,
                power_w: r.power_w,
                exit_code: r.exit.code,
                signal: r.exit.signal,
                domains: serde_json::to_string(&r.domains).unwrap_or_else(|_| "{}".into()),
            })
            .collect(),
    };
    Ok(db.insert(&row)?)
}
