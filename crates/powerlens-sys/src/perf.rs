//! A thin layer over the `perf_event_open` syscall: the attribute struct, the call, and an
//! owned event that reads its 64-bit count, is enabled/disabled and redirects its samples.
//! The energy PMU, the capability probes and the trace collector share it, so the unsafe
//! syscall code lives in one place (the ring buffer's mmap is in `trace::ring`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `perf_event_attr.type` values (linux/perf_event.h).
pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_TRACEPOINT: u32 = 2;

/// `PERF_COUNT_HW_CPU_CYCLES`, the hardware event every PMU has.
pub const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
/// Software events (`PERF_TYPE_SOFTWARE` configs): the hrtimer-driven CPU clock, and the
/// dummy event that never counts but can carry side-band records.
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
pub const PERF_COUNT_SW_DUMMY: u64 = 9;

/// Bits of `perf_event_attr.flags` (the C bitfield, least significant bit first).
pub const FLAG_DISABLED: u64 = 1 << 0;
pub const FLAG_INHERIT: u64 = 1 << 1;
pub const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
pub const FLAG_EXCLUDE_HV: u64 = 1 << 6;
/// Software sampling events skip hits while the CPU runs its idle task.
pub const FLAG_EXCLUDE_IDLE: u64 = 1 << 7;
/// Side-band records: `PERF_RECORD_MMAP` for executable mappings (with [`FLAG_MMAP2`], the
/// MMAP2 form) and `PERF_RECORD_COMM` (with [`FLAG_COMM_EXEC`], flagged on exec).
pub const FLAG_MMAP: u64 = 1 << 8;
pub const FLAG_COMM: u64 = 1 << 9;
/// `sample_period` holds a frequency in Hz (`sample_freq`).
pub const FLAG_FREQ: u64 = 1 << 10;
/// `wakeup_events` holds `wakeup_watermark` (bytes) instead of a count of events.
pub const FLAG_WATERMARK: u64 = 1 << 14;
/// Non-sample records (MMAP2, COMM, LOST) end with the sample's TID/TIME/CPU/IDENTIFIER.
pub const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
/// `exclude_callchain_kernel`: a sample's call chain has its user frames only. Unwinding
/// the kernel's stack (ORC on x86) is most of what a call chain costs at a tracepoint.
pub const FLAG_EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
/// `exclude_callchain_user`: a sample's call chain has its kernel frames only. Walking
/// the user frame-pointer chain was the larger part of a stack event's cost on this
/// project's VMs (a fixed cost, whatever the depth).
pub const FLAG_EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
pub const FLAG_MMAP2: u64 = 1 << 23;
pub const FLAG_COMM_EXEC: u64 = 1 << 24;
/// Timestamps come from `clockid` instead of the perf clock.
pub const FLAG_USE_CLOCKID: u64 = 1 << 25;

/// Bits of `perf_event_attr.sample_type`: what each `PERF_RECORD_SAMPLE` holds. The kernel
/// writes the selected items in a fixed order (IDENTIFIER first, RAW last of these).
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
pub const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// ioctl requests on a perf event descriptor (`_IO('$', n)`, `_IOR('$', 7, u64)`).
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;
/// `_IOW('$', 4, u64)`: a new sample period.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;

/// `PERF_FLAG_FD_CLOEXEC`: the descriptor is not inherited by the commands we run.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr` up to `config3` (PERF_ATTR_SIZE_VER8, 136 bytes). The kernel
/// accepts any published size, so older kernels reject only fields they do not know when
/// those fields are non-zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfEventAttr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    /// `sample_period` or `sample_freq` (with the `freq` flag).
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// The C bitfield `disabled:1, inherit:1, …` as one word; see the `FLAG_*` constants.
    pub flags: u64,
    /// `wakeup_events` or, with [`FLAG_WATERMARK`], `wakeup_watermark` (a C union).
    pub wakeup_events: u32,
    pub bp_type: u32,
    /// `config1` (also `bp_addr`).
    pub config1: u64,
    /// `config2` (also `bp_len`).
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
    pub config3: u64,
}

