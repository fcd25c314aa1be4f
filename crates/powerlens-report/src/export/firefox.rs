//! A Firefox Profiler profile (the "processed profile" JSON format, written with the
//! `fxprof-processed-profile` crate): one track per thread seen in the trace, grouped by
//! process, with markers for its running, runnable (inactive) and blocked (wait) intervals
//! and an instant marker per wake-up naming the waker; power and energy as counter tracks.
//!
//! No CPU samples: the recording has no call stacks yet, so the call tree and flame graph
//! are empty (docs/EXPORT.md). Unlike the other exports the format is one JSON document of
//! tables, so the profile is built in memory: it grows with the number of markers (about
//! three per context switch) and is written at the end.
//!
//! The intervals are those of the raw trace: a thread whose switch-in the kernel lost
//! (docs/REPORT.md, *Lost events*) has no running marker for that run; the report infers
//! such runs, this view does not.

use std::collections::HashMap;
use std::io::{self, Write};

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CounterHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    MarkerFieldFlags, MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp,
    SamplingInterval, StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
    ThreadHandle, Timestamp,
};

use powerlens_core::sched::event::{
    Event, EventKind, InterruptKind, StackId, SwitchedOut, Tid, IDLE_TID,
};

use super::{Counter, Counts, ThreadInfo};

/// A thread-state interval: `Running` (with its CPU), `Runnable` (why) or `Blocked`.
struct StateMarker {
    name: StringHandle,
    category: CategoryHandle,
    cpu: u32,
    detail: StringHandle,
}

impl StaticSchemaMarker for StateMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "PowerlensThreadState";
    const DESCRIPTION: Option<&'static str> = Some(
        "A thread's state from the scheduler trace: running, runnable (inactive) or blocked (wait)",
    );
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.detail}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.detail}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "cpu",
            label: "CPU",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "detail",
            label: "Detail",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.detail
    }
    fn number_field_value(&self, _: u32) -> f64 {
        f64::from(self.cpu)
    }
}

/// A wake-up of the thread, with what woke it.
struct WakeupMarker {
    name: StringHandle,
    category: CategoryHandle,
    cpu: u32,
    waker: StringHandle,
}

impl StaticSchemaMarker for WakeupMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "PowerlensWakeup";
    const DESCRIPTION: Option<&'static str> = Some(
        "sched_waking (or sched_wakeup): the thread became runnable; the waker is the context on the waking CPU",
    );
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.waker}");
    const TABLE_LABEL: Option<&'static str> =
        Some("woken by {marker.data.waker} on cpu {marker.data.cpu}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "cpu",
            label: "Waking CPU",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "waker",
            label: "Waker",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.waker
    }
    fn number_field_value(&self, _: u32) -> f64 {
        f64::from(self.cpu)
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Unknown,
    Running { since: u64, cpu: u32 },
    Runnable { since: u64, preempted: bool },
    Blocked { since: u64 },
    Exited,
}

struct ThreadTrack {
    handle: ThreadHandle,
    state: State,
}

/// What runs on a CPU: its current task and the interrupt contexts open on it.
#[derive(Default, Clone)]
struct CpuContext {
    current: Tid,
    interrupts: Vec<InterruptKind>,
    /// A CPU-time sample whose stack may follow: (tid, time, period).
    sample: Option<(Tid, u64, u64)>,
}

/// Marker counts, for the summary and the tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkerCounts {
    pub running: u64,
    pub runnable: u64,
    pub blocked: u64,
    pub wakeups: u64,
    /// CPU-time samples written, and of them those with a stack.
    pub samples: u64,
    pub samples_with_stacks: u64,
}

/// The frames of a recording's stacks, for the profile's call trees: by stack id, each
/// frame's text (`function (module)`) innermost first, and whether it is the kernel's.
pub type StackFrames = Vec<Vec<(String, bool)>>;

struct Names {
    running: StringHandle,
    runnable: StringHandle,
    blocked: StringHandle,
    wakeup: StringHandle,
    preempted: StringHandle,
    woken: StringHandle,
    empty: StringHandle,
}

struct Categories {
    running: CategoryHandle,
    runnable: CategoryHandle,
    blocked: CategoryHandle,
    wakeup: CategoryHandle,
    /// Kernel frames of sampled stacks.
    kernel: CategoryHandle,
}

