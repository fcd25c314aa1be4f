//! Names for recorded stack frames: user addresses through the process's executable
//! mappings (kept by the recorder, so processes that have exited still symbolize) and the
//! ELF files they map, kernel addresses through kallsyms.
//!
//! User frames go through blazesym by *file offset*: the recorder's mappings give the file
//! and offset of every address, which works the same for executables, PIEs and shared
//! libraries, and needs neither the process nor its load bias any more. ELF symbol tables
//! (`.symtab`, `.dynsym`) are the source of names; DWARF, where present, adds file and
//! line. Rust and C++ names are demangled.
//!
//! A frame that cannot be named keeps its module and offset, so a report can still group
//! and show it (`libfoo.so+0x1234`). Nothing here fails a whole batch.

pub mod jitdump;
pub mod kallsyms;
pub mod perf_map;

use std::collections::HashMap;
use std::path::PathBuf;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Reason, Symbolized};
use serde::{Deserialize, Serialize};

use crate::procfs::maps::Mapping;
use crate::Roots;
use kallsyms::KernelSymbols;

/// Module name of kernel frames.
pub const KERNEL_MODULE: &str = "[kernel]";
/// Module name of user addresses outside every recorded mapping.
pub const UNKNOWN_MODULE: &str = "[unknown]";

/// One symbolized frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Symbol {
    /// The mapped file, a pseudo name (`[vdso]`, `[anon]`, `/path (deleted)`),
    /// [`KERNEL_MODULE`] or [`UNKNOWN_MODULE`].
    pub module: String,
    /// The demangled function name; None when the module has no symbol for the address
    /// (stripped, unreadable, vDSO, JIT code). Kernel module functions read `name [module]`.
    pub function: Option<String>,
    /// File offset in `module` for user frames backed by a file; offset from the mapping's
    /// start for pseudo mappings; the address itself for kernel and unknown frames.
    pub offset: u64,
    /// Source file, from DWARF where the module (or its debug link) has it.
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl std::fmt::Display for Symbol {
    /// The function, or `module+0xoffset` (module by file name) for a frame without one,
    /// so unnamed frames of one library still group and can be looked up with addr2line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.function {
            Some(function) => f.write_str(function),
            None => {
                let module = self.module.rsplit('/').next().unwrap_or(&self.module);
                write!(f, "{module}+{:#x}", self.offset)
            }
        }
    }
}

/// What a module offset resolved to; cached so each distinct frame is looked up once.
#[derive(Debug, Clone, Default)]
struct Resolved {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

/// Symbolizes the frames of one recording or report. Keeps blazesym's parsed files and a
/// cache of every (module, offset) already resolved, so create one and reuse it.
pub struct Symbolizer {
    inner: blazesym::symbolize::Symbolizer,
    /// module path -> file offset -> what it resolved to.
    user_cache: HashMap<String, HashMap<u64, Resolved>>,
    /// Modules that could not be read or parsed, with blazesym's reason.
    failed_modules: HashMap<String, String>,
    /// Modules named from ELF symbols only because their debug information failed.
    debug_info_problems: HashMap<String, String>,
    kallsyms_path: PathBuf,
    /// Loaded on the first kernel frame: a user-only report never pays for kallsyms.
    kernel: Option<Result<KernelSymbols, String>>,
}

impl Symbolizer {
    /// A symbolizer reading kernel symbols from `kallsyms` below the procfs root.
    pub fn new(roots: &Roots) -> Self {
        let inner = blazesym::symbolize::Symbolizer::builder()
            // A stack frame has one function; inlined callees are not shown and cost time.
            .enable_inlined_fns(false)
            // `demangle` below: blazesym would demangle a plain C `w` into `wchar_t`.
            .enable_demangling(false)
            .build();
        Symbolizer {
            inner,
            user_cache: HashMap::new(),
            failed_modules: HashMap::new(),
            debug_info_problems: HashMap::new(),
            kallsyms_path: roots.proc("kallsyms"),
            kernel: None,
        }
    }

