//! The command line of every process that execs while recording. The kernel's exec event
//! holds the file name only, and a task's `comm` is its basename: every `cc1` of a build
//! has the same one, and `diff` could pair them only by the order they started. The argv
//! is in `/proc/PID/cmdline` while the process lives, but a short compiler pass has exited
//! long before the drain decodes its exec (it wakes every 50 ms at most): read there, two
//! thirds of a `make -j2`'s processes were gone. So a thread of its own listens to the
//! kernel's process-events connector (netlink `NETLINK_CONNECTOR`, `CN_IDX_PROC`), which
//! tells of each exec as it happens, and reads the argv at once. Needs CAP_NET_ADMIN, as
//! tracing needs root; without it the recording has no `commands` samples and says why.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use powerlens_sys::procfs::process::{read_cmdline, read_process};
use powerlens_sys::Roots;
use serde_json::json;

use crate::sampler::{Sample, COMMANDS};

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;
const PROC_EVENT_EXEC: u32 = 2;
const NLMSG_HDR: usize = 16;
const CN_MSG_HDR: usize = 20;

/// The listening thread and what it has read.
pub struct ExecWatch {
    /// Written to stop the thread, which sleeps in poll() on it and the socket: no
    /// timeout to wake it (the recorder's own wake-ups are part of what it measures).
    stop: OwnedFd,
    handle: Option<JoinHandle<()>>,
    pub samples: Receiver<Sample>,
}

impl ExecWatch {
    /// Starts listening; `Err` says why it cannot (not root, no connector in the kernel).
    /// With `tree` (the recorded command's or `-p` process's pid, 0 until it is known),
    /// only the command lines of that process tree are kept: other users' command lines
    /// may hold what is not theirs to give (`record -a` passes `None`: every process).
    pub fn start(roots: &Roots, tree: Option<Arc<AtomicU32>>) -> Result<ExecWatch, String> {
        let socket = open().map_err(|e| {
            format!("the kernel's process-events connector could not be opened ({e}): run as root (CAP_NET_ADMIN) on a kernel with CONFIG_PROC_EVENTS")
        })?;
        // SAFETY: eventfd takes no pointers; the descriptor is owned at once.
        let stop = unsafe {
            let fd = libc::eventfd(0, libc::EFD_CLOEXEC);
            if fd < 0 {
                return Err(format!(
                    "the exec watcher's stop event could not be made: {}",
                    std::io::Error::last_os_error()
                ));
            }
            OwnedFd::from_raw_fd(fd)
        };
        let (tx, samples) = channel();
        let (stopped, roots) = (stop.as_raw_fd(), roots.clone());
        let handle = std::thread::Builder::new()
            .name("powerlens-exec".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let mut fds = [socket.as_raw_fd(), stopped].map(|fd| libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    // SAFETY: fds is valid for its length; both descriptors outlive the
                    // thread (the stop event is closed only after the join).
                    if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 || fds[1].revents != 0 {
                        break;
                    }
                    // SAFETY: buf is valid for its length; the socket is open until return.
                    let n = unsafe {
                        libc::recv(
                            socket.as_raw_fd(),
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                            libc::MSG_DONTWAIT,
                        )
                    };
                    let Ok(n) = usize::try_from(n) else {
                        continue; // nothing after all (EAGAIN), or a message too many (ENOBUFS)
                    };
                    let exec = parse_exec(&buf[..n]);
                    if let Some((time_ns, pid)) =
                        exec.filter(|(_, pid)| in_tree(&roots, *pid, tree.as_deref()))
                    {
                        let argv = read_cmdline(&roots, pid).ok().flatten();
                        let data = json!({ "pid": pid, "argv": argv });
                        if tx
                            .send(Sample {
                                time_ns,
                                kind: COMMANDS,
                                data,
                            })
                            .is_err()
                        {
                            break;
                        }
                    }
                }
                let _ = send_op(&socket, PROC_CN_MCAST_IGNORE);
            })
            .map_err(|e| format!("starting the exec watcher: {e}"))?;
        Ok(ExecWatch {
            stop,
            handle: Some(handle),
            samples,
        })
    }

    /// Stops listening; the samples not taken yet.
    pub fn stop(mut self) -> Vec<Sample> {
        let one = 1u64.to_ne_bytes();
        // SAFETY: one is valid for its 8 bytes; the descriptor is open.
        unsafe { libc::write(self.stop.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.samples.try_iter().collect()
    }
}

impl Drop for ExecWatch {
    /// A watch dropped unstopped (recording failed) still ends its thread.
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: one is valid for its 8 bytes; the descriptor is open until this returns.
        unsafe { libc::write(self.stop.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }
}

/// Whether `pid` is `tree`'s root or descends from it (its parents, from procfs).
fn in_tree(roots: &Roots, pid: u32, tree: Option<&AtomicU32>) -> bool {
    let Some(root) = tree.map(|t| t.load(Ordering::Relaxed)) else {
        return true;
    };
    let mut at = pid;
    // A chain of 64 parents is deeper than any process tree of a recorded command.
    for _ in 0..64 {
        if at == root {
            return true;
        }
        match read_process(roots, at).ok().and_then(|p| p.ppid) {
            Some(parent) if parent != at => at = parent,
            _ => return false,
        }
    }
    false
}

/// A netlink connector socket joined to the process-events group, listening.
fn open() -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_CONNECTOR,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let socket = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_groups = CN_IDX_PROC;
        let len = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        if libc::bind(fd, (&addr as *const libc::sockaddr_nl).cast(), len) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        send_op(&socket, PROC_CN_MCAST_LISTEN)?;
        Ok(socket)
    }
}