/// Builds a Firefox Profiler profile from the event stream.
pub struct FirefoxWriter {
    profile: Profile,
    start_ns: u64,
    info: HashMap<Tid, ThreadInfo>,
    processes: HashMap<u32, ProcessHandle>,
    threads: HashMap<Tid, ThreadTrack>,
    cpus: Vec<CpuContext>,
    names: Names,
    categories: Categories,
    /// Interned waker descriptions (`comm (tid)`, `timer`, …).
    wakers: HashMap<String, StringHandle>,
    counts: Counts,
    markers: MarkerCounts,
    last_ns: u64,
    stacks: StackFrames,
    /// Interned stacks per thread (a profile's stack table is per thread).
    stack_handles: HashMap<(Tid, StackId), Option<StackHandle>>,
    user_frames: CategoryHandle,
    kernel_frames: CategoryHandle,
}

impl FirefoxWriter {
    /// `product`: the profile's title; `start_ns`/`start_unix_s`: the recording's start on
    /// CLOCK_MONOTONIC and as wall-clock time (the profile's zero).
    pub fn new(product: &str, threads: &[ThreadInfo], start_ns: u64, start_unix_s: f64) -> Self {
        let mut profile = Profile::new(
            product,
            ReferenceTimestamp::from_millis_since_unix_epoch(start_unix_s * 1000.0),
            SamplingInterval::from_millis(1),
        );
        profile.set_product(product);
        profile.set_os_name("Linux");
        let categories = Categories {
            running: profile.add_category("Running", CategoryColor::Green),
            runnable: profile.add_category("Runnable", CategoryColor::Yellow),
            blocked: profile.add_category("Blocked", CategoryColor::LightBlue),
            wakeup: profile.add_category("Wake-up", CategoryColor::Orange),
            kernel: profile.add_category("Kernel", CategoryColor::Red),
        };
        let names = Names {
            running: profile.intern_string("Running"),
            runnable: profile.intern_string("Runnable"),
            blocked: profile.intern_string("Blocked"),
            wakeup: profile.intern_string("Wake-up"),
            preempted: profile.intern_string("preempted"),
            woken: profile.intern_string("woken"),
            empty: profile.intern_string(""),
        };
        let (user_frames, kernel_frames) = (categories.running, categories.kernel);
        Self {
            profile,
            start_ns,
            info: threads.iter().map(|t| (t.tid, t.clone())).collect(),
            processes: HashMap::new(),
            threads: HashMap::new(),
            cpus: Vec::new(),
            names,
            categories,
            wakers: HashMap::new(),
            counts: Counts::default(),
            markers: MarkerCounts::default(),
            last_ns: start_ns,
            stacks: Vec::new(),
            stack_handles: HashMap::new(),
            user_frames,
            kernel_frames,
        }
    }

    /// The recording's stacks: CPU-time samples then carry their call stacks, and the
    /// profile has a call tree and a flame graph per thread.
    pub fn set_stacks(&mut self, stacks: StackFrames) {
        self.stacks = stacks;
    }

