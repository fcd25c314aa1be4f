//! A table keyed by thread id for state looked up several times per event, mostly for the
//! same thread in a row (a context switch settles `prev`, then `next`, each through a few
//! steps). Values live in a dense vector; a hash map gives a tid's slot, and the slot of
//! the last tid asked for is remembered, so repeated lookups of one thread skip the hash.

use std::cell::Cell;

use super::event::{Tid, TidMap};

#[derive(Debug)]
pub struct TidTable<V> {
    values: Vec<V>,
    slots: TidMap<u32>,
    /// The last tid looked up (as u64, so that no u32 tid matches the empty marker) and
    /// its slot.
    last: Cell<(u64, u32)>,
}

impl<V> Default for TidTable<V> {
    fn default() -> Self {
        TidTable {
            values: Vec::new(),
            slots: TidMap::default(),
            last: Cell::new((u64::MAX, 0)),
        }
    }
}

impl<V> TidTable<V> {
    #[inline]
    fn slot(&self, tid: Tid) -> Option<usize> {
        let (last_tid, last_slot) = self.last.get();
        if last_tid == tid as u64 {
            return Some(last_slot as usize);
        }
        let slot = *self.slots.get(&tid)?;
        self.last.set((tid as u64, slot));
        Some(slot as usize)
    }

    pub fn get(&self, tid: Tid) -> Option<&V> {
        self.slot(tid).map(|s| &self.values[s])
    }

    pub fn get_mut(&mut self, tid: Tid) -> Option<&mut V> {
        self.slot(tid).map(|s| &mut self.values[s])
    }

    /// `tid`'s value, made by `make` the first time.
    #[inline]
    pub fn get_or_insert_with(&mut self, tid: Tid, make: impl FnOnce() -> V) -> &mut V {
        let slot = match self.slot(tid) {
            Some(s) => s,
            None => self.insert(tid, make()),
        };
        &mut self.values[slot]
    }

    #[cold]
    fn insert(&mut self, tid: Tid, value: V) -> usize {
        let slot = self.values.len();
        self.values.push(value);
        self.slots.insert(tid, slot as u32);
        self.last.set((tid as u64, slot as u32));
        slot
    }

    /// Keeps only the values `keep` says yes to (a long-running analysis forgets exited
    /// threads this way, so its memory follows the live threads, not every thread ever).
    /// Linear in the table: call it once per interval, not per event.
    pub fn retain(&mut self, mut keep: impl FnMut(Tid, &V) -> bool) {
        let mut by_slot: Vec<(u32, Tid)> = self.slots.iter().map(|(&t, &s)| (s, t)).collect();
        by_slot.sort_unstable();
        let values = std::mem::take(&mut self.values);
        self.slots.clear();
        self.last.set((u64::MAX, 0));
        for ((_, tid), value) in by_slot.into_iter().zip(values) {
            if keep(tid, &value) {
                self.slots.insert(tid, self.values.len() as u32);
                self.values.push(value);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Every value, in the order the tids were first seen.
    pub fn into_values(self) -> std::vec::IntoIter<V> {
        self.values.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_tid_whatever_the_lookup_order() {
        let mut t: TidTable<u64> = TidTable::default();
        assert!(t.get(7).is_none());
        *t.get_or_insert_with(7, || 70) += 1;
        *t.get_or_insert_with(u32::MAX, || 5) += 1;
        *t.get_or_insert_with(0, || 0) += 2;
        // Repeated, alternating and fresh lookups all land on the right value.
        for _ in 0..3 {
            *t.get_mut(7).unwrap() += 1;
        }
        assert_eq!(t.get(0), Some(&2));
        assert_eq!(t.get(7), Some(&74));
        assert_eq!(t.get(u32::MAX), Some(&6));
        assert_eq!(*t.get_or_insert_with(7, || unreachable!()), 74);
        assert!(t.get(8).is_none());
        assert_eq!(
            t.get(7),
            Some(&74),
            "a miss does not spoil the remembered slot"
        );
        assert_eq!(t.into_values().collect::<Vec<_>>(), [74, 6, 2]);
    }

    #[test]
    fn retained_values_keep_their_tids_and_order() {
        let mut t: TidTable<u64> = TidTable::default();
        for tid in [5, 9, 2, 7] {
            t.get_or_insert_with(tid, || tid as u64 * 10);
        }
        assert_eq!(t.get(9), Some(&90), "remembered slot before the retain");
        t.retain(|tid, _| tid != 9 && tid != 5);
        assert_eq!(t.len(), 2);
        assert_eq!((t.get(9), t.get(5)), (None, None));
        assert_eq!((t.get(2), t.get(7)), (Some(&20), Some(&70)));
        *t.get_or_insert_with(9, || 1) += 1;
        assert_eq!(t.into_values().collect::<Vec<_>>(), [20, 70, 2]);
    }
}