impl PerfEventAttr {
    /// An attribute for a counting event of `type_`/`config`, all else zero.
    pub fn counting(type_: u32, config: u64) -> Self {
        PerfEventAttr {
            type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            ..Default::default()
        }
    }
}

/// An open perf event: a counter whose value is read as one native-endian `u64`
/// (no `read_format` flags), closed on drop.
#[derive(Debug)]
pub struct PerfCounter {
    fd: OwnedFd,
}

impl PerfCounter {
    /// Opens an event for `pid` (-1: all processes) on `cpu` (-1: any CPU), without a group.
    pub fn open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<Self> {
        // SAFETY: `attr` points to a properly sized, initialised perf_event_attr that the
        // kernel only reads; the other arguments are plain integers.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr as *const PerfEventAttr,
                pid as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(ret as libc::c_int) };
        Ok(PerfCounter { fd })
    }

    /// Starts counting (and sampling) an event opened with [`FLAG_DISABLED`].
    pub fn enable(&self) -> io::Result<()> {
        self.ioctl(PERF_EVENT_IOC_ENABLE, 0)
    }

    /// Stops counting; records already in the ring buffer stay readable.
    pub fn disable(&self) -> io::Result<()> {
        self.ioctl(PERF_EVENT_IOC_DISABLE, 0)
    }

    /// A second descriptor of the same event (`dup`): enabling or disabling either acts
    /// on the event. Closing it is cheap while the other is open; the event is released,
    /// at the kernel's slow teardown, when its last descriptor closes.
    pub fn try_clone(&self) -> io::Result<PerfCounter> {
        Ok(PerfCounter {
            fd: self.fd.try_clone()?,
        })
    }

    /// Sends this event's samples to `target`'s ring buffer, so that several events on one
    /// CPU share one mmap (both must be on the same CPU).
    pub fn set_output(&self, target: &PerfCounter) -> io::Result<()> {
        self.ioctl(
            PERF_EVENT_IOC_SET_OUTPUT,
            target.fd.as_raw_fd() as libc::c_ulong,
        )
    }

    /// Samples one event in `period` from now on (a sampling event opened without
    /// `PERF_SAMPLE_PERIOD`: with it, a tracepoint samples every hit whatever the period).
    pub fn set_period(&self, period: u64) -> io::Result<()> {
        self.ioctl(
            PERF_EVENT_IOC_PERIOD,
            (&period as *const u64) as libc::c_ulong,
        )
    }

    /// The kernel's unique id of this event, as `PERF_SAMPLE_IDENTIFIER` writes it.
    pub fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        self.ioctl(PERF_EVENT_IOC_ID, (&mut id as *mut u64) as libc::c_ulong)?;
        Ok(id)
    }

    fn ioctl(&self, request: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
        // SAFETY: the perf ioctls used here take an integer or, for IOC_ID, a pointer to a
        // live u64 that the kernel writes; the descriptor is ours.
        let ret = unsafe { libc::ioctl(self.fd.as_raw_fd(), request as _, arg) };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The current count.
    pub fn read_count(&self) -> io::Result<u64> {
        read_u64(self.fd.as_raw_fd(), "perf counter")
    }
}