    /// Symbolizes user-space addresses of one process given its executable mappings (any
    /// order). The result has one entry per address, in the same order.
    pub fn user(&mut self, maps: &[Mapping], addrs: &[u64]) -> Vec<Symbol> {
        let mut sorted: Vec<&Mapping> = maps.iter().collect();
        sorted.sort_by_key(|m| m.start);
        let located: Vec<Located> = addrs.iter().map(|&a| locate(&sorted, a)).collect();

        self.resolve_missing(&located);

        located
            .into_iter()
            .map(|loc| match loc {
                Located::File { module, offset } => {
                    let resolved = self
                        .user_cache
                        .get(module)
                        .and_then(|m| m.get(&offset))
                        .cloned()
                        .unwrap_or_default();
                    Symbol {
                        module: module.to_string(),
                        function: resolved.function,
                        offset,
                        file: resolved.file,
                        line: resolved.line,
                    }
                }
                Located::Pseudo { module, offset } => unnamed(module, offset),
                Located::Unmapped { addr } => unnamed(UNKNOWN_MODULE, addr),
            })
            .collect()
    }

    /// Looks up, one blazesym batch per module, every file offset not in the cache yet.
    fn resolve_missing(&mut self, located: &[Located]) {
        let mut missing: HashMap<&str, Vec<u64>> = HashMap::new();
        for loc in located {
            if let Located::File { module, offset } = *loc {
                let cached = self
                    .user_cache
                    .get(module)
                    .is_some_and(|m| m.contains_key(&offset));
                if !cached && !self.failed_modules.contains_key(module) {
                    missing.entry(module).or_default().push(offset);
                }
            }
        }
        for (module, mut offsets) in missing {
            offsets.sort_unstable();
            offsets.dedup();
            let results = match self.symbolize_file(module, &offsets) {
                Ok(results) => results,
                Err(reason) => {
                    // Unreadable or not ELF: every frame keeps module+offset; remember so
                    // later batches do not retry, and so a report can say why.
                    self.failed_modules.insert(module.to_string(), reason);
                    continue;
                }
            };
            let cache = self.user_cache.entry(module.to_string()).or_default();
            cache.extend(offsets.into_iter().zip(results));
        }
    }

    /// One module's offsets through blazesym, with debug information first and, when that
    /// fails, from the ELF symbol tables alone: a debug file blazesym cannot read (say,
    /// compressed sections, as Debian's `-dbg` packages ship) must not cost the names that
    /// `.symtab`/`.dynsym` would give.
    fn symbolize_file(&mut self, module: &str, offsets: &[u64]) -> Result<Vec<Resolved>, String> {
        let mut elf = Elf::new(module);
        let input = Input::FileOffset(offsets);
        let debug_error = match self.inner.symbolize(&Source::Elf(elf.clone()), input) {
            Ok(results) => return Ok(results.into_iter().map(resolved).collect()),
            Err(err) => format!("{err:#}"),
        };
        elf.debug_syms = false;
        let results = self
            .inner
            .symbolize(&Source::Elf(elf), input)
            .map_err(|err| format!("{err:#}"))?;
        // Batch mode folds a file that is no ELF at all into one ignored error per
        // address: that is the module failing, for the reason the first try gave.
        let ignored = |r: &Symbolized<'_>| matches!(r, Symbolized::Unknown(Reason::IgnoredError));
        if results.iter().all(ignored) {
            return Err(debug_error);
        }
        self.debug_info_problems
            .insert(module.to_string(), debug_error);
        Ok(results.into_iter().map(resolved).collect())
    }

    /// Modules whose debug information (DWARF, debug links) could not be read, with the
    /// reason: their frames are named from the ELF symbol tables, without file and line.
    pub fn debug_info_problems(&self) -> impl Iterator<Item = (&str, &str)> {
        self.debug_info_problems
            .iter()
            .map(|(m, why)| (m.as_str(), why.as_str()))
    }

    /// Modules whose file could not be read or parsed, with the reason: their frames carry
    /// only module and offset.
    pub fn failed_modules(&self) -> impl Iterator<Item = (&str, &str)> {
        self.failed_modules
            .iter()
            .map(|(m, why)| (m.as_str(), why.as_str()))
    }

    /// Symbolizes kernel addresses against kallsyms. When kallsyms cannot be used (see
    /// [`Self::kernel_unavailable_reason`]) every frame is `[kernel]` with its address.
    pub fn kernel(&mut self, addrs: &[u64]) -> Vec<Symbol> {
        let table = self.kernel_symbols();
        addrs
            .iter()
            .map(|&addr| Symbol {
                module: KERNEL_MODULE.to_string(),
                function: table
                    .and_then(|t| t.lookup(addr))
                    .map(|(name, _)| name.to_string()),
                offset: addr,
                file: None,
                line: None,
            })
            .collect()
    }

