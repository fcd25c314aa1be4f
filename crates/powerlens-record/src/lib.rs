//! Recording: the scheduler, idle, frequency, IRQ and timer tracepoints of every CPU, plus
//! periodic energy/cpuidle/cpufreq samples, into one recording file. Orchestration only:
//! the collector (powerlens-sys) reads, [`convert`] maps records to core events, the codec
//! (powerlens-core) packs them and the recording file (powerlens-store) keeps them.
//!
//! Without tracing privileges it falls back to a *reduced* recording: per-thread CPU time
//! and context-switch counts sampled from procfs.
//!
//! The public face:
//! - [`record`] makes a recording as [`RecordOptions`] say ([`Target`], what to sample,
//!   [`Phase`]s shown and things told on the way) and returns a [`RecordSummary`];
//! - [`analyse::analyse`] reads one back as `report`, `diff` and `demo` show it, its
//!   [`header::Header`] (metadata, threads, samples) read in one trip;
//! - [`live::LiveSession`] analyses the running system in intervals (`top`, the agent);
//! - [`meter::Meter`] and [`exec`] measure and run commands (`run`, `compare`), or
//!   [`mock`] scripts them for tests;
//! - every fallible function returns a [`RecordError`]; [`meta`] names the metadata keys.

mod alarm;
pub mod analyse;
pub mod battery_gauge;
pub mod context;
pub mod convert;
pub mod cost_cache;
pub mod drain;
mod error;
pub mod exec;
mod exec_watch;
mod handoff;
pub mod header;
pub mod instrument;
pub mod interrupt;
pub mod jit_env;
mod jit_names;
pub mod live;
pub mod meta;
pub mod meter;
pub mod mock;
mod mock_meter;
mod on_time;
mod open;
mod options;
mod pending_events;
mod priority;
mod procfs_source;
mod recorder;
pub mod reduced;
pub mod replay;
pub mod sampler;
mod session;
pub mod stack_twins;
pub mod stacks;
pub mod symbols;
pub mod threads;
mod tournament;
mod untraced;

pub use error::RecordError;
pub use meta::{MODE_REDUCED, MODE_TRACE};
pub use open::{content_warning, open_recording, open_unchecked};
pub use options::{no_phase, tell_nobody, Phase, RecordOptions, RecordSummary, Target};
pub use session::record;
