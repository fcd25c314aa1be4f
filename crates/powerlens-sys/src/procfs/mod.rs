//! Readers of procfs: system-wide CPU time (`/proc/stat`) here, per-thread figures in
//! [`tasks`], the CPU's identity in [`cpuinfo`].

pub mod cpuinfo;
pub mod maps;
pub mod process;
pub mod tasks;

use crate::{sysfs, Roots, SysError};

/// Busy and idle time of all CPUs together, from the `cpu` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    /// Seconds spent in user, nice, system, irq, softirq and steal, summed over CPUs.
    pub busy_s: f64,
    /// Seconds spent in idle and iowait, summed over CPUs.
    pub idle_s: f64,
    /// Number of `cpuN` lines, i.e. online CPUs.
    pub cpus: u32,
}

impl CpuTimes {
    /// Busy CPU-seconds between two readings (never negative).
    pub fn busy_since(&self, earlier: &CpuTimes) -> f64 {
        (self.busy_s - earlier.busy_s).max(0.0)
    }
}

/// Kernel clock ticks per second (USER_HZ), the unit of `/proc/stat`.
pub(crate) fn user_hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Reads `/proc/stat` below the procfs root.
pub fn read_cpu_times(roots: &Roots) -> Result<CpuTimes, SysError> {
    let path = roots.proc("stat");
    let text = sysfs::read_string(&path)?;
    parse_cpu_times(&text, user_hz()).ok_or_else(|| SysError::Parse {
        path,
        expected: "a `cpu` line with at least 8 counters",
        found: text.lines().next().unwrap_or_default().to_string(),
    })
}

/// Parses the text of `/proc/stat` with `hz` ticks per second.
pub fn parse_cpu_times(text: &str, hz: f64) -> Option<CpuTimes> {
    let mut total = None;
    let mut cpus = 0;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("cpu") => {
                let v: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
                if v.len() < 8 {
                    return None;
                }
                // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time
                // is already included in user/nice, so it is not added again. Summed wide:
                // counters near 2^64 in a damaged file overflowed u64 (found by fuzzing).
                let sum = |fields: &[usize]| fields.iter().map(|&i| v[i] as u128).sum::<u128>();
                let (busy, idle) = (sum(&[0, 1, 2, 5, 6, 7]), sum(&[3, 4]));
                total = Some((busy as f64 / hz, idle as f64 / hz));
            }
            Some(name) if name.starts_with("cpu") => cpus += 1,
            _ => {}
        }
    }
    let (busy_s, idle_s) = total?;
    Some(CpuTimes {
        busy_s,
        idle_s,
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat() {
        let text = "cpu  100 5 50 1000 10 3 2 1 7 0\ncpu0 50 2 25 500 5 1 1 0 0 0\ncpu1 50 3 25 500 5 2 1 1 0 0\nintr 1 2\n";
        let t = parse_cpu_times(text, 100.0).unwrap();
        assert_eq!(t.cpus, 2);
        assert!((t.busy_s - 1.61).abs() < 1e-9, "{}", t.busy_s);
        assert!((t.idle_s - 10.10).abs() < 1e-9);
        assert!(parse_cpu_times("intr 1\n", 100.0).is_none());
        assert!(parse_cpu_times("cpu 1 2 3\n", 100.0).is_none());
    }

    /// Regression (fuzz/regressions/procfs/stat-counters-near-2-64): the sum of counters
    /// overflowed.
    #[test]
    fn counters_near_the_top_of_u64_add_up() {
        let max = u64::MAX;
        let text = format!("cpu  {max} {max} 0 {max} {max} 0 0 0\n");
        let t = parse_cpu_times(&text, 100.0).unwrap();
        assert_eq!(t.busy_s, 2.0 * max as f64 / 100.0);
        assert_eq!(t.idle_s, 2.0 * max as f64 / 100.0);
    }

    #[test]
    fn live_stat_counts_online_cpus() {
        let t = read_cpu_times(&Roots::default()).unwrap();
        let online = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        assert!(t.cpus >= online, "{} cpu lines, {} online", t.cpus, online);
        assert!(t.busy_s > 0.0 && t.idle_s > 0.0);
    }
}
