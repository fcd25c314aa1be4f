//! The event model every scheduler analysis consumes. Live recordings and imported files
//! are converted into these, so the analysis is the same whatever the source.

use serde::{Deserialize, Serialize};

pub use super::name::Name;

/// Thread id; 0 is the idle task ("swapper") of a CPU.
pub type Tid = u32;

/// A multiplicative hasher for thread ids: the thread table is looked up several times per
/// event, and SipHash's DoS resistance buys nothing for kernel-assigned ids.
#[derive(Default, Clone, Copy)]
pub struct TidHasher(u64);

impl std::hash::Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ *b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A multiplicative hasher for keys the analysis looks up per event that are not thread
/// ids: kernel addresses (timers), small enums. Addresses are aligned, so the product's low
/// bits would all be zero; `finish` rotates the well-mixed high bits down, where the hash
/// table takes its bucket index.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl KeyHasher {
    #[inline]
    fn mix(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.mix(n as u64)
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(n as u64)
    }
    fn write_u64(&mut self, n: u64) {
        self.mix(n)
    }
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64)
    }
}

/// A map with [`KeyHasher`].
pub type KeyMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// A map keyed by thread id with [`TidHasher`].
pub type TidMap<V> = std::collections::HashMap<Tid, V, std::hash::BuildHasherDefault<TidHasher>>;

/// The idle task's tid on every CPU.
pub const IDLE_TID: Tid = 0;

/// How a thread left the CPU at a context switch (`prev_state` of sched_switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SwitchedOut {
    /// Still runnable (state R): it was preempted.
    Preempted,
    /// Blocked (sleeping, waiting on I/O, a lock, a futex…): a synchronization switch.
    Blocked,
    /// Exiting (dead or zombie): its last switch, neither sync nor preemption.
    Exited,
}

/// Why an interrupt context is active on a CPU, for attributing wake-ups and idle exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InterruptKind {
    /// An hrtimer or timer-wheel callback: the kernel address of the timer (what its
    /// [`EventKind::TimerArm`] names) and of its callback; 0 when not recorded (recordings
    /// made before timer identities were kept).
    Timer { timer: u64, function: u64 },
    /// A hardware interrupt handler, with its name.
    Irq(Name),
    /// A softirq (network, block, RCU…), with its vector name.
    SoftIrq(Name),
    /// An inter-processor interrupt (reschedule, function call).
    Ipi,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    /// sched_switch: `prev` left the CPU as `how`; `next` runs from now on.
    Switch {
        prev: Tid,
        how: SwitchedOut,
        next: Tid,
    },
    /// sched_wakeup / sched_wakeup_new: `tid` became runnable, queued on `target_cpu`.
    Wakeup {
        tid: Tid,
        target_cpu: u32,
        new_thread: bool,
    },
    /// sched_migrate_task: `tid` moved from `from` to `to`.
    Migrate { tid: Tid, from: u32, to: u32 },
    /// sched_process_fork: thread `child` created by thread `parent`. The tracepoint does
    /// not say whether the child is a new process or a new thread of the parent's process:
    /// the recording's thread table (from each sample's pid/tid header) says that.
    Fork { parent: Tid, child: Tid },
    /// sched_process_exec: `tid` now runs `comm`.
    Exec { tid: Tid, comm: Name },
    /// sched_process_exit.
    Exit { tid: Tid },
    /// power:cpu_idle entry: the CPU asks for idle state `state` (a cpuidle index).
    IdleEnter { state: u32 },
    /// power:cpu_idle exit (state = PWR_EVENT_EXIT).
    IdleExit,
    /// Entry of an interrupt context (timer callback, IRQ handler, softirq, IPI).
    InterruptEnter(InterruptKind),
    /// Exit of the innermost interrupt context.
    InterruptExit,
    /// power:cpu_frequency.
    Frequency { khz: u64 },
    /// sched:sched_stat_runtime: the scheduler charged `tid` `ns` nanoseconds of CPU time
    /// since its previous update (at switch-outs and ticks, in the thread's own context).
    Runtime { tid: Tid, ns: u64 },
    /// timer:hrtimer_start / timer:timer_start: the current thread armed `timer` (a kernel
    /// address, the same as the [`InterruptKind::Timer`] of its expiry) with callback
    /// `function`. The arming stack, when recorded, follows as a [`EventKind::Stack`].
    TimerArm { timer: u64, function: u64 },
    /// A CPU-time sample (the cpu-clock software event): `tid` was running here and is
    /// charged `period_ns` of CPU time; its stack follows as a [`EventKind::Stack`].
    CpuSample { tid: Tid, period_ns: u64 },
    /// The call stack of the event just before this one on the same CPU (a switch-out's
    /// blocking or preempted stack, a waker's stack, a timer's arming stack, a CPU-time
    /// sample's stack): an id in the recording's stack table.
    Stack { id: StackId },
}

/// Index of a call stack in a recording's stack table.
pub type StackId = u32;

/// One event on one CPU at one time (CLOCK_MONOTONIC nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub time_ns: u64,
    pub cpu: u32,
    pub kind: EventKind,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    /// Aligned kernel addresses spread over a table's buckets (its low bits): without the
    /// rotation in `finish`, 64-byte-aligned keys would share 1 bucket in 64.
    #[test]
    fn key_hasher_spreads_aligned_addresses() {
        let build = BuildHasherDefault::<KeyHasher>::default();
        let buckets: std::collections::HashSet<u64> = (0..1024u64)
            .map(|i| build.hash_one(0xffff_c900_0000_0000u64 + i * 64) & 1023)
            .collect();
        assert!(buckets.len() > 600, "{} of 1024 buckets", buckets.len());
    }
}
