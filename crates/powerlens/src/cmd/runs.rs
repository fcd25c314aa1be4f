//! `powerlens runs list|show`: the results database.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use powerlens_core::run::RunResult;
use powerlens_report::table::{sig, utc_minute, Table};

use crate::results;

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Results database [default: $XDG_DATA_HOME/powerlens/results.db].
    #[arg(long, value_name = "PATH", env = "POWERLENS_DB", global = true)]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub action: RunsAction,
}

#[derive(Debug, Subcommand)]
pub enum RunsAction {
    /// List the saved results, oldest first.
    List {
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Show one saved result in full.
    Show {
        /// The result id, as `runs list` prints it.
        id: i64,
        /// Print the stored JSON document.
        #[arg(long)]
        json: bool,
    },
}

pub fn execute(args: RunsArgs) -> anyhow::Result<ExitCode> {
    let path = results::db_path(args.db)?;
    if !path.exists() {
        anyhow::bail!(
            "no results database at {} yet: `powerlens run -- CMD` creates it (or give another with --db)",
            path.display()
        );
    }
    let db = results::open_existing_db(&path)?;
    match args.action {
        RunsAction::List { json } => {
            let (rows, damaged): (Vec<_>, Vec<_>) =
                db.list()?.into_iter().partition(|r| !r.damaged);
            if !damaged.is_empty() {
                let ids: Vec<String> = damaged.iter().map(|r| r.id.to_string()).collect();
                eprintln!(
                    "warning: results {} in {} are damaged (their contents no longer match the checksum saved with them) and were skipped; run those measurements again",
                    ids.join(", "),
                    path.display()
                );
            }
            if json {
                let items: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "id": r.id, "created_unix": r.created_unix, "kind": r.kind,
                            "command": r.command, "label": r.label, "runs": r.runs,
                            "complete": r.complete, "provenance": r.provenance,
                            "mean_wall_s": r.mean_wall_s, "mean_energy_j": r.mean_energy_j,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else if rows.is_empty() {
                println!("no results in {}", path.display());
            } else {
                let mut t = Table::new([
                    "id",
                    "date (UTC)",
                    "runs",
                    "wall s",
                    "energy J",
                    "energy",
                    "label",
                    "command",
                ]);
                for r in &rows {
                    let opt = |v: Option<f64>| v.map(|x| sig(x, 4)).unwrap_or_else(|| "-".into());
                    t.row([
                        r.id.to_string(),
                        utc_minute(r.created_unix),
                        format!("{}{}", r.runs, if r.complete { "" } else { " (partial)" }),
                        opt(r.mean_wall_s),
                        opt(r.mean_energy_j),
                        r.provenance.clone(),
                        r.label.clone().unwrap_or_default(),
                        r.command.clone(),
                    ]);
                }
                print!("{}", t.render());
            }
        }
        RunsAction::Show { id, json } => {
            let row = db.get(id)?;
            if json {
                println!("{}", row.document);
            } else {
                let result: RunResult = serde_json::from_str(&row.document).with_context(|| {
                    format!("result {id} holds a document this powerlens cannot read")
                })?;
                println!(
                    "result {id}{}",
                    row.label.map(|l| format!(" ({l})")).unwrap_or_default()
                );
                print!("{}", powerlens_report::run::text(&result));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
