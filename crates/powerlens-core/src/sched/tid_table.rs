//! A table keyed by thread id for state looked up several times per event (a context
//! switch settles `prev`, then `next`, each through a few steps). Values live in a dense
//! vector. A tid below [`DIRECT_TIDS`] finds its slot by indexing (kernels hand out tids
//! from 1 up, below 32768 unless `pid_max` was raised), others through a hash map.

use super::event::{Tid, TidMap};

/// Tids whose slots are found by indexing: the index costs four bytes per tid up to the
/// highest one seen, 256 KiB at most.
const DIRECT_TIDS: usize = 1 << 16;

/// No slot, in the direct index.
const NO_SLOT: u32 = u32::MAX;

#[derive(Debug)]
pub struct TidTable<V> {
    values: Vec<V>,
    /// Slot by tid, for tids below [`DIRECT_TIDS`] (up to the highest one seen).
    direct: Vec<u32>,
    /// Slot by tid, for the others.
    slots: TidMap<u32>,
}

impl<V> Default for TidTable<V> {
    fn default() -> Self {
        TidTable {
            values: Vec::new(),
            direct: Vec::new(),
            slots: TidMap::default(),
        }
    }
}

impl<V> TidTable<V> {
    #[inline]
    fn slot(&self, tid: Tid) -> Option<usize> {
        match self.direct.get(tid as usize) {
            Some(&NO_SLOT) => None,
            Some(&slot) => Some(slot as usize),
            None if (tid as usize) < DIRECT_TIDS => None,
            None => self.slots.get(&tid).map(|&s| s as usize),
        }
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
        self.set_slot(tid, slot as u32);
        slot
    }

    fn set_slot(&mut self, tid: Tid, slot: u32) {
        let i = tid as usize;
        if i < DIRECT_TIDS {
            if self.direct.len() <= i {
                self.direct.resize(i + 1, NO_SLOT);
            }
            self.direct[i] = slot;
        } else {
            self.slots.insert(tid, slot);
        }
    }

    /// Keeps only the values `keep` says yes to (a long-running analysis forgets exited
    /// threads this way, so its memory follows the live threads, not every thread ever).
    /// Linear in the table: call it once per interval, not per event.
    pub fn retain(&mut self, mut keep: impl FnMut(Tid, &V) -> bool) {
        let direct = self
            .direct
            .iter()
            .enumerate()
            .filter(|(_, &s)| s != NO_SLOT)
            .map(|(t, &s)| (s, t as Tid));
        let mut by_slot: Vec<(u32, Tid)> = direct
            .chain(self.slots.iter().map(|(&t, &s)| (s, t)))
            .collect();
        by_slot.sort_unstable();
        let values = std::mem::take(&mut self.values);
        self.direct.clear();
        self.slots.clear();
        for ((_, tid), value) in by_slot.into_iter().zip(values) {
            if keep(tid, &value) {
                let slot = self.values.len() as u32;
                self.values.push(value);
                self.set_slot(tid, slot);
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
        assert_eq!(t.get(7), Some(&74), "a miss changes nothing");
        assert_eq!(t.into_values().collect::<Vec<_>>(), [74, 6, 2]);
    }

    /// Tids on both sides of the direct index's end (a raised `pid_max`) are found, kept
    /// and forgotten alike.
    #[test]
    fn tids_past_the_direct_index_are_found_through_the_map() {
        let mut t: TidTable<u64> = TidTable::default();
        let tids = [DIRECT_TIDS as Tid - 1, DIRECT_TIDS as Tid, 4_194_303, 1];
        for tid in tids {
            t.get_or_insert_with(tid, || tid as u64);
        }
        for tid in tids {
            assert_eq!(t.get(tid), Some(&(tid as u64)), "{tid}");
        }
        assert!(t.get(DIRECT_TIDS as Tid + 1).is_none());
        assert!(t.get(DIRECT_TIDS as Tid - 2).is_none());
        t.retain(|tid, _| tid != DIRECT_TIDS as Tid && tid != 1);
        assert_eq!((t.get(DIRECT_TIDS as Tid), t.get(1)), (None, None));
        assert_eq!(t.get(4_194_303), Some(&4_194_303));
        assert_eq!(
            t.into_values().collect::<Vec<_>>(),
            [DIRECT_TIDS as u64 - 1, 4_194_303]
        );
    }

    #[test]
    fn retained_values_keep_their_tids_and_order() {
        let mut t: TidTable<u64> = TidTable::default();
        for tid in [5, 9, 2, 7] {
            t.get_or_insert_with(tid, || tid as u64 * 10);
        }
        assert_eq!(t.get(9), Some(&90));
        t.retain(|tid, _| tid != 9 && tid != 5);
        assert_eq!(t.len(), 2);
        assert_eq!((t.get(9), t.get(5)), (None, None));
        assert_eq!((t.get(2), t.get(7)), (Some(&20), Some(&70)));
        *t.get_or_insert_with(9, || 1) += 1;
        assert_eq!(t.into_values().collect::<Vec<_>>(), [20, 70, 2]);
    }
}
