//! Sample and hold in the wake-up causes ([`crate::stacks::hold`]), as the function grid
//! charges its events: with sampled stacks, a timer arming without a stack is grouped by
//! its thread's latest arming stack for the same callback, and a wake-up without one by
//! its waker's latest waking stack; what a thread did before its first stack in a role
//! goes to that first one. Each cause counts what it holds (`held_expiries`,
//! `held_idle_exits`).
//!
//! Armings are held per callback: a thread arms its own timers (a sleep's
//! `hrtimer_wakeup`) and, in its context, the kernel re-arms others (the tick), and a
//! sleep's stack says nothing of the tick.

use super::{Key, WakeupAnalysis};
use crate::sched::event::{StackId, Tid};
use crate::stacks::hold::{Charge, HeldStack};
use crate::stacks::NO_STACK;

/// One thread in one role: the stack it holds, and the cause groups its events of the role
/// went to without a stack (indices in `WakeupAnalysis::groups`), which its first stack
/// takes.
#[derive(Default)]
struct Role {
    held: HeldStack,
    unstacked: Vec<u32>,
}

/// Where an event of a role goes, and the groups its first stack takes.
struct Held {
    /// Its own stack, the held one, or none.
    stack: Option<StackId>,
    /// The stack is the thread's latest, not the event's own.
    held: bool,
    /// The event's own stack is the thread's first in the role: these groups, unstacked
    /// until now, become its.
    back_fill: Vec<u32>,
}

impl Role {
    /// Where an event with stack `own` goes (`None`: it has none).
    fn charge(&mut self, own: Option<StackId>) -> Held {
        match self.held.charge(own.unwrap_or(NO_STACK)) {
            Charge::Own { stack, first } => Held {
                stack: Some(stack),
                held: false,
                back_fill: if first {
                    std::mem::take(&mut self.unstacked)
                } else {
                    Vec::new()
                },
            },
            Charge::Held(stack) => Held {
                stack: Some(stack),
                held: true,
                back_fill: Vec::new(),
            },
            Charge::Unstacked => Held {
                stack: None,
                held: false,
                back_fill: Vec::new(),
            },
        }
    }

    /// An event of the role went to group `index` without a stack.
    fn went_unstacked(&mut self, index: u32) {
        if !self.unstacked.contains(&index) {
            self.unstacked.push(index);
        }
    }
}

/// What sample and hold keeps of one thread.
#[derive(Default)]
pub(super) struct ThreadHolds {
    /// Where it wakes others from.
    woke: Role,
    /// Where it arms timers, per callback (a thread arms few kinds).
    armed: Vec<(u64, Role)>,
}

/// A role a thread acts in.
#[derive(Clone, Copy)]
pub(super) enum Acting {
    /// It wakes another thread.
    Waking,
    /// It arms a timer with this callback.
    Arming(u64),
}

impl ThreadHolds {
    fn role(&mut self, acting: Acting) -> &mut Role {
        let function = match acting {
            Acting::Waking => return &mut self.woke,
            Acting::Arming(function) => function,
        };
        let at = match self.armed.iter().position(|(f, _)| *f == function) {
            Some(at) => at,
            None => {
                self.armed.push((function, Role::default()));
                self.armed.len() - 1
            }
        };
        &mut self.armed[at].1
    }

    /// The thread exec'd: it holds no stack of its old program. (Groups still waiting
    /// for a first stack wait on: the new program's first takes them, as in the grid.)
    pub fn release(&mut self) {
        self.woke.held.release();
        for (_, role) in &mut self.armed {
            role.held.release();
        }
    }
}

impl Key {
    /// The key with stack `stack`: where a thread's events without one go once its first
    /// stack in their role comes (irq keys have none).
    pub(super) fn with_stack(self, stack: StackId) -> Key {
        let stack = Some(stack);
        match self {
            Key::Timer {
                function,
                armed_by,
                cpu,
                ..
            } => Key::Timer {
                stack,
                function,
                armed_by,
                cpu,
            },
            Key::Ipi { waker, .. } => Key::Ipi { waker, stack },
            Key::Thread { waker, .. } => Key::Thread { waker, stack },
            key @ (Key::Irq(_) | Key::SoftIrq(_)) => key,
        }
    }
}

impl WakeupAnalysis {
    /// A thread's first stack in a role: the groups its events of the role went to
    /// without a stack become that stack's, every one of their events held.
    fn back_fill(&mut self, unstacked: Vec<u32>, stack: StackId) {
        for index in unstacked {
            let (key, g) = &mut self.groups[index as usize];
            let key = *key;
            let mut moved = std::mem::take(g);
            moved.held = match key {
                Key::Timer { .. } => moved.expiries,
                _ => moved.count,
            };
            let to = self.group_of(key.with_stack(stack));
            self.groups[to as usize].1.absorb(moved);
        }
    }

    /// Where an event of thread `tid` acting as `acting` goes: its own stack `own`, else
    /// the thread's latest in that role, and whether it is held.
    pub(super) fn hold(
        &mut self,
        tid: Tid,
        acting: Acting,
        own: Option<StackId>,
    ) -> (Option<StackId>, bool) {
        let role = self
            .holds
            .get_or_insert_with(tid, ThreadHolds::default)
            .role(acting);
        let charged = role.charge(own);
        if let Some(stack) = charged.stack {
            self.back_fill(charged.back_fill, stack);
        }
        (charged.stack, charged.held)
    }

    /// An event of `tid` acting as `acting` went to group `index` without a stack: its
    /// first stack in the role takes the group ([`WakeupAnalysis::back_fill`]).
    pub(super) fn went_unstacked(&mut self, tid: Tid, acting: Acting, index: u32) {
        self.holds
            .get_or_insert_with(tid, ThreadHolds::default)
            .role(acting)
            .went_unstacked(index);
    }
}
