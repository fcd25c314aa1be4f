//! What the in-kernel programs cost where they ran: the kernel's account of each
//! program's run time (BPF run-time statistics, `BPF_ENABLE_STATS`), beside the records of
//! its kind that were read out, so that a calibration can say what one record cost its
//! program. A kind's cost, measured as a difference of two runs' CPU time, read as little
//! as half of that here for a wake-up: the program's own run time is a floor under it.
//!
//! The kernel times every run of a program while the statistics are on (two clock reads
//! around it, about 50 ns a run on this project's VMs, so they are on only while a cost is
//! measured), and its totals are what [`ProgramTimes`] carries.

use super::records::{self, Kind};

/// One kind's program, counted since the programs were loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramTime {
    /// Nanoseconds the kernel timed the kind's program running (all CPUs).
    pub run_ns: u64,
    /// Records of the kind read out: for the runtime kind, the runtime records and the
    /// runtime parts of switch records (each stands for the updates summed into it).
    pub records: u64,
}

/// Per kind (index: position in [`Kind::ALL`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramTimes {
    pub kinds: [ProgramTime; 3],
}

impl ProgramTimes {
    /// `kind`'s counts.
    pub fn of(&self, kind: Kind) -> &ProgramTime {
        &self.kinds[slot(kind)]
    }

    pub(super) fn of_mut(&mut self, kind: Kind) -> &mut ProgramTime {
        &mut self.kinds[slot(kind)]
    }

    /// What happened between `earlier` and this reading.
    pub fn since(&self, earlier: &ProgramTimes) -> ProgramTimes {
        let mut d = ProgramTimes::default();
        for (i, k) in d.kinds.iter_mut().enumerate() {
            let (now, then) = (&self.kinds[i], &earlier.kinds[i]);
            *k = ProgramTime {
                run_ns: now.run_ns.saturating_sub(then.run_ns),
                records: now.records.saturating_sub(then.records),
            };
        }
        d
    }

    /// Counts one record read out (its bytes, as the ring held them); an unreadable one
    /// counts nowhere.
    pub fn count_record(&mut self, bytes: &[u8]) {
        let Some(r) = records::read(bytes) else {
            return;
        };
        self.of_mut(r.kind).records += 1;
        if r.runtime.is_some() {
            self.of_mut(Kind::Runtime).records += 1;
        }
    }
}

fn slot(kind: Kind) -> usize {
    Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_with_cpu_time_counts_as_a_switch_and_a_runtime_record() {
        let mut t = ProgramTimes::default();
        // A switch record whose runtime part holds 5 µs, and a runtime record.
        t.count_record(&records::tests::switch(1, 1, 2, 5_000));
        t.count_record(&records::runtime_record(9, 0, 3, 40));
        t.count_record(&records::tests::switch(1, 1, 2, 0));
        t.count_record(b"torn");
        assert_eq!(
            (t.of(Kind::Switch).records, t.of(Kind::Runtime).records),
            (2, 2)
        );
        assert_eq!(t.of(Kind::Waking).records, 0);
        let later = ProgramTimes {
            kinds: [
                ProgramTime {
                    run_ns: 900,
                    records: 5,
                },
                ProgramTime::default(),
                ProgramTime::default(),
            ],
        };
        let d = later.since(&t);
        assert_eq!(
            (d.of(Kind::Switch).run_ns, d.of(Kind::Switch).records),
            (900, 3)
        );
        assert_eq!(d.of(Kind::Runtime).records, 0, "never below zero");
    }
}