/// One 8-byte value read from `fd` (a perf counter's count, an eventfd's counter); `what`
/// names it in the error.
pub(crate) fn read_u64(fd: std::os::fd::RawFd, what: &str) -> io::Result<u64> {
    let mut value = 0u64;
    // SAFETY: reads at most 8 bytes into a local u64; a bad fd only makes read fail.
    let n = unsafe {
        libc::read(
            fd,
            (&mut value as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    match n {
        8 => Ok(value),
        n if n < 0 => Err(io::Error::last_os_error()),
        n => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{what} read returned {n} bytes, expected 8"),
        )),
    }
}

/// Closes `counters` without waiting for the kernel: a detached process (a grandchild, so
/// that nobody has to reap it) inherits them and closes them, while the caller drops its
/// own references, which costs nothing while another holder remains.
///
/// Why: the last close of a tracepoint event waits for an RCU grace period under a mutex
/// the kernel holds for every tracepoint event (about 36 ms each on this project's virtual
/// machines, one after the other, on any number of threads): the ~44 events of a recording
/// with stacks on two CPUs took a second after the recording had ended. The events must be
/// disabled (and their rings drained and unmapped) first: nothing more is recorded.
///
/// The grandchild closes every other descriptor first (stdout of a `$(…)` substitution
/// must see its end when the caller exits), waits until the caller has dropped its own
/// references, then closes the counters and exits; it calls only async-signal-safe
/// functions, as a child of a multi-threaded process must. If the pipe or the fork fails,
/// the counters are closed here, one by one.
pub fn close_detached(counters: Vec<PerfCounter>) {
    if counters.is_empty() {
        return;
    }
    // The grandchild must hold the last references: it waits on this pipe until the
    // caller has dropped its own (the write end's last holder closes it: end of file).
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return drop(counters);
    }
    let [read_end, write_end] = pipe;
    let mut keep: Vec<libc::c_int> = counters.iter().map(|c| c.fd.as_raw_fd()).collect();
    keep.push(read_end);
    keep.sort_unstable();
    // SAFETY: fork duplicates the process; the child branches below only call
    // async-signal-safe functions (fork, close_range, read, close, _exit) on data that
    // exists in the copy.
    match unsafe { libc::fork() } {
        0 => unsafe {
            // The grandchild is re-parented to init; its parent exits at once.
            if libc::fork() == 0 {
                close_all_but(&keep);
                let mut byte = 0u8;
                while libc::read(read_end, (&mut byte as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                for &fd in &keep {
                    libc::close(fd);
                }
            }
            libc::_exit(0)
        },
        child if child > 0 => {
            let mut status = 0;
            // SAFETY: waits for the child just forked, which exits at once; then closes
            // the pipe's ends this process owns.
            unsafe {
                libc::waitpid(child, &mut status, 0);
                libc::close(read_end);
            }
            drop(counters); // the grandchild still holds them: no grace period here
                            // SAFETY: the write end is ours; closing it lets the grandchild go on.
            unsafe { libc::close(write_end) };
        }
        _ => {
            // SAFETY: both ends are ours.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            drop(counters)
        }
    }
}

/// Closes every descriptor of the calling (forked) process except `keep` (sorted).
///
/// # Safety
/// Only for a freshly forked child: it closes descriptors other code may think it owns.
unsafe fn close_all_but(keep: &[libc::c_int]) {
    let mut from: libc::c_uint = 0;
    for &fd in keep.iter().chain(std::iter::once(&libc::c_int::MAX)) {
        let fd = fd as libc::c_uint;
        if fd > from {
            // SAFETY: close_range only closes descriptors; ENOSYS (kernels before 5.9)
            // leaves them open, which costs the caller's pipes their end of file until
            // the closes are done, nothing more.
            libc::syscall(libc::SYS_close_range, from, fd - 1, 0);
        }
        from = fd.saturating_add(1);
    }
}

impl AsFd for PerfCounter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The fix to print when the kernel refuses a perf event for lack of privilege, naming the
/// current `perf_event_paranoid` level when it is known.
pub fn permission_fix(paranoid: Option<i64>) -> String {
    let level = paranoid.map_or_else(|| "unknown".to_string(), |p| p.to_string());
    format!(
        "perf_event_paranoid is {level}: run as root, or `sysctl kernel.perf_event_paranoid=0`, or grant CAP_PERFMON"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_published_size() {
        // PERF_ATTR_SIZE_VER8: a layout error here would make every open fail with E2BIG/EINVAL.
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
        assert_eq!(PerfEventAttr::counting(1, 0).size, 136);
        // Offsets of the fields after the bitfield word, from linux/perf_event.h.
        let attr = PerfEventAttr::default();
        let base = &attr as *const _ as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at((&attr.flags as *const u64).cast()), 40);
        assert_eq!(at((&attr.wakeup_events as *const u32).cast()), 48);
        assert_eq!(at((&attr.clockid as *const i32).cast()), 92);
        assert_eq!(at((&attr.config3 as *const u64).cast()), 128);
    }

    #[test]
    fn software_clock_counts_on_this_kernel() {
        // PERF_COUNT_SW_TASK_CLOCK (1) of this thread: every Linux kernel with perf has it,
        // so this checks the syscall wrapper and the read end to end.
        let mut attr = PerfEventAttr::counting(PERF_TYPE_SOFTWARE, 1);
        attr.flags = FLAG_EXCLUDE_HV;
        match PerfCounter::open(&attr, 0, -1) {
            Ok(counter) => {
                let a = counter.read_count().unwrap();
                let mut x = 0u64;
                for i in 0..2_000_000u64 {
                    x = x.wrapping_add(std::hint::black_box(i));
                }
                std::hint::black_box(x);
                let b = counter.read_count().unwrap();
                assert!(b > a, "task clock did not advance: {a} -> {b}");
            }
            Err(e) => crate::skip_test!("perf_event_open of the task clock failed: {e}"),
        }
    }

    /// `close_detached` leaves none of the counters open in this process and keeps none of
    /// its other descriptors (here a pipe's write end, as a caller's stdout would be)
    /// open in the detached process: the pipe reads its end of file as soon as this
    /// process closes its own end.
    #[test]
    fn close_detached_holds_nothing_of_the_caller() {
        let attr = PerfEventAttr::counting(PERF_TYPE_SOFTWARE, 1);
        let counters: Vec<PerfCounter> = (0..3)
            .filter_map(|_| PerfCounter::open(&attr, 0, -1).ok())
            .collect();
        if counters.is_empty() {
            crate::skip_test!("perf_event_open of the task clock failed");
            return;
        }
        let fds: Vec<i32> = counters.iter().map(|c| c.fd.as_raw_fd()).collect();
        let mut pipe = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
            0
        );
        close_detached(counters);
        for fd in fds {
            let link = std::fs::read_link(format!("/proc/self/fd/{fd}"));
            assert!(
                link.map_or(true, |l| !l.to_string_lossy().contains("perf_event")),
                "fd {fd} is still a perf event here"
            );
        }
        // SAFETY: our own write end; then a blocking read of the read end, which returns
        // 0 (end of file) only when no process holds the write end any more.
        let n = unsafe {
            libc::close(pipe[1]);
            let mut byte = 0u8;
            let n = libc::read(pipe[0], (&mut byte as *mut u8).cast(), 1);
            libc::close(pipe[0]);
            n
        };
        assert_eq!(n, 0, "the detached process kept the caller's pipe open");
    }

    /// What keeps the detached process from holding a caller's pipes: in a forked child,
    /// `close_all_but` closes every descriptor but the kept ones (the child reports by its
    /// exit status: 0 when the kept one is open and the other closed).
    #[test]
    fn close_all_but_keeps_only_what_it_is_told() {
        let mut pipe = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
            0
        );
        let [keep, other] = pipe;
        // SAFETY: the child calls only async-signal-safe functions and exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                close_all_but(&[keep]);
                let kept = libc::fcntl(keep, libc::F_GETFD) >= 0;
                let closed = libc::fcntl(other, libc::F_GETFD) < 0;
                libc::_exit(if kept && closed { 0 } else { 1 });
            }
        }
        assert!(child > 0);
        let mut status = 0;
        // SAFETY: our child; then our own descriptors.
        unsafe {
            libc::waitpid(child, &mut status, 0);
            libc::close(keep);
            libc::close(other);
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "status {status}"
        );
    }
}