    /// Why kernel frames have no names (kallsyms missing, unreadable, or hiding addresses),
    /// with the fix; None when kernel symbols are available.
    pub fn kernel_unavailable_reason(&mut self) -> Option<String> {
        self.kernel_symbols();
        match &self.kernel {
            Some(Err(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    fn kernel_symbols(&mut self) -> Option<&KernelSymbols> {
        let path = &self.kallsyms_path;
        self.kernel
            .get_or_insert_with(|| KernelSymbols::read(path).map_err(|e| e.to_string()))
            .as_ref()
            .ok()
    }
}

/// Where a user address falls, borrowing the module path from the caller's mappings.
#[derive(Debug, Clone, Copy)]
enum Located<'m> {
    /// A file that may have symbols, at this file offset.
    File {
        module: &'m str,
        offset: u64,
    },
    /// A mapping without a usable file, at this offset from its start.
    Pseudo {
        module: &'m str,
        offset: u64,
    },
    Unmapped {
        addr: u64,
    },
}

/// Finds the mapping of `addr` among mappings sorted by start.
fn locate<'m>(sorted: &[&'m Mapping], addr: u64) -> Located<'m> {
    let after = sorted.partition_point(|m| m.start <= addr);
    // The closest start below usually holds it; overlapping mappings (a later mmap over an
    // earlier one) need the scan.
    let mapping = sorted[..after]
        .last()
        .filter(|m| m.contains(addr))
        .or_else(|| sorted.iter().rev().find(|m| m.contains(addr)));
    match mapping {
        None => Located::Unmapped { addr },
        Some(m) if has_symbol_file(&m.path) => Located::File {
            module: &m.path,
            offset: m.file_offset_of(addr),
        },
        // A deleted file's offset is still the file's: it names the same code if the
        // binary turns up again. Pseudo mappings have no file, so the mapping is the frame.
        Some(m) if m.path.ends_with(" (deleted)") => Located::Pseudo {
            module: &m.path,
            offset: m.file_offset_of(addr),
        },
        Some(m) => Located::Pseudo {
            module: &m.path,
            offset: addr - m.start,
        },
    }
}

/// True when `path` names a file to read symbols from: absolute, and neither a pseudo
/// mapping (`[vdso]`, `[anon:…]`) nor a file deleted since it was mapped, whose path may
/// now hold a different build.
fn has_symbol_file(path: &str) -> bool {
    path.starts_with('/') && !path.ends_with(" (deleted)") && !path.starts_with("/memfd:")
}

fn unnamed(module: &str, offset: u64) -> Symbol {
    Symbol {
        module: module.to_string(),
        function: None,
        offset,
        file: None,
        line: None,
    }
}

fn resolved(result: Symbolized<'_>) -> Resolved {
    match result {
        Symbolized::Sym(sym) => Resolved {
            function: Some(demangle(&sym.name)),
            file: sym
                .code_info
                .as_ref()
                .map(|c| c.to_path().to_string_lossy().into_owned()),
            line: sym.code_info.as_ref().and_then(|c| c.line),
        },
        Symbolized::Unknown(_) => Resolved::default(),
    }
}

/// The GNU build ID of the ELF file at `path`, in hex, as `readelf -n` prints it: what
/// tells two builds installed at one path apart (a package upgrade keeps the package's
/// modification times, so a file's mtime does not). `None` when the file is gone, is not
/// ELF, or has no build ID.
///
/// Only a note named `GNU` of type 3 is one: SystemTap's probe notes share the type
/// (`NT_STAPSDT`), and a reader that checks the type alone (blazesym's) took libstdc++'s
/// first probe for the build ID of every library linked with it without one (rustc's
/// own `librustc_driver`). The file is read on demand, not loaded whole.
pub fn build_id(path: &std::path::Path) -> Option<String> {
    use object::Object;
    let file = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let id = elf.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// A symbol name for people: Rust (legacy `_ZN…E` and v0 `_R…`, without the hash) and C++
/// (`_Z…`) names demangled; any other name as it is. Only mangled-looking names are tried:
/// a C++ demangler reads `w`, `s` or `i` as the types `wchar_t`, `short`, `int`.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_R") || name.starts_with("_ZN") {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Some(d) = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|sym| sym.demangle().ok())
        {
            return d;
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests;
