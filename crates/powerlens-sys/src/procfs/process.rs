//! Per-process readers for a monitor that runs without end: a process's name and CPU time
//! (all its threads, from `/proc/PID/stat`) and its cgroup v2 path (`/proc/PID/cgroup`).

use crate::{sysfs, Roots, SysError};

/// What `/proc/PID/stat` says of a whole process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStat {
    pub pid: u32,
    pub comm: String,
    /// The parent process (field 4), `None` for the kernel's roots (0).
    pub ppid: Option<u32>,
    /// utime + stime of every thread, live and reaped (clock ticks turned to ns: 10 ms
    /// resolution at USER_HZ 100).
    pub cpu_time_ns: u64,
}

/// Reads `/proc/PID/cmdline`: the process's argv. `Ok(None)` when it is empty (a kernel
/// thread, or a zombie whose memory is gone).
pub fn read_cmdline(roots: &Roots, pid: u32) -> Result<Option<Vec<String>>, SysError> {
    let path = roots.proc(format!("{pid}/cmdline"));
    let bytes = std::fs::read(&path).map_err(|e| SysError::from_io(&path, e, "run as root"))?;
    Ok(parse_cmdline(&bytes))
}

/// The NUL-separated words of a `cmdline` file; `None` when it holds none.
pub fn parse_cmdline(bytes: &[u8]) -> Option<Vec<String>> {
    let words: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    // The file ends with a NUL: the last split is empty.
    let words = match words.split_last() {
        Some((last, rest)) if last.is_empty() => rest.to_vec(),
        _ => words,
    };
    (!words.is_empty()).then_some(words)
}

/// Reads `/proc/PID/stat`.
pub fn read_process(roots: &Roots, pid: u32) -> Result<ProcessStat, SysError> {
    let path = roots.proc(format!("{pid}/stat"));
    let text = sysfs::read_string(&path)?;
    parse_process_stat(pid, &text).ok_or_else(|| SysError::Parse {
        path,
        expected: "a stat line: pid (comm) state … utime stime",
        found: text.chars().take(80).collect(),
    })
}

/// Parses a `stat` line; the name may hold spaces and parentheses, so it is what lies
/// between the first `(` and the last `)`.
pub fn parse_process_stat(pid: u32, text: &str) -> Option<ProcessStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let ticks = super::tasks::parse_stat_cpu_ticks(text)?;
    // After the name: state, then the parent's pid.
    let ppid: u32 = text
        .get(close + 1..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(ProcessStat {
        pid,
        comm,
        ppid: (ppid > 0).then_some(ppid),
        cpu_time_ns: ticks.saturating_mul(1_000_000_000) / super::user_hz() as u64,
    })
}

/// How long ago this process started, seconds: its `starttime` (`/proc/self/stat`, clock
/// ticks since boot) against CLOCK_BOOTTIME now; `None` where either cannot be read (a
/// procfs root without `self`).
pub fn own_age_s(roots: &Roots) -> Option<f64> {
    let text = sysfs::read_string(roots.proc("self/stat")).ok()?;
    let started_s = parse_start_ticks(&text)? as f64 / super::user_hz();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; CLOCK_BOOTTIME exists on Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let now_s = ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9;
    Some((now_s - started_s).max(0.0))
}

/// Field 22 of a stat line, `starttime`: when the process started, in clock ticks since
/// boot.
fn parse_start_ticks(text: &str) -> Option<u64> {
    // After the name: state is field 3, so field 22 is the 20th.
    text.get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A process's cgroup v2 path (the `0::PATH` line of `/proc/PID/cgroup`); `None` on a
/// cgroup-v1-only system.
pub fn read_cgroup(roots: &Roots, pid: u32) -> Result<Option<String>, SysError> {
    let path = roots.proc(format!("{pid}/cgroup"));
    Ok(parse_cgroup(&sysfs::read_string(&path)?))
}

pub fn parse_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_words_are_split_at_nul() {
        assert_eq!(
            parse_cmdline(b"/usr/lib/gcc/cc1\0-quiet\0big.c\0"),
            Some(vec![
                "/usr/lib/gcc/cc1".into(),
                "-quiet".into(),
                "big.c".into()
            ])
        );
        assert_eq!(parse_cmdline(b""), None);
        // An argument may be empty: it is kept.
        assert_eq!(
            parse_cmdline(b"sh\0\0x\0"),
            Some(vec!["sh".into(), "".into(), "x".into()])
        );
    }

    #[test]
    fn the_start_time_is_field_22() {
        let line =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 123456 1000 50";
        assert_eq!(parse_start_ticks(line), Some(123_456));
        assert_eq!(parse_start_ticks("4242 (x) S 1 2"), None);
    }
    use crate::fixture::FixtureTree;

    #[test]
    fn a_name_with_parentheses_and_spaces_is_whole() {
        let hz = super::super::user_hz() as u64;
        let line = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 12345 0 0";
        let p = parse_process_stat(4242, line).unwrap();
        assert_eq!(p.comm, "my (odd) prog");
        assert_eq!(p.ppid, Some(1));
        assert_eq!(p.cpu_time_ns, 300 * 1_000_000_000 / hz);
        assert!(parse_process_stat(1, "1 (init").is_none());
    }

    #[test]
    fn cgroup_v2_line_and_fixture_root() {
        assert_eq!(
            parse_cgroup("12:cpu:/old\n0::/system.slice/sshd.service\n").as_deref(),
            Some("/system.slice/sshd.service")
        );
        assert_eq!(parse_cgroup("12:cpu:/old\n"), None);
        let f = FixtureTree::new();
        f.write_proc("77/cgroup", "0::/user.slice/user-0.slice\n");
        assert_eq!(
            read_cgroup(&f.roots(), 77).unwrap().as_deref(),
            Some("/user.slice/user-0.slice")
        );
        assert!(read_cgroup(&f.roots(), 78).unwrap_err().is_not_found());
    }

    /// This process, against getrusage: procfs's CPU time of the whole process covers at
    /// least what the kernel's rusage said just before (tick resolution below it).
    #[test]
    #[ignore = "live: the real kernel's CPU clocks"]
    fn live_cpu_time_of_this_process_is_the_kernels() {
        // 60 ms of this thread's CPU time, however the CPUs are shared.
        let start = crate::thread::cpu_time_ns().unwrap();
        while crate::thread::cpu_time_ns().unwrap() - start < 60_000_000 {}
        // SAFETY: getrusage writes into the struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let rusage_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as u64 * 1_000_000_000
            + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as u64 * 1_000;
        let p = read_process(&Roots::default(), std::process::id()).unwrap();
        let tick = 1_000_000_000 / super::super::user_hz() as u64;
        assert!(
            p.cpu_time_ns + 2 * tick >= rusage_ns && rusage_ns >= 50_000_000,
            "procfs {} ns vs getrusage {} ns",
            p.cpu_time_ns,
            rusage_ns
        );
        assert!(!p.comm.is_empty());
    }
}
