//! Kernel tracepoints recorded through `perf_event_open`: the collector layer that
//! `record`, stacks and `wake` build on. Three modules, one job each:
//!
//! - [`format`]: parse `<tracefs>/events/<system>/<name>/format` into an [`EventFormat`]
//!   and decode raw payloads by field name ([`EventFormat::decode`] → [`Decoded`] with
//!   `u64`/`i64`/`str`/`bytes` accessors). Pure, no I/O.
//! - [`ring`]: one mmap'd perf ring buffer ([`ring::Ring`]).
//! - [`records`]: its records decoded: samples (each by its event's sample type, found
//!   from the identifier), `PERF_RECORD_LOST`, `PERF_RECORD_MMAP2`, `PERF_RECORD_COMM`.
//! - [`collector`]: [`Collector`], the API most callers want.
//!
//! ```no_run
//! use powerlens_sys::trace::{Collector, CollectorOptions};
//! use powerlens_sys::Roots;
//!
//! let roots = Roots::default();
//! let events = ["sched/sched_switch", "sched/sched_wakeup", "ipi/ipi_send_cpu"];
//! let mut collector = Collector::open(&roots, &events, CollectorOptions::default())?;
//! for missing in collector.unavailable() {
//!     eprintln!("{}: {} (fix: {:?})", missing.event, missing.reason, missing.fix);
//! }
//! collector.enable()?;
//! // … run the workload, calling drain() often enough that the rings do not fill …
//! collector.disable()?;
//! collector.drain(|record| {
//!     let fields = record.decoded();
//!     if record.format.name == "sched_switch" {
//!         let prev = fields.str("prev_comm");
//!         let state = fields.i64("prev_state");
//!         println!("{} cpu{} {prev:?} state {state:?}", record.time_ns, record.cpu);
//!     }
//! });
//! println!("lost per cpu: {:?}", collector.lost());
//! # Ok::<(), powerlens_sys::SysError>(())
//! ```
//!
//! Guarantees and limits (see also `docs/COLLECTOR.md`):
//! - Timestamps are CLOCK_MONOTONIC nanoseconds (`use_clockid`), the clock of the sysfs
//!   sampler and of `clock_gettime(CLOCK_MONOTONIC)`.
//! - One ring per CPU; records of one CPU come in write order (time order up to nesting by
//!   interrupts); merging CPUs by time is the caller's job.
//! - Call stacks on request ([`CollectorOptions::callchains`], [`ring::Callchain`]); user
//!   registers and stack copies for DWARF unwinding on chosen events
//!   ([`CollectorOptions::stack_events`], see [`crate::unwind`]); CPU-clock samples
//!   ([`CollectorOptions::cpu_clock_hz`]) and new executable mappings
//!   ([`CollectorOptions::mmap_records`]) through [`Collector::drain_all`];
//!   [`Collector::wait`] blocks until a ring is half full.
//! - Lost records are counted per CPU ([`Collector::lost`]), never silently dropped.
//! - Needs tracefs mounted (errors say `mount -t tracefs nodev /sys/kernel/tracing`) and
//!   root or a low `perf_event_paranoid` (errors carry the fix).

pub mod collector;
pub mod format;
pub mod in_kernel;
pub mod mount;
pub mod records;
pub mod ring;

pub use collector::{
    monotonic_now_ns, Collected, Collector, CollectorOptions, CommRecord, CpuSampleRecord,
    MmapRecord, RawChunk, RecordDecoder, TraceRecord, TraceSwitch, UnavailableEvent,
    CPU_CLOCK_EVENT, DEFAULT_SAMPLE_STACK_BYTES, DEFAULT_USER_STACK_BYTES, EXITED, MMAP_EVENT,
};
pub use format::{Decoded, EventFormat, Field, FieldKind, FormatError};
pub use mount::ensure_tracefs;
pub use records::{Callchain, Frame, UserRegs};

/// What one copy of rings took out ([`Collector::copy_out`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CopiedOut {
    pub bytes: usize,
    /// The largest share of its size one ring held: how close the copy came to records
    /// lost.
    pub fullest_ring_share: f64,
}

impl CopiedOut {
    /// One ring's copy: `bytes` out of a ring of `ring_bytes`.
    pub fn of_ring(bytes: usize, ring_bytes: usize) -> CopiedOut {
        CopiedOut {
            bytes,
            fullest_ring_share: bytes as f64 / ring_bytes.max(1) as f64,
        }
    }

    /// Adds another ring's (or set of rings') copy.
    pub fn add(&mut self, other: CopiedOut) {
        self.bytes += other.bytes;
        self.fullest_ring_share = self.fullest_ring_share.max(other.fullest_ring_share);
    }
}

#[cfg(test)]
mod tests {
    use super::CopiedOut;

    /// Copies of several rings: the bytes add up, and the fullest ring's share is kept,
    /// not the sum's (two rings half full are not one full ring).
    #[test]
    fn a_copy_of_several_rings_keeps_the_fullest_share() {
        let mut copied = CopiedOut::default();
        copied.add(CopiedOut::of_ring(512, 1024));
        copied.add(CopiedOut::of_ring(256, 4096));
        copied.add(CopiedOut::of_ring(0, 1024));
        assert_eq!(copied.bytes, 768);
        assert_eq!(copied.fullest_ring_share, 0.5);
    }
}
