//! The terminal while `top` runs: raw mode, the alternate screen and a hidden cursor, and
//! the way back — when the guard is dropped (quit, an error, a signal ending the loop) and
//! when anything panics — so that the user's shell is never left in raw mode.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use anyhow::Context;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::Terminal;

/// Whether the terminal is in `top`'s state now: restoring is done once, and a panic
/// outside `top` writes nothing to the terminal.
static ACTIVE: AtomicBool = AtomicBool::new(false);

pub struct TerminalGuard {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    pub fn enter() -> anyhow::Result<TerminalGuard> {
        install_panic_hook();
        enable_raw_mode().context("cannot put the terminal in raw mode")?;
        ACTIVE.store(true, Ordering::SeqCst);
        // From here an error drops nothing that restores: do it by hand.
        let entered = execute!(io::stdout(), EnterAlternateScreen, Hide)
            .map_err(anyhow::Error::from)
            .and_then(|_| Ok(Terminal::new(CrosstermBackend::new(io::stdout()))?));
        match entered {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(e.context("cannot draw on the terminal"))
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Raw mode off, the alternate screen left, the cursor shown; once, and only if entered.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
        let _ = disable_raw_mode();
    }
}

/// A panic restores the terminal before its message is printed (else the message would
/// be drawn on the alternate screen, and lost with it).
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
