//! The executable mappings of one process as they change: a new mapping replaces whatever
//! it overlaps, as mmap(MAP_FIXED) does. Each mapping remembers when it was made, so that
//! an exec drained late (its record on another CPU's ring) drops only what came before it.

use crate::procfs::maps::Mapping;

/// Executable mappings in address order, never overlapping, each with the time
/// (CLOCK_MONOTONIC ns) it was mapped or first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AddressSpace {
    maps: Vec<Mapping>,
    mapped_ns: Vec<u64>,
}

impl AddressSpace {
    /// A space seen whole at `seen_ns` (a `/proc/PID/maps` snapshot).
    pub(crate) fn from_maps(mut maps: Vec<Mapping>, seen_ns: u64) -> Self {
        maps.sort_by_key(|m| m.start);
        let mut space = AddressSpace::default();
        for m in maps {
            space.insert(m, seen_ns);
        }
        space
    }

    pub(crate) fn maps(&self) -> &[Mapping] {
        &self.maps
    }

    pub(crate) fn covers(&self, addr: u64) -> bool {
        let i = self.maps.partition_point(|m| m.end <= addr);
        self.maps.get(i).is_some_and(|m| m.contains(addr))
    }

    /// Adds `new`, mapped at `mapped_ns`, cutting what it overlaps out of the existing
    /// mappings (keeping their parts before and after it, with the file offset of the part
    /// after adjusted).
    pub(crate) fn insert(&mut self, new: Mapping, mapped_ns: u64) {
        if new.start >= new.end {
            return;
        }
        let mut kept = AddressSpace {
            maps: Vec::with_capacity(self.maps.len() + 2),
            mapped_ns: Vec::with_capacity(self.maps.len() + 2),
        };
        for (m, at) in self.maps.drain(..).zip(self.mapped_ns.drain(..)) {
            if m.end <= new.start || m.start >= new.end {
                kept.push(m, at);
                continue;
            }
            if m.start < new.start {
                kept.push(
                    Mapping {
                        end: new.start,
                        ..m.clone()
                    },
                    at,
                );
            }
            if m.end > new.end {
                kept.push(
                    Mapping {
                        start: new.end,
                        file_offset: m.file_offset + (new.end - m.start),
                        ..m
                    },
                    at,
                );
            }
        }
        let i = kept.maps.partition_point(|m| m.start < new.start);
        kept.maps.insert(i, new);
        kept.mapped_ns.insert(i, mapped_ns);
        *self = kept;
    }

    /// Keeps only the mappings made at or after `since_ns` (those of a new image).
    pub(crate) fn retain_since(&mut self, since_ns: u64) {
        (self.maps, self.mapped_ns) = std::mem::take(&mut self.maps)
            .into_iter()
            .zip(std::mem::take(&mut self.mapped_ns))
            .filter(|&(_, at)| at >= since_ns)
            .unzip();
    }

    /// The mappings made at or after `since_ns`, with their times.
    pub(crate) fn since(&self, since_ns: u64) -> impl Iterator<Item = (&Mapping, u64)> {
        self.maps
            .iter()
            .zip(self.mapped_ns.iter().copied())
            .filter(move |&(_, at)| at >= since_ns)
    }

    fn push(&mut self, m: Mapping, mapped_ns: u64) {
        self.maps.push(m);
        self.mapped_ns.push(mapped_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, offset: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end,
            file_offset: offset,
            path: path.to_string(),
        }
    }

    #[test]
    fn a_new_mapping_cuts_what_it_overlaps() {
        let mut space = AddressSpace::from_maps(
            vec![m(0x5000, 0x6000, 0, "b"), m(0x1000, 0x4000, 0x1000, "a")],
            0,
        );
        assert_eq!(space.maps()[0].path, "a");
        space.insert(m(0x2000, 0x3000, 0, "c"), 5);
        assert_eq!(
            space.maps(),
            [
                m(0x1000, 0x2000, 0x1000, "a"),
                m(0x2000, 0x3000, 0, "c"),
                m(0x3000, 0x4000, 0x3000, "a"),
                m(0x5000, 0x6000, 0, "b"),
            ]
        );
        // Covering several replaces them whole.
        space.insert(m(0x1000, 0x6000, 0, "d"), 6);
        assert_eq!(space.maps(), [m(0x1000, 0x6000, 0, "d")]);
        assert!(space.covers(0x1000) && space.covers(0x5fff));
        assert!(!space.covers(0xfff) && !space.covers(0x6000));
        // An empty mapping changes nothing.
        space.insert(m(0x7000, 0x7000, 0, "e"), 7);
        assert_eq!(space.maps().len(), 1);
    }

    #[test]
    fn cut_pieces_keep_their_time_and_an_exec_keeps_only_later_mappings() {
        let mut space = AddressSpace::from_maps(vec![m(0x1000, 0x4000, 0, "old")], 10);
        space.insert(m(0x2000, 0x3000, 0, "new"), 20);
        assert_eq!(space.mapped_ns, [10, 20, 10]);
        space.insert(m(0x8000, 0x9000, 0, "later"), 30);
        let since_20: Vec<_> = space.since(20).map(|(m, t)| (m.path.as_str(), t)).collect();
        assert_eq!(since_20, [("new", 20), ("later", 30)]);
        space.retain_since(20);
        assert_eq!(
            space.maps(),
            [m(0x2000, 0x3000, 0, "new"), m(0x8000, 0x9000, 0, "later")]
        );
        assert_eq!(space.mapped_ns, [20, 30]);
    }
}
