//! The executable mappings of one process as they change: a new mapping replaces whatever
//! it overlaps, as mmap(MAP_FIXED) does.

use crate::procfs::maps::Mapping;

/// Executable mappings in address order, never overlapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AddressSpace {
    maps: Vec<Mapping>,
}

impl AddressSpace {
    pub(crate) fn from_maps(mut maps: Vec<Mapping>) -> Self {
        maps.sort_by_key(|m| m.start);
        let mut space = AddressSpace::default();
        for m in maps {
            space.insert(m);
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

    /// Adds `new`, cutting what it overlaps out of the existing mappings (keeping their
    /// parts before and after it, with the file offset of the part after adjusted).
    pub(crate) fn insert(&mut self, new: Mapping) {
        if new.start >= new.end {
            return;
        }
        let mut kept = Vec::with_capacity(self.maps.len() + 2);
        for m in self.maps.drain(..) {
            if m.end <= new.start || m.start >= new.end {
                kept.push(m);
                continue;
            }
            if m.start < new.start {
                kept.push(Mapping {
                    end: new.start,
                    ..m.clone()
                });
            }
            if m.end > new.end {
                kept.push(Mapping {
                    start: new.end,
                    file_offset: m.file_offset + (new.end - m.start),
                    ..m
                });
            }
        }
        let at = kept.partition_point(|m| m.start < new.start);
        kept.insert(at, new);
        self.maps = kept;
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
        let mut space = AddressSpace::from_maps(vec![
            m(0x5000, 0x6000, 0, "b"),
            m(0x1000, 0x4000, 0x1000, "a"),
        ]);
        assert_eq!(space.maps()[0].path, "a");
        space.insert(m(0x2000, 0x3000, 0, "c"));
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
        space.insert(m(0x1000, 0x6000, 0, "d"));
        assert_eq!(space.maps(), [m(0x1000, 0x6000, 0, "d")]);
        assert!(space.covers(0x1000) && space.covers(0x5fff));
        assert!(!space.covers(0xfff) && !space.covers(0x6000));
        // An empty mapping changes nothing.
        space.insert(m(0x7000, 0x7000, 0, "e"));
        assert_eq!(space.maps().len(), 1);
    }
}
