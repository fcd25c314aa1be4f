//! The unwind information of one module file (an ELF executable or shared library): its
//! `.eh_frame` and `.eh_frame_hdr` sections and where they sit, read once and shared by
//! every process that maps the file, and turned into a framehop [`Module`] for one
//! mapping of it.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};

use crate::procfs::maps::Mapping;

/// Section bytes as framehop reads them: shared, so one copy serves every process.
pub(crate) type SectionBytes = Arc<[u8]>;

/// What framehop needs of a module, at the module's own (stated) addresses.
#[derive(Debug)]
pub(crate) struct ModuleSections {
    text_svma: Option<Range<u64>>,
    got_svma: Option<Range<u64>>,
    eh_frame_svma: Option<Range<u64>>,
    eh_frame: Option<SectionBytes>,
    eh_frame_hdr_svma: Option<Range<u64>>,
    eh_frame_hdr: Option<SectionBytes>,
    /// `PT_LOAD` segments as (file offset, stated address), to place a mapping.
    segments: Vec<(u64, u64)>,
}

impl ModuleSections {
    /// Reads the sections from an ELF file; only the headers and the unwind sections are
    /// read, not the whole file (a debug build of a large library is hundreds of MiB).
    pub(crate) fn read_file(path: &Path) -> Result<ModuleSections, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self::from_object(&elf))
    }

    /// Reads the sections from an ELF image in memory (the vDSO).
    pub(crate) fn parse(image: &[u8]) -> Result<ModuleSections, String> {
        let elf = object::File::parse(image).map_err(|e| e.to_string())?;
        Ok(Self::from_object(&elf))
    }

    fn from_object<'data, R: object::ReadRef<'data>>(elf: &object::File<'data, R>) -> Self {
        let range = |name: &str| {
            elf.section_by_name(name)
                .map(|s| s.address()..s.address() + s.size())
        };
        let bytes = |name: &str| -> Option<SectionBytes> {
            let data = elf.section_by_name(name)?.data().ok()?;
            (!data.is_empty()).then(|| Arc::from(data))
        };
        ModuleSections {
            text_svma: range(".text"),
            got_svma: range(".got"),
            eh_frame_svma: range(".eh_frame"),
            eh_frame: bytes(".eh_frame"),
            eh_frame_hdr_svma: range(".eh_frame_hdr"),
            eh_frame_hdr: bytes(".eh_frame_hdr"),
            segments: elf
                .segments()
                .map(|s| (s.file_range().0, s.address()))
                .collect(),
        }
    }

    /// Whether there is DWARF CFI to unwind with (otherwise framehop uses frame pointers
    /// in this module).
    #[cfg(test)]
    pub(crate) fn has_cfi(&self) -> bool {
        self.eh_frame.is_some()
    }

    /// Where the module's address 0 lies in a process that maps it as `mapping`: the
    /// segment holding the mapping's file offset gives the file-offset-to-address shift.
    /// Segments need not start on a page boundary, mappings do: a segment is matched from
    /// its page-aligned start.
    pub(crate) fn base_avma(&self, mapping: &Mapping) -> u64 {
        const PAGE: u64 = 4096;
        let segment = self
            .segments
            .iter()
            .filter(|(offset, _)| offset & !(PAGE - 1) <= mapping.file_offset)
            .max_by_key(|(offset, _)| *offset);
        let (offset, vaddr) = segment.copied().unwrap_or((0, 0));
        // The byte at file offset F is at stated address vaddr + F - offset and at
        // mapping.start + F - mapping.file_offset in the process.
        mapping
            .start
            .wrapping_sub(mapping.file_offset)
            .wrapping_add(offset)
            .wrapping_sub(vaddr)
    }

    /// A framehop module for `mapping` of this file.
    pub(crate) fn module(&self, mapping: &Mapping) -> Module<SectionBytes> {
        Module::new(
            mapping.path.clone(),
            mapping.start..mapping.end,
            self.base_avma(mapping),
            ExplicitModuleSectionInfo {
                // ELF modules state addresses from 0.
                base_svma: 0,
                text_svma: self.text_svma.clone(),
                got_svma: self.got_svma.clone(),
                eh_frame_svma: self.eh_frame_svma.clone(),
                eh_frame: self.eh_frame.clone(),
                eh_frame_hdr_svma: self.eh_frame_hdr_svma.clone(),
                eh_frame_hdr: self.eh_frame_hdr.clone(),
                ..Default::default()
            },
        )
    }
}

/// This process's vDSO image. Every process on one kernel maps the same vDSO, and it has no
/// file to read, so ours stands in for theirs.
pub(crate) fn own_vdso() -> Result<Vec<u8>, String> {
    // SAFETY: getauxval has no preconditions; 0 means "not present".
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return Err("this process has no vDSO".to_string());
    }
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let mapping = crate::procfs::maps::parse_executable_maps(&maps)
        .into_iter()
        .find(|m| m.path == "[vdso]" && m.start == base)
        .ok_or("the vDSO is not in /proc/self/maps")?;
    let len = (mapping.end - mapping.start) as usize;
    // SAFETY: the kernel maps the whole [vdso] range readable for the life of the process.
    let image = unsafe { std::slice::from_raw_parts(base as *const u8, len) };
    Ok(image.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(segments: Vec<(u64, u64)>) -> ModuleSections {
        ModuleSections {
            text_svma: None,
            got_svma: None,
            eh_frame_svma: None,
            eh_frame: None,
            eh_frame_hdr_svma: None,
            eh_frame_hdr: None,
            segments,
        }
    }

    fn mapping(start: u64, file_offset: u64) -> Mapping {
        Mapping {
            start,
            end: start + 0x1000,
            file_offset,
            path: "/lib/x.so".to_string(),
        }
    }

    #[test]
    fn base_follows_the_segment_of_the_mapped_offset() {
        // A typical PIE: text at offset 0x1000 / address 0x1000, data at offset 0x2db0 /
        // address 0x3db0 (a segment starting mid-page).
        let s = sections(vec![(0, 0), (0x1000, 0x1000), (0x2db0, 0x3db0)]);
        assert_eq!(
            s.base_avma(&mapping(0x5555_0000_1000, 0x1000)),
            0x5555_0000_0000
        );
        // Its data pages (file offset 0x2000) sit at base + 0x3000.
        assert_eq!(
            s.base_avma(&mapping(0x5555_0000_3000, 0x2000)),
            0x5555_0000_0000
        );
        // A non-PIE executable stated at 0x400000 is mapped where it says.
        let s = sections(vec![(0, 0x40_0000), (0x1000, 0x40_1000)]);
        assert_eq!(s.base_avma(&mapping(0x40_1000, 0x1000)), 0);
    }

    #[test]
    fn reads_this_test_binarys_unwind_sections() {
        let exe = std::env::current_exe().unwrap();
        let s = ModuleSections::read_file(&exe).unwrap();
        assert!(s.has_cfi(), "Rust binaries have .eh_frame");
        assert!(s.eh_frame_hdr.is_some() && s.text_svma.is_some());
        let err = ModuleSections::read_file(Path::new("/nonexistent/lib.so")).unwrap_err();
        assert!(err.contains("/nonexistent/lib.so"), "{err}");
    }

    #[test]
    fn the_vdso_has_unwind_information() {
        match own_vdso() {
            Ok(image) => {
                let s = ModuleSections::parse(&image).unwrap();
                assert!(s.has_cfi(), "the x86_64 vDSO ships .eh_frame");
            }
            Err(e) => crate::skip_test!("{e}"),
        }
    }
}
