//! `powerlens restore`: puts back system settings that a killed powerlens left applied.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use powerlens_sys::settings;

use crate::args::GlobalArgs;

const WHEN_NEEDED: &str = "\
compare and sweep apply the settings of each --config (governor, EPP, frequency limits,
turbo, idle states, PM QoS) and restore the original values when they end: normally, on an
error, and on Ctrl-C. Only when powerlens itself dies without running its cleanup (SIGKILL,
the OOM killer, a crash that aborts) do the settings stay applied. For that case the
original values are written to a journal before anything changes; this command writes them
back and removes the journal. compare and sweep refuse to start while a journal is left.

Not needed for PM QoS limits (the kernel drops them when the process ends) or after a
reboot (which resets every setting and clears the journal, kept on tmpfs).";

#[derive(Debug, Args)]
#[command(after_long_help = WHEN_NEEDED)]
pub struct RestoreArgs {
    /// The journal of original values [default: $POWERLENS_SETTINGS_JOURNAL, else
    /// $XDG_RUNTIME_DIR/powerlens/settings-journal.json, else
    /// /run/powerlens/settings-journal.json].
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
}

pub fn execute(global: &GlobalArgs, args: RestoreArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let journal = args.journal.unwrap_or_else(settings::default_journal_path);
    match settings::restore_from_journal(&roots, &journal) {
        Ok(0) => println!("nothing to restore: no journal at {}", journal.display()),
        Ok(n) => println!(
            "restored {n} original value{} from {}",
            if n == 1 { "" } else { "s" },
            journal.display()
        ),
        Err(failures) => {
            let list: Vec<String> = failures.iter().map(|e| format!("  {e}")).collect();
            anyhow::bail!(
                "not everything could be restored; the journal {} stays for another try:\n{}",
                journal.display(),
                list.join("\n")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
