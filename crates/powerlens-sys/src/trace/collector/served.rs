//! The tracepoints the collector has served in the kernel ([`crate::trace::in_kernel`])
//! instead of through its perf rings: which ones, where their records go in the
//! collector's event list, and how a copy of the BPF rings decodes into the same
//! [`TraceRecord`]s a perf ring's records do.

use crate::trace::format::EventFormat;
use crate::trace::in_kernel::records::{self, Kind};
use crate::trace::in_kernel::MAX_STACK_BYTES;

use super::{Callchain, Collected, TraceRecord, UserRegs};

/// The `cpu` of the [`super::RawChunk`] that holds a copy of the BPF rings (whose
/// records carry their own CPU).
pub(super) const IN_KERNEL_CHUNK: u32 = u32::MAX;

/// Each served kind and its index in the collector's events.
#[derive(Debug, Clone, Default)]
pub(super) struct Served {
    events: Vec<(Kind, usize)>,
}

impl Served {
    pub(super) fn add(&mut self, kind: Kind, event: usize) {
        self.events.push((kind, event));
    }

    fn event_of(&self, kind: Kind) -> Option<usize> {
        self.events
            .iter()
            .find(|&&(k, _)| k == kind)
            .map(|&(_, e)| e)
    }

    /// The served kinds among `names` (tracepoints as the collector names them).
    pub(super) fn kinds_named(&self, names: &[&str]) -> Vec<Kind> {
        self.events
            .iter()
            .map(|&(k, _)| k)
            .filter(|k| names.contains(&k.tracepoint()))
            .collect()
    }

    /// Passes each record of a copy of the BPF rings to `f`, as the tracepoint records it
    /// stands for (a switch's CPU time first, as a runtime record); a record that cannot
    /// be read is counted in `lost`. Returns how many records were passed.
    pub(super) fn decode<'a>(
        &self,
        bytes: &'a [u8],
        events: &'a [EventFormat],
        lost: &mut u64,
        mut f: impl FnMut(Collected<'a>),
    ) -> usize {
        let mut passed = 0;
        let mut unread = 0;
        records::framed(bytes, lost, |bytes| {
            let Some(r) = records::read(bytes) else {
                unread += 1;
                return;
            };
            let mut pass = |kind: Kind, raw: &'a [u8], stack: Option<(UserRegs, &'a [u8])>| {
                if let Some(event) = self.event_of(kind) {
                    f(Collected::Trace(TraceRecord {
                        cpu: r.cpu,
                        time_ns: r.time_ns,
                        pid: r.pid,
                        tid: r.tid,
                        event,
                        format: &events[event],
                        raw,
                        callchain: Callchain::default(),
                        user_regs: stack.map(|(regs, _)| regs),
                        user_stack: stack.map_or(&[], |(_, bytes)| bytes),
                    }));
                    passed += 1;
                }
            };
            if let Some(runtime) = r.runtime {
                pass(Kind::Runtime, runtime, None);
            }
            pass(r.kind, r.payload, r.stack);
        });
        *lost += unread;
        passed
    }
}

/// Which of `events` (as asked of the collector) to serve in the kernel: the scheduler's
/// tracepoints the BPF programs stand in for. Their stacks, when asked for, are taken
/// there too if they are copies of the user stack alone that fit the programs' buffer;
/// stacks with kernel frames or the frame-pointer walk come with perf records, and then
/// those tracepoints stay on perf.
pub(super) fn servable(events: &[&str], options: &super::CollectorOptions) -> Vec<Kind> {
    let stacks_here = !options.callchains
        && !options.stack_events_kernel_frames
        && !options.stack_events_user_chain
        && options.user_stack_bytes <= MAX_STACK_BYTES;
    events
        .iter()
        .filter(|e| stacks_here || !options.stack_events.iter().any(|s| s == *e))
        .filter_map(|e| Kind::for_tracepoint(e))
        .collect()
}

/// The stacks the BPF programs take for `kinds`, as [`InKernel::open_with_stacks`] wants
/// them: `None` when none of them is a stack event.
pub(super) fn stacks_for(kinds: &[Kind], options: &super::CollectorOptions) -> Option<(u64, u32)> {
    let stacked = kinds
        .iter()
        .any(|k| options.stack_events.iter().any(|s| s == k.tracepoint()));
    stacked.then(|| {
        let interval = options
            .stack_samples_per_s
            .map_or(0, |per_s| 1_000_000_000 / u64::from(per_s.max(1)));
        (interval, options.user_stack_bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_taken_in_the_kernel_only_as_copies_of_the_user_stack() {
        use super::super::CollectorOptions;
        let events = [
            "sched/sched_switch",
            "sched/sched_waking",
            "sched/sched_stat_runtime",
            "power/cpu_idle",
        ];
        let all = vec![Kind::Switch, Kind::Waking, Kind::Runtime];
        let mut options = CollectorOptions::default();
        assert_eq!(servable(&events, &options), all);
        assert_eq!(stacks_for(&all, &options), None, "no stack events");
        options.stack_events = vec!["sched/sched_switch".into(), "sched/sched_waking".into()];
        options.stack_events_kernel_frames = false;
        options.stack_events_user_chain = false;
        options.stack_samples_per_s = Some(10_000);
        assert_eq!(servable(&events, &options), all);
        assert_eq!(stacks_for(&all, &options), Some((100_000, 512)));
        options.stack_samples_per_s = None;
        assert_eq!(stacks_for(&all, &options), Some((0, 512)), "every event");
        // Kernel frames, the frame-pointer walk or a copy too large for the programs:
        // those tracepoints stay on perf.
        for change in [
            |o: &mut CollectorOptions| o.stack_events_kernel_frames = true,
            |o: &mut CollectorOptions| o.stack_events_user_chain = true,
            |o: &mut CollectorOptions| o.user_stack_bytes = 8192,
        ] {
            let mut o = options.clone();
            change(&mut o);
            assert_eq!(servable(&events, &o), vec![Kind::Runtime]);
            assert_eq!(stacks_for(&[Kind::Runtime], &o), None);
        }
    }

    #[test]
    fn a_switch_decodes_as_its_runtime_then_the_switch() {
        let formats = vec![Kind::Switch.format(), Kind::Runtime.format()];
        let mut served = Served::default();
        served.add(Kind::Switch, 0);
        served.add(Kind::Runtime, 1);
        let mut record = Vec::new();
        record.extend_from_slice(&5u64.to_le_bytes());
        for word in [1u32, 0, 7, 8] {
            record.extend_from_slice(&word.to_le_bytes());
        }
        record.extend_from_slice(&[0; 48]);
        record.extend_from_slice(&8u32.to_le_bytes());
        record.extend_from_slice(&0u32.to_le_bytes());
        record.extend_from_slice(&300u64.to_le_bytes());
        let mut copy = Vec::new();
        records::push_framed(&mut copy, &record);
        records::push_framed(&mut copy, b"torn");
        let mut seen = Vec::new();
        let mut lost = 0;
        let passed = served.decode(&copy, &formats, &mut lost, |c| {
            if let Collected::Trace(r) = c {
                seen.push((r.event, r.time_ns, r.tid, r.raw.len()));
            }
        });
        assert_eq!(passed, 2);
        assert_eq!(seen, vec![(1, 5, 8, 16), (0, 5, 8, 48)]);
        assert_eq!(lost, 1, "the record too short to read");
        // Served without its runtime, a switch decodes alone.
        let mut only_switch = Served::default();
        only_switch.add(Kind::Switch, 0);
        let n = only_switch.decode(&copy, &formats, &mut lost, |_| {});
        assert_eq!(n, 1);
    }
}
