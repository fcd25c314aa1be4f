//! A terminal that goes away (its window closed, an ssh connection dropped) ends `top`.
//! crossterm's event reader never returns from a terminal that reads end-of-file or fails:
//! it reads again at once, forever, on a full CPU and deaf to signals
//! (crossterm-rs/crossterm#793, still open in 0.29). So a thread of its own waits for the
//! terminal to hang up — asleep in poll(2) until then, costing nothing — and ends the
//! process: there is nothing left to draw on or to restore, and the kernel closes the
//! session's tracepoints with the process.

use std::fs::File;
use std::io::{self, IsTerminal};
use std::os::fd::{AsRawFd, RawFd};

use super::terminal;

/// Watches the terminal crossterm reads keys from: stdin when it is one, else /dev/tty.
pub fn watch() -> io::Result<()> {
    let (fd, tty): (RawFd, Option<File>) = if io::stdin().is_terminal() {
        (io::stdin().as_raw_fd(), None)
    } else {
        let tty = File::open("/dev/tty")?;
        (tty.as_raw_fd(), Some(tty))
    };
    std::thread::Builder::new()
        .name("top-hangup".into())
        .spawn(move || {
            let _tty = tty;
            if hung_up(fd) {
                terminal::restore();
                std::process::exit(0);
            }
        })?;
    Ok(())
}

/// Blocks until `fd` hangs up (true), or polling it fails (false).
fn hung_up(fd: RawFd) -> bool {
    loop {
        // No event asked for: poll(2) reports only a hang-up or an error, never input.
        let mut poll = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return true;
        }
    }
}
