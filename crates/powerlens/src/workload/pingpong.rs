//! `pingpong`: two threads hand a token back and forth.
//!
//! The pure synchronization load: each handoff wakes the other thread (a wake-up caused by
//! a thread, not by a timer or a device) and the passer then blocks until the token comes
//! back (a synchronization, i.e. voluntary, context switch). Almost no compute, so the
//! wake-up and switch costs are all there is, as in the synchronization functions of the
//! VTune grid (seed 000).

use std::sync::{Condvar, Mutex};

use serde::Serialize;

use super::threads::{run_threads, WorkCounts};
use super::Report;

pub const HANDOFF_UNIT: &str = "handoff";

#[derive(Debug, Clone, Serialize)]
pub struct PingpongOptions {
    /// Round trips: the token goes from ping to pong and back this many times (≥ 1), so
    /// there are 2 × iterations handoffs and each thread waits `iterations` times.
    pub iterations: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PingpongThread {
    /// Times this thread passed the token on.
    pub passes: u64,
    /// Times this thread was woken holding the token.
    pub receives: u64,
}

impl WorkCounts for PingpongThread {
    fn work_units(&self) -> u64 {
        self.passes
    }
}

pub type PingpongReport = Report<PingpongOptions, PingpongThread>;

/// The shared state: who holds the token, how often it moved, whether the game is over.
struct Token {
    holder: usize,
    handoffs: u64,
    finished: bool,
}

/// The token plus one condvar per player, so that a handoff wakes exactly the receiver.
struct Table {
    token: Mutex<Token>,
    turn: [Condvar; 2],
}

/// Plays until `total_handoffs` handoffs have happened. Player 0 serves.
fn play(table: &Table, me: usize, total_handoffs: u64) -> PingpongThread {
    let other = 1 - me;
    let mut counts = PingpongThread {
        passes: 0,
        receives: 0,
    };
    let mut token = table.token.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        // Block (passively) until the token is ours or the game is over.
        while token.holder != me && !token.finished {
            token = table.turn[me]
                .wait(token)
                .unwrap_or_else(|e| e.into_inner());
        }
        if token.finished {
            return counts;
        }
        if token.handoffs > 0 {
            counts.receives += 1;
        }
        if token.handoffs == total_handoffs {
            token.finished = true;
            table.turn[other].notify_one();
            return counts;
        }
        token.handoffs += 1;
        token.holder = other;
        counts.passes += 1;
        table.turn[other].notify_one();
    }
}

pub fn run(options: PingpongOptions) -> anyhow::Result<PingpongReport> {
    anyhow::ensure!(
        options.iterations >= 1,
        "pingpong needs at least one round trip"
    );
    let total_handoffs = options.iterations.checked_mul(2).ok_or_else(|| {
        anyhow::anyhow!("pingpong: {} round trips are too many", options.iterations)
    })?;
    let table = Table {
        token: Mutex::new(Token {
            holder: 0,
            handoffs: 0,
            finished: false,
        }),
        turn: [Condvar::new(), Condvar::new()],
    };
    let names = ["ping".to_string(), "pong".to_string()];
    let threads = run_threads(&names, |me| play(&table, me, total_handoffs))?;
    Ok(Report::new("pingpong", HANDOFF_UNIT, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handoff_blocks_the_passer_until_the_token_returns() {
        let report = run(PingpongOptions { iterations: 2000 }).unwrap();
        assert_eq!(
            report.work_units, 4000,
            "2000 round trips are 4000 handoffs"
        );
        for thread in &report.threads {
            assert_eq!(thread.counts.passes, 2000, "{thread:?}");
            assert_eq!(thread.counts.receives, 2000, "{thread:?}");
            // Each receive followed a blocking wait; a wait can rarely return without
            // sleeping (the token came back before the futex wait began).
            assert!(
                thread.usage.voluntary_switches >= 1900,
                "{}: {} voluntary switches for 2000 waits",
                thread.name,
                thread.usage.voluntary_switches
            );
        }
    }
}
