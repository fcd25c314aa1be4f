//! The calling thread: the CPU it runs on, its CPU clock, its affinity. Shared by the
//! built-in workloads, `wake`, `dvfs` and the recorder's calibration loads.

use std::io;

/// The CPU the calling thread runs on now (sched_getcpu).
pub fn current_cpu() -> io::Result<u32> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(cpu as u32)
    }
}

/// The calling thread's CPU time in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`: the
/// scheduler's `sum_exec_runtime`, what `sched_stat_runtime` adds up).
pub fn cpu_time_ns() -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; the calling thread's CPU clock exists.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Pins the calling thread to `cpu` (sched_setaffinity). Fails for a CPU that is offline,
/// outside this process's allowed set (taskset, cgroup cpuset) or beyond 1023.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cpu{cpu} is beyond the {} CPUs a cpu_set_t holds",
                libc::CPU_SETSIZE
            ),
        ));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within its bits (checked
    // above); sched_setaffinity reads one set of the size given.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned_and_its_clock_advances() {
        std::thread::spawn(|| {
            pin_to_cpu(0).unwrap();
            assert_eq!(current_cpu().unwrap(), 0);
            let before = cpu_time_ns().unwrap();
            let mut x = 0u64;
            while cpu_time_ns().unwrap() < before + 1_000_000 {
                x = std::hint::black_box(x + 1);
            }
            assert!(x > 0);
            assert!(pin_to_cpu(libc::CPU_SETSIZE as usize).is_err());
        })
        .join()
        .unwrap();
    }
}
