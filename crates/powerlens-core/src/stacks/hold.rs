//! Sample and hold, the rule every view of sampled stacks charges by (docs/REPORT.md): when
//! one switch, wake-up or timer arming in N carries its stack, an event without one is
//! charged to its thread's latest stack in the same role (where it blocks, whom it wakes
//! from where, where it arms a timer), and what the thread did in that role before its
//! first stack goes to that first one. An exec starts the thread over: the stacks it held
//! are the old program's, and held on, a launcher's (a shell's, `taskset`'s) would name up
//! to one sampling period of the new program's events.
//!
//! [`HeldStack`] is that rule for one thread in one role; the function grid
//! ([`super::attribution`]) and the wake-up causes ([`crate::sched::wakeups`]) keep one per
//! thread and role and move what came before a first stack in their own terms.

use super::NO_STACK;
use crate::sched::event::StackId;

/// One thread's latest stack in one role: none before its first (or since an exec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldStack(StackId);

impl Default for HeldStack {
    fn default() -> Self {
        HeldStack(NO_STACK)
    }
}

/// Where an event of the role goes ([`HeldStack::charge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// To its own stack, which the thread now holds. `first`: the thread held none (its
    /// first stack in the role, or its first since an exec): what it was charged in the
    /// role without a stack goes to this one.
    Own { stack: StackId, first: bool },
    /// It has none: to the stack the thread holds.
    Held(StackId),
    /// It has none and the thread holds none: without a stack, until the first comes.
    Unstacked,
}

impl HeldStack {
    /// Where an event with stack `own` ([`NO_STACK`]: none) goes, holding `own` when it
    /// is one.
    #[inline]
    pub fn charge(&mut self, own: StackId) -> Charge {
        match (own, self.0) {
            (NO_STACK, NO_STACK) => Charge::Unstacked,
            (NO_STACK, held) => Charge::Held(held),
            (own, held) => {
                self.0 = own;
                Charge::Own {
                    stack: own,
                    first: held == NO_STACK,
                }
            }
        }
    }

    /// The stack held, if any.
    #[inline]
    pub fn held(&self) -> Option<StackId> {
        (self.0 != NO_STACK).then_some(self.0)
    }

    /// The thread exec'd: it holds nothing of its old program.
    pub fn release(&mut self) {
        self.0 = NO_STACK;
    }
}

impl Charge {
    /// The stack charged, [`NO_STACK`] when none.
    #[inline]
    pub fn stack(self) -> StackId {
        match self {
            Charge::Own { stack, .. } | Charge::Held(stack) => stack,
            Charge::Unstacked => NO_STACK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_held_until_the_next_and_released_by_an_exec() {
        let mut h = HeldStack::default();
        assert_eq!(h.charge(NO_STACK), Charge::Unstacked);
        assert_eq!(
            h.charge(4),
            Charge::Own {
                stack: 4,
                first: true
            }
        );
        assert_eq!(h.charge(NO_STACK), Charge::Held(4));
        assert_eq!(
            h.charge(5),
            Charge::Own {
                stack: 5,
                first: false
            }
        );
        assert_eq!(h.held(), Some(5));
        h.release();
        assert_eq!(h.held(), None);
        assert_eq!(h.charge(NO_STACK), Charge::Unstacked);
        assert_eq!(
            h.charge(6),
            Charge::Own {
                stack: 6,
                first: true
            }
        );
    }
}
