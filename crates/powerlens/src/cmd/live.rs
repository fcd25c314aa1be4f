//! The flags of the commands that run a live session (`agent`, `top`): one table, so that
//! both measure the same way and say it with the same words.

use std::time::Duration;

use clap::Args;
use powerlens_record::live::{IdlePower, LiveOptions, Tracing};

use crate::cmd::run::MeterArgs;
use crate::units::{parse_positive_duration, parse_positive_number};

#[derive(Debug, Args)]
pub struct LiveArgs {
    /// Length of an interval: how often energy is read and attributed.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration)]
    pub interval: Duration,

    /// The node's idle (baseline) power, W, when a meter measures [default: each domain's
    /// lowest interval power so far]. With the power model, its own idle term is used.
    #[arg(long, value_name = "WATTS", value_parser = parse_positive_number)]
    pub idle_w: Option<f64>,

    /// Ring buffer per CPU, in pages.
    #[arg(long, value_name = "PAGES", default_value_t = 256)]
    pub buffer_pages: usize,

    /// Sample /proc instead of tracing (CPU time only: no wake-ups).
    #[arg(long)]
    pub reduced: bool,

    /// Trace every event through perf ring buffers. By default the scheduler's switches
    /// and wake-ups are collected in the kernel (BPF) where it allows: the same events, at
    /// a fraction of what perf records cost the watched processes (docs/RECORD.md, How
    /// events are collected).
    #[arg(long, env = "POWERLENS_PERF_RINGS",
          value_parser = clap::builder::FalseyValueParser::new())]
    pub perf_rings: bool,

    #[command(flatten)]
    pub meter: MeterArgs,
}

impl LiveArgs {
    /// The session's options; `tracing` is how much the command traces unless
    /// `--reduced` says not at all; `stop_check`, how often its stop condition must be
    /// asked besides Ctrl-C and SIGTERM ([`LiveOptions::stop_check`]).
    pub fn options(&self, tracing: Tracing, stop_check: Option<Duration>) -> LiveOptions {
        LiveOptions {
            interval: self.interval,
            buffer_pages: self.buffer_pages,
            meter: self.meter.options(),
            idle: self
                .idle_w
                .map(IdlePower::Fixed)
                .unwrap_or(IdlePower::Lowest),
            tracing: if self.reduced { Tracing::Off } else { tracing },
            in_kernel: !self.perf_rings,
            stop_check,
        }
    }
}
