//! System-wide tracepoint collection: every requested event opened on every online CPU,
//! one ring buffer per CPU shared by all events of that CPU, drained into [`TraceRecord`]s;
//! optionally with user stacks on chosen events, CPU-clock samples and the executable
//! mappings (MMAP2) needed to unwind and symbolize those stacks, all in the same rings.

use std::path::{Path, PathBuf};

use std::os::fd::{AsFd, AsRawFd};

use crate::perf::{permission_fix, PerfCounter, FLAG_EXCLUDE_IDLE, PERF_SAMPLE_CALLCHAIN};
use crate::perf_caps::{read_paranoid, refused, require_tracefs, NO_TRACEPOINT};
use crate::trace::format::EventFormat;
use crate::trace::in_kernel::{self, InKernel, Kind};
use crate::trace::records::{Callchain, UserRegs, SAMPLE_TYPE, STACK_SAMPLE_TYPE};
use crate::trace::ring::Ring;
use crate::trace::CopiedOut;
use crate::{sysfs, topology, Roots, SysError};

mod attrs;
mod decode;
mod options;
pub mod pacing;
mod served;
mod switch;

use attrs::*;
use decode::{decode_record, EventIds};
pub use decode::{
    Collected, CommRecord, CpuSampleRecord, MmapRecord, RawChunk, RecordDecoder, TraceRecord,
    EXITED,
};
pub use options::{CollectorOptions, DEFAULT_SAMPLE_STACK_BYTES, DEFAULT_USER_STACK_BYTES};
pub use switch::TraceSwitch;

/// The name under which an unavailable CPU-clock sampler is reported.
pub const CPU_CLOCK_EVENT: &str = "cpu-clock";
/// The name under which unavailable side-band (mapping) records are reported.
pub const MMAP_EVENT: &str = "mmap";

/// A requested event that could not be opened, and why; the rest of the collector works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableEvent {
    /// As requested, e.g. `ipi/ipi_send_cpu`, or [`CPU_CLOCK_EVENT`], [`MMAP_EVENT`].
    pub event: String,
    pub reason: String,
    pub fix: Option<String>,
}

/// Now in the clock of [`TraceRecord::time_ns`] (CLOCK_MONOTONIC nanoseconds), for
/// samplers and workloads whose readings must line up with trace records.
pub fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a local timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What wrote a record, found from its perf event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    /// Index in `Collector::events`.
    Trace(usize),
    /// The twin that samples the stacks of the event at this index.
    StackSample(usize),
    CpuClock,
    /// The dummy event that carries MMAP2/COMM records; it writes no samples.
    SideBand,
}

#[derive(Debug, Clone, Copy)]
struct Source {
    kind: SourceKind,
    /// What its samples hold, to parse them.
    sample_type: u64,
}

/// The events of one CPU and the ring they all write to.
#[derive(Debug)]
struct CpuRing {
    cpu: u32,
    // Declared before `counters` so it is unmapped before they close.
    ring: Ring,
    /// One per source, in the order of `Collector::sources`.
    counters: Vec<PerfCounter>,
    lost: u64,
}

/// Open tracepoints on all online CPUs. Starts disabled: call [`Collector::enable`].
#[derive(Debug)]
pub struct Collector {
    events: Vec<EventFormat>,
    unavailable: Vec<UnavailableEvent>,
    cpus: Vec<CpuRing>,
    /// Every event opened per CPU: the tracepoints in `events` order, then the CPU clock
    /// and the side-band event when requested and available.
    sources: Vec<Source>,
    /// Perf event id (per event per CPU) to index in `sources`.
    ids: EventIds,
    /// The notes of what was degraded while opening (e.g. exclude_idle refused).
    notes: Vec<String>,
    /// User-stack bytes asked of stack events and of CPU-clock samples, as the kernel
    /// took them.
    stack_bytes: (u32, u32),
    /// The stack-sample twins' pacing, when stacks are sampled.
    pacing: Option<Pacing>,
    /// The tracepoints served in the kernel, when any are.
    in_kernel: Option<(InKernel, served::Served)>,
    /// Why in-kernel collection was asked for and not used.
    in_kernel_refused: Option<String>,
}