    /// Writes the CPU-time sample pending on `cpu`, with `stack` when one came.
    fn flush_sample(&mut self, ci: usize, stack: Option<StackId>) {
        let Some((tid, t, period)) = self.cpus[ci].sample.take() else {
            return;
        };
        let handle = self.thread(tid, t).handle;
        let stack_handle = match stack {
            Some(id) => match self.stack_handles.get(&(tid, id)) {
                Some(h) => *h,
                None => {
                    let frames: Vec<FrameInfo> = self
                        .stacks
                        .get(id as usize)
                        .map(|frames| {
                            frames
                                .iter()
                                .rev()
                                .map(|(name, kernel)| FrameInfo {
                                    frame: Frame::Label(self.profile.intern_string(name)),
                                    category_pair: if *kernel {
                                        self.kernel_frames.into()
                                    } else {
                                        self.user_frames.into()
                                    },
                                    flags: FrameFlags::empty(),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let h = self.profile.intern_stack_frames(handle, frames.into_iter());
                    self.stack_handles.insert((tid, id), h);
                    h
                }
            },
            None => None,
        };
        self.markers.samples += 1;
        if stack_handle.is_some() {
            self.markers.samples_with_stacks += 1;
        }
        let ts = self.ts(t);
        self.profile
            .add_sample(handle, ts, stack_handle, CpuDelta::from_nanos(period), 1);
    }

    fn ts(&self, t: u64) -> Timestamp {
        // Events may precede the recorded start by microseconds: negative offsets are fine.
        Timestamp::from_millis_since_reference((t as i128 - self.start_ns as i128) as f64 / 1e6)
    }

    fn process(&mut self, pid: u32, t: u64) -> ProcessHandle {
        if let Some(&p) = self.processes.get(&pid) {
            return p;
        }
        let name = self
            .info
            .get(&pid)
            .map(|i| i.comm.clone())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| format!("process {pid}"));
        let ts = self.ts(t);
        let p = self.profile.add_process(&name, pid, ts);
        self.processes.insert(pid, p);
        p
    }

    /// The thread's track, created on its first event.
    fn thread(&mut self, tid: Tid, t: u64) -> &mut ThreadTrack {
        if !self.threads.contains_key(&tid) {
            let (pid, comm) = match self.info.get(&tid) {
                Some(i) => (i.pid.unwrap_or(tid), i.comm.clone()),
                None => (tid, String::new()),
            };
            let process = self.process(pid, t);
            let ts = self.ts(t);
            let handle = self.profile.add_thread(process, tid, ts, tid == pid);
            let name = if comm.is_empty() {
                format!("thread {tid}")
            } else {
                comm
            };
            self.profile.set_thread_name(handle, &name);
            self.profile
                .set_thread_show_markers_in_timeline(handle, true);
            self.threads.insert(
                tid,
                ThreadTrack {
                    handle,
                    state: State::Unknown,
                },
            );
        }
        self.threads.get_mut(&tid).expect("inserted above")
    }

    /// Ends the thread's open interval at `t` with its marker, and sets its next state.
    fn transition(&mut self, tid: Tid, t: u64, next: State) {
        let track = self.thread(tid, t);
        let (handle, prev) = (track.handle, track.state);
        track.state = next;
        self.close(handle, prev, t);
    }

    fn close(&mut self, handle: ThreadHandle, state: State, t: u64) {
        let (since, marker) = match state {
            State::Running { since, cpu } => {
                self.markers.running += 1;
                (
                    since,
                    StateMarker {
                        name: self.names.running,
                        category: self.categories.running,
                        cpu,
                        detail: self.names.empty,
                    },
                )
            }
            State::Runnable { since, preempted } => {
                self.markers.runnable += 1;
                (
                    since,
                    StateMarker {
                        name: self.names.runnable,
                        category: self.categories.runnable,
                        cpu: 0,
                        detail: if preempted {
                            self.names.preempted
                        } else {
                            self.names.woken
                        },
                    },
                )
            }
            State::Blocked { since } => {
                self.markers.blocked += 1;
                (
                    since,
                    StateMarker {
                        name: self.names.blocked,
                        category: self.categories.blocked,
                        cpu: 0,
                        detail: self.names.empty,
                    },
                )
            }
            State::Unknown | State::Exited => return,
        };
        let timing = MarkerTiming::Interval(self.ts(since), self.ts(t.max(since)));
        self.profile.add_marker(handle, timing, marker);
    }

    fn waker(&mut self, cpu: usize) -> StringHandle {
        let ctx = &self.cpus[cpu];
        let text = match ctx.interrupts.last() {
            Some(InterruptKind::Timer { .. }) => "timer".to_string(),
            Some(InterruptKind::Irq(n)) => format!("irq {n}"),
            Some(InterruptKind::SoftIrq(n)) => format!("softirq {n}"),
            Some(InterruptKind::Ipi) => "ipi".to_string(),
            None if ctx.current == IDLE_TID => "idle (ipi or interrupt)".to_string(),
            None => {
                let tid = ctx.current;
                match self.info.get(&tid).map(|i| i.comm.as_str()) {
                    Some(c) if !c.is_empty() => format!("{c} ({tid})"),
                    _ => format!("thread {tid}"),
                }
            }
        };
        if let Some(&h) = self.wakers.get(&text) {
            return h;
        }
        let h = self.profile.intern_string(&text);
        self.wakers.insert(text, h);
        h
    }

    /// Power and energy counters (from the meter's samples), on a process of their own.
    pub fn counters(&mut self, counters: &[Counter]) {
        if counters.is_empty() {
            return;
        }
        let ts = self.ts(self.start_ns);
        let process = self.profile.add_process("energy meter", 0, ts);
        let thread = self.profile.add_thread(process, 0, ts, true);
        self.profile.set_thread_name(thread, "energy meter");
        for c in counters {
            let handle: CounterHandle = self.profile.add_counter(
                process,
                &format!("{} ({})", c.name, c.unit),
                "power",
                &format!(
                    "{} in {} from the recording's meter samples",
                    c.name, c.unit
                ),
            );
            // The profiler accumulates counter deltas: each sample is the change.
            let mut level = 0.0;
            for &(t, v) in &c.points {
                let ts = self.ts(t);
                self.profile.add_counter_sample(handle, ts, v - level, 1);
                level = v;
            }
        }
    }

    pub fn event(&mut self, e: &Event) {
        self.counts.count(e.cpu, &e.kind);
        self.last_ns = self.last_ns.max(e.time_ns);
        let ci = e.cpu as usize;
        if self.cpus.len() <= ci {
            self.cpus.resize(ci + 1, CpuContext::default());
        }
        let t = e.time_ns;
        // A sample's stack comes right after it on the same CPU, or not at all.
        match e.kind {
            EventKind::Stack { id } => return self.flush_sample(ci, Some(id)),
            _ => self.flush_sample(ci, None),
        }
        match &e.kind {
            EventKind::CpuSample { tid, period_ns } => {
                self.cpus[ci].sample = Some((*tid, t, *period_ns));
            }
            EventKind::Switch { prev, how, next } => {
                self.cpus[ci].current = *next;
                // A context switch ends every interrupt context of the CPU.
                self.cpus[ci].interrupts.clear();
                if *prev != IDLE_TID {
                    let next_state = match how {
                        SwitchedOut::Preempted => State::Runnable {
                            since: t,
                            preempted: true,
                        },
                        SwitchedOut::Blocked => State::Blocked { since: t },
                        SwitchedOut::Exited => State::Exited,
                    };
                    let track = self.thread(*prev, t);
                    let (handle, state) = (track.handle, track.state);
                    track.state = next_state;
                    // Only a running interval is known to end here; anything else means
                    // the switch-in was lost and the interval is unknown.
                    if matches!(state, State::Running { .. }) {
                        self.close(handle, state, t);
                    }
                }
                if *next != IDLE_TID {
                    self.transition(
                        *next,
                        t,
                        State::Running {
                            since: t,
                            cpu: e.cpu,
                        },
                    );
                }
            }
            EventKind::Wakeup { tid, .. } if *tid != IDLE_TID => {
                let waker = self.waker(ci);
                let track = self.thread(*tid, t);
                let handle = track.handle;
                match track.state {
                    State::Blocked { .. } | State::Unknown | State::Exited => {
                        self.transition(
                            *tid,
                            t,
                            State::Runnable {
                                since: t,
                                preempted: false,
                            },
                        );
                    }
                    State::Running { .. } | State::Runnable { .. } => {}
                }
                self.markers.wakeups += 1;
                let marker = WakeupMarker {
                    name: self.names.wakeup,
                    category: self.categories.wakeup,
                    cpu: e.cpu,
                    waker,
                };
                let ts = self.ts(t);
                self.profile
                    .add_marker(handle, MarkerTiming::Instant(ts), marker);
            }
            EventKind::InterruptEnter(k) => {
                let stack = &mut self.cpus[ci].interrupts;
                // Bounded: a lost exit must not make the stack grow with the recording.
                if stack.len() < 8 {
                    stack.push(*k);
                }
            }
            EventKind::InterruptExit => {
                self.cpus[ci].interrupts.pop();
            }
            EventKind::Exec { tid, comm } => {
                let track = self.thread(*tid, t);
                let handle = track.handle;
                self.profile.set_thread_name(handle, comm);
                if let Some(i) = self.info.get_mut(tid) {
                    i.comm = comm.to_string();
                }
            }
            EventKind::Exit { tid } => {
                let ts = self.ts(t);
                let handle = self.thread(*tid, t).handle;
                self.profile.set_thread_end_time(handle, ts);
            }
            _ => {}
        }
    }

    /// Marker counts so far.
    pub fn marker_counts(&self) -> MarkerCounts {
        self.markers
    }

    /// Closes every open interval at `end_ns` (the recording's stop; the last event's time
    /// when earlier) and writes the profile as JSON.
    pub fn finish<W: Write>(mut self, end_ns: u64, out: W) -> io::Result<(Counts, MarkerCounts)> {
        for ci in 0..self.cpus.len() {
            self.flush_sample(ci, None);
        }
        let end = end_ns.max(self.last_ns);
        let mut open: Vec<(Tid, ThreadHandle, State)> = self
            .threads
            .iter()
            .map(|(&tid, tr)| (tid, tr.handle, tr.state))
            .collect();
        open.sort_by_key(|(tid, _, _)| *tid);
        for (_, handle, state) in open {
            self.close(handle, state, end);
        }
        serde_json::to_writer(out, &self.profile).map_err(io::Error::other)?;
        Ok((self.counts, self.markers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
        Event { time_ns, cpu, kind }
    }

    /// Thread `name` of the profile, and the string table its indexes point into (the
    /// shared one, or the thread's own in older profile versions).
    fn thread_and_strings<'a>(profile: &'a Value, name: &str) -> (&'a Value, &'a Vec<Value>) {
        let thread = profile["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no thread {name}"));
        let strings = profile["shared"]["stringArray"]
            .as_array()
            .or_else(|| thread["stringArray"].as_array())
            .unwrap();
        (thread, strings)
    }

    /// Each sample of thread `name`: its CPU delta (µs) and its stack's frame names,
    /// outermost first, read back through the profile's stack, frame and func tables.
    fn samples(profile: &Value, name: &str) -> Vec<(u64, Vec<String>)> {
        let (thread, strings) = thread_and_strings(profile, name);
        let (samples, stacks) = (&thread["samples"], &thread["stackTable"]);
        let (frames, funcs) = (&thread["frameTable"], &thread["funcTable"]);
        (0..samples["length"].as_u64().unwrap() as usize)
            .map(|i| {
                let mut names = Vec::new();
                let mut stack = samples["stack"][i].as_u64();
                while let Some(s) = stack {
                    let frame = stacks["frame"][s as usize].as_u64().unwrap() as usize;
                    let func = frames["func"][frame].as_u64().unwrap() as usize;
                    let n = funcs["name"][func].as_u64().unwrap() as usize;
                    names.push(strings[n].as_str().unwrap().to_string());
                    stack = stacks["prefix"][s as usize].as_u64();
                }
                names.reverse();
                let delta = samples["threadCPUDelta"][i].as_u64().unwrap_or(0);
                (delta, names)
            })
            .collect()
    }

    /// CPU-time samples carry the stack that follows them (and none when none does), with
    /// their period as CPU delta; a stack's frames go outermost first.
    #[test]
    fn cpu_samples_carry_their_stacks() {
        let threads = [ThreadInfo {
            tid: 7,
            pid: Some(7),
            ppid: None,
            comm: "app".into(),
        }];
        let mut w = FirefoxWriter::new("t", &threads, 0, 0.0);
        w.set_stacks(vec![
            vec![
                ("spin (app)".to_string(), false),
                ("main (app)".to_string(), false),
            ],
            vec![
                ("__schedule ([kernel])".to_string(), true),
                ("main (app)".to_string(), false),
            ],
        ]);
        let sample = |t| {
            ev(
                t,
                0,
                EventKind::CpuSample {
                    tid: 7,
                    period_ns: 1_001_000,
                },
            )
        };
        for e in [
            sample(1_000_000),
            ev(1_000_000, 0, EventKind::Stack { id: 0 }),
            sample(2_000_000),
            ev(2_000_000, 0, EventKind::Stack { id: 1 }),
            sample(3_000_000),
            ev(3_000_000, 0, EventKind::Stack { id: 0 }),
            // No stack follows this one.
            sample(4_000_000),
        ] {
            w.event(&e);
        }
        let mut out = Vec::new();
        let (_, counts) = w.finish(5_000_000, &mut out).unwrap();
        assert_eq!((counts.samples, counts.samples_with_stacks), (4, 3));
        let profile: Value = serde_json::from_slice(&out).unwrap();
        let got = samples(&profile, "app");
        let spin = vec!["main (app)".to_string(), "spin (app)".to_string()];
        let kernel = vec![
            "main (app)".to_string(),
            "__schedule ([kernel])".to_string(),
        ];
        assert_eq!(
            got,
            vec![
                (1001, spin.clone()),
                (1001, kernel),
                (1001, spin),
                (1001, vec![])
            ]
        );
    }

    /// The markers of thread `name` as (marker name, start ms, end ms or null).
    fn markers(profile: &Value, name: &str) -> Vec<(String, f64, Option<f64>)> {
        let (thread, strings) = thread_and_strings(profile, name);
        let m = &thread["markers"];
        (0..m["length"].as_u64().unwrap() as usize)
            .map(|i| {
                let n = m["name"][i].as_u64().unwrap() as usize;
                (
                    strings[n].as_str().unwrap().to_string(),
                    m["startTime"][i].as_f64().unwrap_or(f64::NAN),
                    m["endTime"][i].as_f64(),
                )
            })
            .collect()
    }

    #[test]
    fn intervals_follow_the_thread_through_its_states() {
        use EventKind::*;
        let threads = vec![ThreadInfo {
            tid: 7,
            pid: Some(7),
            ppid: None,
            comm: "seven".into(),
        }];
        let mut w = FirefoxWriter::new("test", &threads, 1_000_000, 0.0);
        // Woken by a timer at 2 ms, runs 3..5 ms on cpu1, blocks until its wake-up at
        // 9 ms (by thread 8 on cpu0), runs 10 ms.. preempted at 12 ms, open to the end.
        for e in [
            ev(
                2_000_000,
                1,
                InterruptEnter(InterruptKind::Timer {
                    timer: 0,
                    function: 0,
                }),
            ),
            ev(
                2_000_000,
                1,
                Wakeup {
                    tid: 7,
                    target_cpu: 1,
                    new_thread: false,
                },
            ),
            ev(2_100_000, 1, InterruptExit),
            ev(
                3_000_000,
                1,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 7,
                },
            ),
            ev(
                5_000_000,
                1,
                Switch {
                    prev: 7,
                    how: SwitchedOut::Blocked,
                    next: 0,
                },
            ),
            ev(
                8_000_000,
                0,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 8,
                },
            ),
            ev(
                9_000_000,
                0,
                Wakeup {
                    tid: 7,
                    target_cpu: 1,
                    new_thread: false,
                },
            ),
            ev(
                10_000_000,
                1,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 7,
                },
            ),
            ev(
                12_000_000,
                1,
                Switch {
                    prev: 7,
                    how: SwitchedOut::Preempted,
                    next: 0,
                },
            ),
        ] {
            w.event(&e);
        }
        let mut out = Vec::new();
        let (counts, m) = w.finish(13_000_000, &mut out).unwrap();
        assert_eq!(counts.sum().switches, 5);
        assert_eq!(
            m,
            MarkerCounts {
                running: 3, // thread 7 twice, thread 8 once (to the end)
                runnable: 3,
                blocked: 1,
                wakeups: 2,
                samples: 0,
                samples_with_stacks: 0,
            }
        );
        let profile: Value = serde_json::from_slice(&out).unwrap();
        let mut seven = markers(&profile, "seven");
        seven.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let expect = [
            ("Runnable", 1.0, Some(2.0)),
            ("Wake-up", 1.0, None),
            ("Running", 2.0, Some(4.0)),
            ("Blocked", 4.0, Some(8.0)),
            ("Runnable", 8.0, Some(9.0)),
            ("Wake-up", 8.0, None),
            ("Running", 9.0, Some(11.0)),
            ("Runnable", 11.0, Some(12.0)),
        ];
        assert_eq!(seven.len(), expect.len(), "{seven:?}");
        for (got, want) in seven.iter().zip(expect) {
            assert_eq!(got.0, want.0, "{seven:?}");
            assert!((got.1 - want.1).abs() < 1e-9, "{seven:?}");
            match (got.2, want.2) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-9, "{seven:?}"),
                (_, None) => {}
                other => panic!("{other:?} in {seven:?}"),
            }
        }
        // The wakers: the timer interrupt, then thread 8.
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"timer\""), "{text}");
        assert!(text.contains("\"thread 8\""), "{text}");
    }
}