/// Sends the connector an operation (listen, ignore).
fn send_op(socket: &OwnedFd, op: u32) -> std::io::Result<()> {
    let mut msg = Vec::with_capacity(NLMSG_HDR + CN_MSG_HDR + 4);
    let total = (NLMSG_HDR + CN_MSG_HDR + 4) as u32;
    msg.extend_from_slice(&total.to_ne_bytes());
    msg.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&std::process::id().to_ne_bytes());
    for word in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
        msg.extend_from_slice(&word.to_ne_bytes());
    }
    msg.extend_from_slice(&4u16.to_ne_bytes()); // len of the data
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&op.to_ne_bytes());
    // SAFETY: msg is valid for its length.
    let n = unsafe { libc::send(socket.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The (CLOCK_MONOTONIC time, process id) of an exec event: netlink header, connector
/// header, then `struct proc_event` (what, cpu, timestamp_ns at 8, exec's pid and tgid
/// at 16 and 20). `None` for any other message.
fn parse_exec(msg: &[u8]) -> Option<(u64, u32)> {
    let event = msg.get(NLMSG_HDR + CN_MSG_HDR..)?;
    let u32_at = |o: usize| Some(u32::from_ne_bytes(event.get(o..o + 4)?.try_into().ok()?));
    if u32_at(0)? != PROC_EVENT_EXEC {
        return None;
    }
    let time_ns = u64::from_ne_bytes(event.get(8..16)?.try_into().ok()?);
    Some((time_ns, u32_at(20)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_event_gives_its_time_and_process() {
        let mut msg = vec![0u8; NLMSG_HDR + CN_MSG_HDR];
        msg.extend_from_slice(&PROC_EVENT_EXEC.to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        msg.extend_from_slice(&123_456_789u64.to_ne_bytes());
        msg.extend_from_slice(&4242u32.to_ne_bytes()); // pid (the thread)
        msg.extend_from_slice(&4240u32.to_ne_bytes()); // tgid (the process)
        assert_eq!(parse_exec(&msg), Some((123_456_789, 4240)));
        // A fork event (1) is not an exec; a short message is nothing.
        msg[NLMSG_HDR + CN_MSG_HDR] = 1;
        assert_eq!(parse_exec(&msg), None);
        assert_eq!(parse_exec(&msg[..30]), None);
    }
}
