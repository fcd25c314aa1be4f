//! Attaching the programs to their tracepoints only while their kinds are collected.
//!
//! A program attached and switched off still costs every hit of its tracepoint the call
//! and the check of its switch: about 150 ns a switch of a ping-pong on this project's
//! VMs, the three programs together, paid by a recording's calibration loads in their
//! "bare" runs (which then hid it from the cost they measured) and by every switch
//! between an agent's tracing windows. So a program is attached when a kind it serves is
//! switched on and detached when collection stops: a tracepoint with nothing attached
//! costs nothing.
//!
//! The attachments are shared by the collector and its [`super::ControlSwitch`] (an
//! agent's window switch, on another thread), so that a program is never attached twice.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use super::records::Kind;
use super::syscall::raw_tracepoint_open;

/// One loaded program: the kinds it serves, its descriptor, and its attachment.
#[derive(Debug)]
struct Program {
    needed_by: &'static [Kind],
    tracepoint: &'static str,
    fd: OwnedFd,
    link: Option<OwnedFd>,
}

/// The loaded programs' attachments.
#[derive(Debug, Default)]
pub(super) struct Attachments {
    programs: Vec<Program>,
}

/// The attachments, as shared between the collector and its window switches.
pub(super) type Shared = Arc<Mutex<Attachments>>;

impl Attachments {
    /// Adds a loaded program (its own descriptor), detached.
    pub(super) fn add(
        &mut self,
        needed_by: &'static [Kind],
        tracepoint: &'static str,
        fd: OwnedFd,
    ) {
        self.programs.push(Program {
            needed_by,
            tracepoint,
            fd,
            link: None,
        });
    }

    /// Attaches every program that one of `kinds` needs and is not attached yet.
    pub(super) fn attach_for(&mut self, kinds: &[Kind]) -> Result<(), String> {
        for p in &mut self.programs {
            if p.link.is_none() && p.needed_by.iter().any(|k| kinds.contains(k)) {
                let link = raw_tracepoint_open(&p.fd)
                    .map_err(|e| format!("attaching the BPF program for {}: {e}", p.tracepoint))?;
                p.link = Some(link);
            }
        }
        Ok(())
    }

    /// Detaches every program (closing its link detaches it).
    pub(super) fn detach_all(&mut self) {
        for p in &mut self.programs {
            p.link = None;
        }
    }

    /// How many programs are attached.
    #[cfg(test)]
    pub(super) fn attached(&self) -> usize {
        self.programs.iter().filter(|p| p.link.is_some()).count()
    }
}