/// One stack-sample twin on one CPU, as the pacing sees it.
#[derive(Debug)]
struct PacedTwin {
    /// Index in `Collector::cpus`, and in that CPU's counters.
    cpu: usize,
    counter: usize,
    pace: pacing::TwinPace,
}

/// What [`Collector::pace_stack_samples`] keeps between calls.
#[derive(Debug)]
struct Pacing {
    max_per_s: u32,
    /// When the first call came, and the last that acted.
    started_ns: u64,
    last_ns: u64,
    /// Every twin on every CPU.
    twins: Vec<PacedTwin>,
    /// The largest period set so far: 1 while every hit had its stack.
    max_period: u64,
}

impl Drop for Collector {
    /// Disables and unmaps every ring, then leaves the closing of the events to a detached
    /// process ([`crate::perf::close_detached`]): closed here, one by one, they took a
    /// second after every recording.
    fn drop(&mut self) {
        let _ = self.disable();
        let mut counters = Vec::new();
        for cpu in self.cpus.drain(..) {
            let CpuRing {
                ring, counters: c, ..
            } = cpu;
            drop(ring);
            counters.extend(c);
        }
        crate::perf::close_detached(counters);
    }
}

impl Collector {
    /// Opens `events` (`system/name`, as under `<tracefs>/events`) system-wide on every
    /// online CPU, plus what `options` asks for. An event the kernel lacks is listed in
    /// [`Collector::unavailable`] with the reason (so is a CPU clock or side-band event
    /// that cannot be opened, as [`CPU_CLOCK_EVENT`] / [`MMAP_EVENT`]); errors are what
    /// stops all collection: tracefs not mounted, permission denied (with the
    /// `perf_event_paranoid` fix), a ring that cannot be mapped.
    pub fn open(
        roots: &Roots,
        events: &[&str],
        options: CollectorOptions,
    ) -> Result<Collector, SysError> {
        let tracefs = require_tracefs(roots)?;
        let cpus = topology::read_online(roots)?;
        let pages = options.buffer_pages.max(1).next_power_of_two();
        let stack_bytes = user_stack_size(options.user_stack_bytes);
        let sample_stack_bytes = user_stack_size(options.cpu_clock_stack_bytes);
        let mut collector = Collector {
            events: Vec::new(),
            unavailable: Vec::new(),
            cpus: Vec::new(),
            sources: Vec::new(),
            ids: EventIds::default(),
            notes: Vec::new(),
            stack_bytes: (stack_bytes, sample_stack_bytes),
            pacing: None,
            in_kernel: None,
            in_kernel_refused: None,
        };
        let mut served = served::Served::default();
        let mut in_kernel = None;
        if options.in_kernel {
            let kinds = served::servable(events, &options);
            if !kinds.is_empty() {
                // A ring per CPU, twice the size of a perf ring for records a third the
                // size of perf's, and 8 MiB in all at least.
                let ring_bytes = (pages * page_size() * 2).max((8 << 20) / cpus.len().max(1));
                let stacks = served::stacks_for(&kinds, &options);
                match InKernel::open_with_stacks(&kinds, &cpus, ring_bytes, stacks) {
                    Ok(k) => in_kernel = Some(k),
                    Err(why) => collector.in_kernel_refused = Some(why),
                }
            }
        }
        // Per source: its attribute, and a probe open on the first CPU that tells "the
        // kernel lacks it" (unavailable) from "not allowed" (an error for the whole
        // collector). The probes serve as the first CPU's events.
        let mut attrs = Vec::new();
        let mut first_cpu = Vec::new();
        for &event in events {
            let kind = Kind::for_tracepoint(event);
            if let (Some(k), Some(kernel)) = (kind, &in_kernel) {
                if kernel.kinds().contains(&k) {
                    served.add(k, collector.events.len());
                    collector.events.push(k.format());
                    continue;
                }
            }
            let Some(format) = read_format(&tracefs, event, &mut collector.unavailable)? else {
                continue;
            };
            let mut sample_type = SAMPLE_TYPE;
            if options.callchains {
                sample_type |= PERF_SAMPLE_CALLCHAIN;
            }
            let stack_event = options.stack_events.iter().any(|e| e == event);
            let sampled = stack_event && options.stack_samples_per_s.is_some();
            let mut chain_flags = 0;
            if stack_event && !sampled {
                sample_type |= STACK_SAMPLE_TYPE;
                (sample_type, chain_flags) = stack_event_chain(sample_type, &options);
            }
            let mut attr = tracepoint_attr(&format, pages, sample_type, stack_bytes);
            attr.flags |= chain_flags;
            match PerfCounter::open(&attr, -1, cpus[0] as i32) {
                Ok(counter) => {
                    first_cpu.push(counter);
                    attrs.push(attr);
                    collector.sources.push(Source {
                        kind: SourceKind::Trace(collector.events.len()),
                        sample_type,
                    });
                    if sampled {
                        // Opened after the event, the twin comes first in the
                        // tracepoint's list: its record precedes the event's own.
                        let twin = stack_sample_attr(&format, pages, stack_bytes, &options);
                        let counter = PerfCounter::open(&twin, -1, cpus[0] as i32)
                            .map_err(|e| open_failed(event, cpus[0], e))?;
                        first_cpu.push(counter);
                        attrs.push(twin);
                        collector.sources.push(Source {
                            kind: SourceKind::StackSample(collector.events.len()),
                            sample_type: twin.sample_type,
                        });
                    }
                    collector.events.push(format);
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                    return Err(SysError::PermissionDenied {
                        path: tracefs.join("events").join(event),
                        fix: permission_fix(read_paranoid(roots).ok()),
                    });
                }
                Err(e) => {
                    let what = format!("tracepoint {event} (id {}) on cpu{}", format.id, cpus[0]);
                    collector.unavailable_because(roots, event, &what, e);
                }
            }
        }
        if let Some(hz) = options.cpu_clock_hz {
            let mut attr = cpu_clock_attr(hz, pages, sample_stack_bytes);
            let mut opened = PerfCounter::open(&attr, -1, cpus[0] as i32);
            if opened.is_err() {
                // Kernels that refuse exclude_idle on software events: sample the idle
                // task too (its samples have pid 0) rather than not at all.
                attr.flags &= !FLAG_EXCLUDE_IDLE;
                opened = PerfCounter::open(&attr, -1, cpus[0] as i32);
                if opened.is_ok() {
                    collector.notes.push(
                        "cpu-clock: the kernel refused exclude_idle; idle time is sampled as pid 0"
                            .to_string(),
                    );
                }
            }
            match opened {
                Ok(counter) => {
                    first_cpu.push(counter);
                    attrs.push(attr);
                    collector.sources.push(Source {
                        kind: SourceKind::CpuClock,
                        sample_type: attr.sample_type,
                    });
                }
                Err(e) => {
                    let what = format!("the cpu-clock software event on cpu{}", cpus[0]);
                    collector.unavailable_because(roots, CPU_CLOCK_EVENT, &what, e);
                }
            }
        }
        if options.mmap_records && !attrs.is_empty() {
            let attr = side_band_attr();
            match PerfCounter::open(&attr, -1, cpus[0] as i32) {
                Ok(counter) => {
                    first_cpu.push(counter);
                    attrs.push(attr);
                    collector.sources.push(Source {
                        kind: SourceKind::SideBand,
                        sample_type: attr.sample_type,
                    });
                }
                Err(e) => {
                    let what = format!("the side-band (mmap) event on cpu{}", cpus[0]);
                    collector.unavailable_because(roots, MMAP_EVENT, &what, e);
                }
            }
        }
        if let Some(kernel) = in_kernel {
            collector.in_kernel = Some((kernel, served));
        }
        if attrs.is_empty() {
            return Ok(collector);
        }
        let mut first_cpu = Some(first_cpu);
        for &cpu in &cpus {
            let counters = match first_cpu.take() {
                Some(counters) => counters,
                None => attrs
                    .iter()
                    .zip(&collector.sources)
                    .map(|(attr, source)| {
                        PerfCounter::open(attr, -1, cpu as i32)
                            .map_err(|e| open_failed(&collector.source_name(source), cpu, e))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            };
            let ring =
                Ring::map(counters[0].as_fd(), pages).map_err(|e| map_failed(cpu, pages, e))?;
            for (index, counter) in counters.iter().enumerate() {
                if index > 0 {
                    counter
                        .set_output(&counters[0])
                        .map_err(|e| open_failed("PERF_EVENT_IOC_SET_OUTPUT", cpu, e))?;
                }
                let id = counter
                    .id()
                    .map_err(|e| open_failed("PERF_EVENT_IOC_ID", cpu, e))?;
                collector.ids.insert(id, index);
            }
            collector.cpus.push(CpuRing {
                cpu,
                ring,
                counters,
                lost: 0,
            });
        }
        if let Some(max_per_s) = options.stack_samples_per_s {
            let sources = &collector.sources;
            let twins = (0..collector.cpus.len())
                .flat_map(|cpu| {
                    (0..sources.len())
                        .filter(|&i| matches!(sources[i].kind, SourceKind::StackSample(_)))
                        .map(move |counter| PacedTwin {
                            cpu,
                            counter,
                            pace: pacing::TwinPace::default(),
                        })
                })
                .collect();
            collector.pacing = Some(Pacing {
                max_per_s,
                started_ns: 0,
                last_ns: 0,
                twins,
                max_period: 1,
            });
        }
        Ok(collector)
    }

    fn unavailable_because(&mut self, roots: &Roots, event: &str, what: &str, e: std::io::Error) {
        let why = refused(roots, what, NO_TRACEPOINT, e);
        self.unavailable.push(UnavailableEvent {
            event: event.to_string(),
            reason: why.reason,
            fix: why.fix,
        });
    }

    fn source_name(&self, source: &Source) -> String {
        match source.kind {
            SourceKind::Trace(event) | SourceKind::StackSample(event) => {
                self.events[event].full_name()
            }
            SourceKind::CpuClock => CPU_CLOCK_EVENT.to_string(),
            SourceKind::SideBand => MMAP_EVENT.to_string(),
        }
    }

    /// The events being collected; [`TraceRecord::event`] indexes this.
    pub fn events(&self) -> &[EventFormat] {
        &self.events
    }

    /// The tracepoints served in the kernel ([`CollectorOptions::in_kernel`]), as
    /// `system/name`; empty when every event goes through the perf rings.
    pub fn in_kernel_events(&self) -> Vec<String> {
        self.in_kernel
            .as_ref()
            .map(|(k, _)| {
                k.kinds()
                    .iter()
                    .map(|k| k.tracepoint().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The in-kernel programs' run time (the kernel's account, while timed) and the
    /// records of each kind drained, since open
    /// ([`crate::trace::in_kernel::InKernel::program_times`]); `None` with nothing served
    /// in the kernel.
    pub fn in_kernel_program_times(&self) -> Option<crate::trace::in_kernel::ProgramTimes> {
        Some(self.in_kernel.as_ref()?.0.program_times())
    }

    /// Turns the kernel's timing of the in-kernel programs on or off
    /// ([`crate::trace::in_kernel::InKernel::time_programs`]); whether it is on.
    pub fn time_in_kernel_programs(&mut self, on: bool) -> bool {
        self.in_kernel
            .as_mut()
            .is_some_and(|(k, _)| k.time_programs(on))
    }

    /// Why in-kernel collection was asked for and the perf rings took its tracepoints
    /// instead (no BTF, no permission, a verifier's refusal…).
    pub fn in_kernel_refused(&self) -> Option<&str> {
        self.in_kernel_refused.as_deref()
    }

    /// The requested events that could not be opened.
    pub fn unavailable(&self) -> &[UnavailableEvent] {
        &self.unavailable
    }

    /// What was opened in a reduced form, in words (e.g. a CPU clock that samples idle).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// User-stack bytes copied per record of a stack event (a multiple of 8).
    pub fn user_stack_bytes(&self) -> u32 {
        self.stack_bytes.0
    }

    /// User-stack bytes copied per CPU-clock sample (a multiple of 8).
    pub fn sample_stack_bytes(&self) -> u32 {
        self.stack_bytes.1
    }

    /// Whether CPU-clock samples are being collected.
    pub fn has_cpu_clock(&self) -> bool {
        self.sources.iter().any(|s| s.kind == SourceKind::CpuClock)
    }

    /// Whether MMAP2/COMM side-band records are being collected.
    pub fn has_mmap_records(&self) -> bool {
        self.sources.iter().any(|s| s.kind == SourceKind::SideBand)
    }

    /// The CPUs collected from.
    pub fn cpus(&self) -> Vec<u32> {
        self.cpus.iter().map(|c| c.cpu).collect()
    }

    /// Starts recording on every CPU.
    pub fn enable(&mut self) -> Result<(), SysError> {
        if let Some((kernel, _)) = &mut self.in_kernel {
            kernel.start().map_err(in_kernel_failed)?;
        }
        self.each_counter(PerfCounter::enable, "PERF_EVENT_IOC_ENABLE")
    }

    /// Starts only the named sources on every CPU, the others left as they are: each a
    /// tracepoint as passed to [`Collector::open`] (`sched/sched_switch`) or
    /// [`CPU_CLOCK_EVENT`]. A recorder measures what one event of a kind costs the thread
    /// that hits it by enabling that kind alone around a known load. Names not opened
    /// are ignored; returns how many of `names` were found.
    pub fn enable_only(&mut self, names: &[&str]) -> Result<usize, SysError> {
        let mut found = 0;
        if let Some((kernel, served)) = &mut self.in_kernel {
            found += kernel
                .enable(&served.kinds_named(names))
                .map_err(in_kernel_failed)?;
        }
        let wanted: Vec<usize> = (0..self.sources.len())
            .filter(|&i| names.contains(&self.source_name(&self.sources[i]).as_str()))
            .collect();
        for cpu in &self.cpus {
            for &i in &wanted {
                cpu.counters[i]
                    .enable()
                    .map_err(|e| open_failed("PERF_EVENT_IOC_ENABLE", cpu.cpu, e))?;
            }
        }
        Ok(found + wanted.len())
    }

    /// Sets the period of each stack-sample twin from its rate, so that each keeps near
    /// [`CollectorOptions::stack_samples_per_s`] stacks a second on its CPU, raising it only
    /// on evidence: a window of enough hits to tell a rate ([`pacing::period_for`]). Call it
    /// from the draining thread as often as it likes: it acts at most every
    /// [`pacing::interval_ns`] (often in the first second, when every hit still has its
    /// stack, seldom after), and changes a period only when the rate moved enough
    /// ([`pacing::worth_changing`]), since a new period samples the very next hit. The
    /// first call only starts the count: call it as tracing starts. A twin that refuses
    /// its period keeps the one it had.
    ///
    /// Returns how long until the next reading is due, for the caller's wait; `None` when
    /// stacks are not sampled (then it does nothing).
    pub fn pace_stack_samples(&mut self) -> Option<std::time::Duration> {
        let pacing = self.pacing.as_mut()?;
        let now = monotonic_now_ns();
        let first = pacing.last_ns == 0;
        if first {
            pacing.started_ns = now;
        } else {
            let due = pacing::next_reading_ns(pacing.started_ns, pacing.last_ns);
            if now < due {
                return Some(std::time::Duration::from_nanos(due - now));
            }
        }
        pacing.last_ns = now;
        for twin in &mut pacing.twins {
            let counter = &self.cpus[twin.cpu].counters[twin.counter];
            let Ok(count) = counter.read_count() else {
                continue;
            };
            // Timed when its count came (a read interrupts the twin's CPU): the window's
            // length is that between its own two reads, not the reading's first.
            let read_ns = monotonic_now_ns();
            let wanted = twin
                .pace
                .read(read_ns, count, pacing.max_per_s, read_ns / 1000);
            if let Some(wanted) = wanted {
                if counter.set_period(wanted).is_ok() {
                    twin.pace.took(wanted);
                    pacing.max_period = pacing.max_period.max(wanted);
                }
            }
        }
        let due = pacing::next_reading_ns(pacing.started_ns, now);
        Some(std::time::Duration::from_nanos(due - now))
    }

    /// Sets every stack-sample twin to one hit in `period`, until the next pacing: a
    /// recorder measures the cost of an event with and without its stack this way.
    /// Returns whether stacks are sampled at all.
    pub fn set_stack_sample_period(&mut self, period: u64) -> Result<bool, SysError> {
        let mut sampled = false;
        if let Some((kernel, _)) = &mut self.in_kernel {
            // The programs pace by time: every event, or none.
            let interval = if period <= 1 { 0 } else { in_kernel::NO_STACKS };
            sampled = kernel
                .set_stack_interval(interval)
                .map_err(in_kernel_failed)?;
        }
        let Some(pacing) = &mut self.pacing else {
            return Ok(sampled);
        };
        for twin in &mut pacing.twins {
            let ring = &self.cpus[twin.cpu];
            ring.counters[twin.counter]
                .set_period(period)
                .map_err(|e| open_failed("PERF_EVENT_IOC_PERIOD", ring.cpu, e))?;
            twin.pace.took(period);
        }
        Ok(true)
    }

    /// The largest stack-sample period set so far (1: every hit had its stack); `None`
    /// when stacks are not sampled.
    pub fn max_stack_sample_period(&self) -> Option<u64> {
        let in_kernel = self
            .in_kernel
            .as_ref()
            .and_then(|(k, _)| k.max_stack_period());
        match (self.pacing.as_ref().map(|p| p.max_period), in_kernel) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Stops recording; what is in the rings can still be drained.
    pub fn disable(&mut self) -> Result<(), SysError> {
        if let Some((kernel, _)) = &mut self.in_kernel {
            kernel
                .disable(monotonic_now_ns())
                .map_err(in_kernel_failed)?;
        }
        self.each_counter(PerfCounter::disable, "PERF_EVENT_IOC_DISABLE")
    }

    /// A switch that starts and stops every source from another thread while this
    /// collector is drained elsewhere: a monitor that traces in windows turns it on and
    /// off without holding the collector. Drop the switch before the collector, so that
    /// its descriptors are not the events' last (closing those is the slow teardown).
    pub fn switch(&self) -> Result<TraceSwitch, SysError> {
        let mut counters = Vec::new();
        for cpu in &self.cpus {
            for counter in &cpu.counters {
                let dup = counter
                    .try_clone()
                    .map_err(|e| open_failed("dup of a perf event", cpu.cpu, e))?;
                counters.push((cpu.cpu, dup));
            }
        }
        let in_kernel = match &self.in_kernel {
            Some((kernel, _)) => Some(kernel.control_switch().map_err(in_kernel_failed)?),
            None => None,
        };
        Ok(TraceSwitch {
            counters,
            in_kernel,
        })
    }

    fn each_counter(
        &self,
        op: fn(&PerfCounter) -> std::io::Result<()>,
        what: &str,
    ) -> Result<(), SysError> {
        for cpu in &self.cpus {
            for counter in &cpu.counters {
                op(counter).map_err(|e| open_failed(what, cpu.cpu, e))?;
            }
        }
        Ok(())
    }

    /// Hands every tracepoint record collected since the last drain to `f`, CPU by CPU,
    /// and frees the ring space; CPU samples and mapping records are dropped (use
    /// [`Collector::drain_all`] for them). Returns the number of records passed.
    ///
    /// Within one CPU records come in the order they were written, which is time order
    /// except that an event hit by an interrupt between taking its timestamp and writing
    /// its record comes after the interrupt's events (microseconds apart). Across CPUs
    /// there is no order: merging CPUs by `time_ns` is the caller's job (a k-way merge
    /// that tolerates that small disorder, e.g. by buffering a few milliseconds).
    pub fn drain(&mut self, mut f: impl FnMut(&TraceRecord<'_>)) -> usize {
        let mut passed = 0;
        self.drain_all(|collected| {
            if let Collected::Trace(record) = collected {
                f(&record);
                passed += 1;
            }
        });
        passed
    }

    /// Hands everything collected since the last drain to `f` — tracepoint records, CPU
    /// samples, new mappings, exec/comm changes — CPU by CPU in ring order (see
    /// [`Collector::drain`] about order), and frees the ring space. Returns how many.
    ///
    /// A mapping record comes on the CPU where the mmap happened, which may be after a
    /// sample of another CPU that already uses the mapping: apply mappings before
    /// unwinding the samples of the same drain, or merge by time first.
    pub fn drain_all(&mut self, mut f: impl FnMut(Collected<'_>)) -> usize {
        let mut passed = 0;
        let Collector {
            cpus,
            ids,
            sources,
            events,
            in_kernel,
            ..
        } = self;
        // Copied before the perf rings, passed after them (see `copy_out`).
        let in_kernel = in_kernel.as_mut().map(|(kernel, served)| {
            let mut copy = Vec::new();
            kernel.copy_out(&mut copy);
            (copy, &*served)
        });
        for cpu in cpus.iter_mut() {
            let CpuRing { ring, lost, .. } = cpu;
            ring.read(|bytes| {
                if let Some(collected) = decode_record(bytes, ids, sources, events, lost) {
                    f(collected);
                    passed += 1;
                }
            });
        }
        if let Some((copy, served)) = in_kernel {
            let mut unread = 0;
            passed += served.decode(&copy, events, &mut unread, &mut f);
        }
        passed
    }

    /// Copies what every CPU's ring holds into `out` (one chunk per CPU with data) and
    /// frees the rings at once, to be decoded elsewhere by a [`RecordDecoder`]: a drain
    /// that copies in one thread and decodes in another frees ring space at memory speed,
    /// however long decoding (stack unwinding) takes. Returns the bytes copied, and how
    /// full the fullest ring was.
    ///
    /// The BPF programs' ring is copied first and its chunk comes last. Its stacks are
    /// unwound with the mappings the perf rings' MMAP2 records bring, and the perf rings,
    /// copied after it, hold every mapping made before its newest stack: copied in the
    /// other order, a library mapped while the perf rings were being copied came in the
    /// next copy, after the stacks in it that it explains (a program's first stacks, taken
    /// while its loader mapped libc, then unwound to nothing).
    pub fn copy_out(&mut self, out: &mut Vec<RawChunk>) -> CopiedOut {
        let mut copied = CopiedOut::default();
        let in_kernel = self.in_kernel.as_mut().map(|(kernel, _)| {
            let mut bytes = Vec::new();
            copied.add(kernel.copy_out(&mut bytes));
            bytes
        });
        for cpu in &mut self.cpus {
            let mut bytes = Vec::new();
            let n = cpu.ring.copy_out(&mut bytes);
            copied.add(CopiedOut::of_ring(n, cpu.ring.data_size()));
            if n > 0 {
                out.push(RawChunk {
                    cpu: cpu.cpu,
                    bytes,
                });
            }
        }
        if let Some(bytes) = in_kernel.filter(|b| !b.is_empty()) {
            out.push(RawChunk {
                cpu: served::IN_KERNEL_CHUNK,
                bytes,
            });
        }
        copied
    }

    /// What decodes the chunks of [`Collector::copy_out`], for another thread.
    pub fn decoder(&self) -> RecordDecoder {
        RecordDecoder {
            ids: self.ids.clone(),
            sources: self.sources.clone(),
            events: self.events.clone(),
            served: self
                .in_kernel
                .as_ref()
                .map(|(_, served)| served.clone())
                .unwrap_or_default(),
        }
    }

    /// Blocks until some CPU's ring is half full or `timeout` passes, so that a recorder
    /// drains when there is work instead of spinning. Returns whether a ring is ready. A
    /// BPF ring ends it only by the wake-up its programs force as it goes past half full
    /// (an edge-triggered epoll of the rings, [`InKernel::wake_fd`]), not by the records
    /// that came while the last copy was made.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<bool, SysError> {
        self.wait_or(Some(timeout), None)
    }

    /// As [`Collector::wait`], and also ended by `nudge` (which stays rung: the caller
    /// clears it); `timeout` `None` waits for a ring or the nudge alone, for a consumer
    /// that knows nothing is traced now.
    pub fn wait_or(
        &self,
        timeout: Option<std::time::Duration>,
        nudge: Option<&crate::nudge::Nudge>,
    ) -> Result<bool, SysError> {
        let in_kernel = self.in_kernel.iter().map(|(k, _)| k.wake_fd());
        let mut fds: Vec<libc::pollfd> = self
            .cpus
            .iter()
            .map(|c| c.counters[0].as_fd().as_raw_fd())
            .chain(in_kernel)
            .chain(nudge.map(|n| n.raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let polled = crate::nudge::poll_ms(&mut fds, timeout);
        if let Some((kernel, _)) = &self.in_kernel {
            kernel.take_wakes();
        }
        match polled {
            // The nudge, when there is one, is last: it is not a ring.
            n if n >= 0 => {
                let rings = fds.len() - usize::from(nudge.is_some());
                Ok(fds[..rings].iter().any(|f| f.revents != 0))
            }
            _ => {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    return Ok(false);
                }
                Err(SysError::Unavailable {
                    what: "poll on the perf ring buffers".to_string(),
                    reason: err.to_string(),
                    fix: None,
                })
            }
        }
    }

    /// Records lost per CPU since open, as `(cpu, count)`: dropped by the kernel because
    /// the ring was full, plus any record that could not be decoded. The kernel reports a
    /// loss with the first record it writes after `drain` frees space, so a count is
    /// complete only once that CPU has had an event after the drain that ended the loss.
    pub fn lost(&self) -> Vec<(u32, u64)> {
        let mut lost: Vec<(u32, u64)> = self.cpus.iter().map(|c| (c.cpu, c.lost)).collect();
        if let Some((kernel, _)) = &self.in_kernel {
            for (cpu, n) in kernel.lost() {
                match lost.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, l)) => *l += n,
                    None if n > 0 => lost.push((cpu, n)),
                    None => {}
                }
            }
        }
        lost
    }

    /// The sum of [`Collector::lost`].
    pub fn total_lost(&self) -> u64 {
        self.lost().iter().map(|(_, n)| n).sum()
    }
}

/// An in-kernel collector's map that could not be read or written.
fn in_kernel_failed(why: String) -> SysError {
    SysError::Unavailable {
        what: "the in-kernel (BPF) collection".to_string(),
        reason: why,
        fix: None,
    }
}

/// The parsed format of `event`, or `None` after noting it unavailable when tracefs does
/// not have it.
fn read_format(
    tracefs: &Path,
    event: &str,
    unavailable: &mut Vec<UnavailableEvent>,
) -> Result<Option<EventFormat>, SysError> {
    let mut unknown = |reason: String| {
        unavailable.push(UnavailableEvent {
            event: event.to_string(),
            reason,
            fix: Some(NO_TRACEPOINT.fix.to_string()),
        });
        Ok(None)
    };
    let Some((system, _)) = event.split_once('/').filter(|(s, n)| {
        !s.is_empty() && !n.is_empty() && !n.contains('/') && !event.contains("..")
    }) else {
        return unknown(format!(
            "{event:?} is not a tracepoint name of the form system/name"
        ));
    };
    let path: PathBuf = tracefs.join("events").join(event).join("format");
    let text = match sysfs::read_string_with_fix(&path, TRACEFS_PERMISSION_FIX) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => {
            return unknown(format!(
                "the kernel has no tracepoint {event} ({} does not exist)",
                path.display()
            ))
        }
        Err(e) => return Err(e),
    };
    EventFormat::parse(system, &text)
        .map(Some)
        .map_err(|e| SysError::Parse {
            path,
            expected: "a tracepoint format file",
            found: e.to_string(),
        })
}

const TRACEFS_PERMISSION_FIX: &str =
    "run as root, or remount tracefs readable (mount -o remount,mode=755 /sys/kernel/tracing)";

fn open_failed(what: &str, cpu: u32, err: std::io::Error) -> SysError {
    SysError::Unavailable {
        what: format!("{what} on cpu{cpu}"),
        reason: err.to_string(),
        fix: None,
    }
}

fn map_failed(cpu: u32, pages: usize, err: std::io::Error) -> SysError {
    SysError::Unavailable {
        what: format!("the perf ring buffer of cpu{cpu} ({pages} pages)"),
        reason: err.to_string(),
        fix: Some(
            "use fewer buffer pages, or raise the locked-memory limit (sysctl kernel.perf_event_mlock_kb, ulimit -l)"
                .to_string(),
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests;
