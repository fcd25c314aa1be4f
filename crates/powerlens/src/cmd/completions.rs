//! `powerlens completions SHELL` and `powerlens man`: generated from the same flag table as
//! `--help`, so they never disagree with it.

use std::process::ExitCode;

use clap::Args;
use clap_complete::Shell;

#[derive(Debug, Args)]
#[command(after_help = "Example: powerlens completions bash > /etc/bash_completion.d/powerlens")]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    pub shell: Shell,
}

/// `cmd`: the whole command table, from the dispatcher (this module does not know it).
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    clap_complete::generate(args.shell, &mut cmd, "powerlens", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
#[command(after_help = "Example: powerlens man > /usr/local/share/man/man1/powerlens.1")]
pub struct ManArgs {}

/// Writes the man page (roff) for powerlens and, as sections, each of its commands.
/// `cmd`: the whole command table, from the dispatcher.
pub fn man(_: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("powerlens-{}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone().name(name));
        page.render_title(&mut out)?;
        page.render_name_section(&mut out)?;
        page.render_synopsis_section(&mut out)?;
        page.render_description_section(&mut out)?;
        page.render_options_section(&mut out)?;
        page.render_extra_section(&mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}
