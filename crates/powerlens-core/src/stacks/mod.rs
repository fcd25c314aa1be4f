//! Call stacks: how a recording stores them, how they are resolved to functions, and the
//! per-function analysis built on the scheduler analysis.
//!
//! A recorded stack is a list of frames, innermost first, each a module (an id in the
//! recording's module table: an executable file, `[kernel]`, `[vdso]`…) and an offset in
//! it (the file offset for files, the address for the kernel). Frame 0 is where the event
//! happened; every later frame is a return address, which points just after its call:
//! symbolization looks up `offset − 1` for those so that a call ending a function is not
//! named after the next one.

pub mod attribution;
pub mod grid;
pub mod hold;
pub mod interpreters;
pub mod locks;
pub mod modes;
mod system;

pub use system::{is_kernel_or_c_runtime, is_system_module, FunctionScope};

use std::collections::HashMap;

use crate::codec::{put_varint, CodecError, Reader};
use crate::sched::event::{KeyMap, StackId};

/// The stack of an event that was recorded without one (or whose stack was lost).
pub const NO_STACK: StackId = StackId::MAX;

/// One frame of a recorded stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameRef {
    pub module: u32,
    pub offset: u64,
}

/// Encodes frames as the recording stores them: a varint module id and a varint offset
/// per frame.
pub fn encode_frames(frames: &[FrameRef], out: &mut Vec<u8>) {
    for f in frames {
        put_varint(out, f.module as u64);
        put_varint(out, f.offset);
    }
}

/// Decodes [`encode_frames`]'s bytes; a damaged blob is an error, never a panic.
pub fn decode_frames(bytes: &[u8]) -> Result<Vec<FrameRef>, CodecError> {
    let mut r = Reader {
        data: bytes,
        pos: 0,
    };
    let mut out = Vec::new();
    while r.pos < bytes.len() {
        let module = r.varint()?;
        let offset = r.varint()?;
        out.push(FrameRef {
            module: u32::try_from(module).unwrap_or(u32::MAX),
            offset,
        });
    }
    Ok(out)
}

/// The frames to look up for a stack, innermost first: frame 0 as it is, every return
/// address one byte back, inside the call that it follows.
pub fn lookups(frames: &[FrameRef]) -> impl Iterator<Item = FrameRef> + '_ {
    frames.iter().enumerate().map(|(depth, f)| FrameRef {
        module: f.module,
        offset: if depth == 0 {
            f.offset
        } else {
            f.offset.saturating_sub(1)
        },
    })
}

/// The name of a module's code that has no symbol: `libcrypto.so.3 [no symbols]`.
pub fn unnamed(module: &str) -> String {
    format!("{} {NO_SYMBOLS}", short(module))
}

/// The module that function rows give JIT code, whichever process ran it: the recording
/// files it under the process's perf map (`/tmp/perf-PID.map`, to find the names), but a
/// row's module must not change from run to run, or `diff` could not match a JavaScript
/// function with itself.
pub const JIT_MODULE: &str = "[jit]";

/// What marks a module's unnamed code ([`unnamed`]).
pub const NO_SYMBOLS: &str = "[no symbols]";

/// A function (or, where symbols are missing, a module's unnamed code) that frames resolve
/// to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Function {
    /// The symbol name, demangled; `module [no symbols]` ([`unnamed`]) when the module's
    /// symbols do not cover the frame.
    pub name: String,
    /// The module's path (`[kernel]` for the kernel).
    pub module: String,
    /// Whether the frame was resolved to a symbol.
    pub resolved: bool,
    /// Folds into its caller in the function view ([`FunctionScope::folds`]).
    pub system: bool,
}

/// Index of a [`Function`] in [`ResolvedStacks::functions`].
pub type FunctionId = u32;

/// Every stack of a recording resolved to functions, interned.
#[derive(Debug, Clone, Default)]
pub struct ResolvedStacks {
    pub functions: Vec<Function>,
    /// By [`StackId`]: the stack's functions, innermost first (consecutive frames of one
    /// function — recursion aside — kept as they are).
    stacks: Vec<Vec<FunctionId>>,
    /// By [`StackId`]: the innermost frame in the program's own code, else the innermost
    /// frame.
    innermost_user: Vec<Option<FunctionId>>,
}

/// What the symbolizer says about one frame: the function name, or `None`.
pub type SymbolLookup<'a> = dyn Fn(FrameRef) -> Option<String> + 'a;

impl ResolvedStacks {
    /// Resolves `stacks` (by id; an id without frames is an empty stack) with the module
    /// table (`id → path`) and a symbol lookup, for the function view of `scope`.
    pub fn resolve(
        stacks: &[(StackId, Vec<FrameRef>)],
        modules: &HashMap<u32, String>,
        symbol: &SymbolLookup<'_>,
        scope: FunctionScope,
    ) -> ResolvedStacks {
        let mut out = ResolvedStacks::default();
        // Per module, what every frame of it shares (its path, whether it is the system's,
        // its unnamed row), worked out once; frames and functions in fast-hashed tables.
        // A default recording resolves ~18,000 frames (2,000 distinct) before the pass.
        let mut module_facts: KeyMap<u32, (String, bool)> = KeyMap::default();
        let mut function_ids: KeyMap<Function, FunctionId> = KeyMap::default();
        let mut frame_cache: KeyMap<FrameRef, FunctionId> = KeyMap::default();
        for (id, frames) in stacks {
            let i = *id as usize;
            if out.stacks.len() <= i {
                out.stacks.resize(i + 1, Vec::new());
                out.innermost_user.resize(i + 1, None);
            }
            let mut resolved = Vec::with_capacity(frames.len());
            for (frame, lookup) in frames.iter().zip(lookups(frames)) {
                let fid = *frame_cache.entry(lookup).or_insert_with(|| {
                    let (module, system) = module_facts.entry(frame.module).or_insert_with(|| {
                        let module = modules
                            .get(&frame.module)
                            .cloned()
                            .unwrap_or_else(|| format!("[module {}]", frame.module));
                        // Stacks are shared by every process: no one main executable
                        // to exempt.
                        let system = scope.folds(&module);
                        (module, system)
                    });
                    // Unnamed code of one module is one row: split by address, a stripped
                    // library's hot code became hundreds of rows of 0.02 s each.
                    let (name, ok) = match symbol(lookup) {
                        Some(name) => (name, true),
                        None => (unnamed(module), false),
                    };
                    let f = Function {
                        system: *system,
                        name,
                        module: module.clone(),
                        resolved: ok,
                    };
                    intern(&mut out.functions, &mut function_ids, f)
                });
                // Consecutive unnamed frames of one module are one: the module's code
                // calling itself tells nothing without names.
                let repeat = resolved.last() == Some(&fid);
                if !repeat || out.functions[fid as usize].resolved {
                    resolved.push(fid);
                }
            }
            out.innermost_user[i] =
                innermost_user(&resolved, &mut out.functions, &mut function_ids);
            out.stacks[i] = resolved;
        }
        out
    }

    /// Stack ids run from 0 to this (ids never recorded have no frames).
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The stack's functions, innermost first; empty for an unknown id or [`NO_STACK`].
    pub fn frames(&self, id: StackId) -> &[FunctionId] {
        self.stacks.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The innermost frame of the program's own code (the user-functions view), else the
    /// innermost frame; `None` for an empty or unknown stack.
    pub fn innermost_user(&self, id: StackId) -> Option<FunctionId> {
        self.innermost_user.get(id as usize).copied().flatten()
    }

    pub fn function(&self, id: FunctionId) -> &Function {
        &self.functions[id as usize]
    }

    /// For every stack id, the first stack id with the same innermost user function (its
    /// own id when it has none): the key to group stacks that differ only in frames the
    /// program does not own.
    pub fn group_by_innermost_user(&self) -> Vec<StackId> {
        let mut first: HashMap<FunctionId, StackId> = HashMap::new();
        (0..self.stacks.len() as StackId)
            .map(|id| match self.innermost_user(id) {
                Some(f) => *first.entry(f).or_insert(id),
                None => id,
            })
            .collect()
    }

    /// The stack as text, innermost first: `function (module file name)` per frame.
    pub fn describe(&self, id: StackId) -> Vec<String> {
        self.frames(id)
            .iter()
            .map(|f| {
                let f = self.function(*f);
                format!("{} ({})", f.name, short(&f.module))
            })
            .collect()
    }
}

/// The id of `f` in `functions`, added when it is new.
fn intern(
    functions: &mut Vec<Function>,
    ids: &mut KeyMap<Function, FunctionId>,
    f: Function,
) -> FunctionId {
    let next = functions.len() as FunctionId;
    match ids.entry(f) {
        std::collections::hash_map::Entry::Occupied(o) => *o.get(),
        std::collections::hash_map::Entry::Vacant(v) => {
            functions.push(v.key().clone());
            *v.insert(next)
        }
    }
}

/// A stack's innermost frame of the program's own code: neither the system's nor an
/// interpreter's ([`interpreters`]); when only interpreter frames are the program's, the
/// interpreter's row; else the innermost frame. `None` for an empty stack.
fn innermost_user(
    frames: &[FunctionId],
    functions: &mut Vec<Function>,
    ids: &mut KeyMap<Function, FunctionId>,
) -> Option<FunctionId> {
    let mut interpreter = None;
    for &f in frames {
        let function = &functions[f as usize];
        if function.system {
            continue;
        }
        match interpreters::interpreter_row(&function.module) {
            Some(row) => {
                interpreter.get_or_insert(row);
            }
            None => return Some(f),
        }
    }
    match interpreter {
        Some(row) => Some(intern(functions, ids, row)),
        None => frames.first().copied(),
    }
}

/// A module's file name without its directory.
pub fn short(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// Synthetic stacks for tests, resolved as the symbolizer would resolve recorded ones.
#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::HashMap;

    use super::{FrameRef, ResolvedStacks};
    use crate::sched::event::StackId;

    /// One frame: its module's path and its symbol (`None`: the symbolizer finds none).
    pub type NamedFrame<'a> = (&'a str, Option<&'a str>);

    /// Resolves stacks given innermost first. Each frame gets its own address; return
    /// addresses are named one byte back, as [`super::lookups`] looks them up.
    pub fn resolve(stacks: &[(StackId, Vec<NamedFrame<'_>>)]) -> ResolvedStacks {
        let mut modules: HashMap<String, u32> = HashMap::new();
        let mut names: HashMap<FrameRef, String> = HashMap::new();
        let mut recorded = Vec::new();
        let mut offset = 0x1000;
        for (id, frames) in stacks {
            let mut refs = Vec::new();
            for (depth, (path, name)) in frames.iter().enumerate() {
                let next = modules.len() as u32;
                let module = *modules.entry(path.to_string()).or_insert(next);
                offset += 0x10;
                if let Some(n) = name {
                    let at = if depth == 0 { offset } else { offset - 1 };
                    names.insert(FrameRef { module, offset: at }, n.to_string());
                }
                refs.push(FrameRef { module, offset });
            }
            recorded.push((*id, refs));
        }
        let modules: HashMap<u32, String> = modules.into_iter().map(|(p, id)| (id, p)).collect();
        ResolvedStacks::resolve(
            &recorded,
            &modules,
            &|fr| names.get(&fr).cloned(),
            super::FunctionScope::default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_an_error() {
        let frames = vec![
            FrameRef {
                module: 0,
                offset: 0xffff_ffff_8226_5ec8,
            },
            FrameRef {
                module: 3,
                offset: 0x10e1,
            },
        ];
        let mut bytes = Vec::new();
        encode_frames(&frames, &mut bytes);
        assert_eq!(decode_frames(&bytes).unwrap(), frames);
        assert_eq!(decode_frames(&[]).unwrap(), vec![]);
        assert!(decode_frames(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_frames(&[0x80; 11]).is_err());
    }

    /// The user view skips libc and the kernel; return addresses are looked up one byte
    /// back; a frame without a symbol keeps module+offset.
    #[test]
    fn resolution_picks_the_innermost_user_frame() {
        let modules: HashMap<u32, String> = [
            (0, "[kernel]".to_string()),
            (1, "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string()),
            (2, "/tmp/t".to_string()),
        ]
        .into();
        let f = |module, offset| FrameRef { module, offset };
        let stacks = vec![
            (
                0,
                vec![f(0, 0x100), f(1, 0x200), f(2, 0x1010), f(2, 0x2000)],
            ),
            (2, vec![f(1, 0x200)]),
            (3, vec![f(2, 0x9999)]),
        ];
        let lookup = |fr: FrameRef| -> Option<String> {
            match (fr.module, fr.offset) {
                (0, 0x100) => Some("__schedule".into()),
                (1, 0x1ff..=0x200) => Some("clock_nanosleep".into()),
                // 0x1010 is a return address: looked up at 0x100f, the call's last byte.
                (2, 0x100f) => Some("short_sleeper".into()),
                (2, 0x1fff) => Some("main".into()),
                _ => None,
            }
        };
        let r = ResolvedStacks::resolve(&stacks, &modules, &lookup, FunctionScope::default());
        let name = |id| r.innermost_user(id).map(|f| r.function(f).name.as_str());
        assert_eq!(name(0), Some("short_sleeper"));
        // Only system frames: the innermost one.
        assert_eq!(name(2), Some("clock_nanosleep"));
        assert_eq!(name(3), Some("t [no symbols]"));
        assert!(!r.function(r.innermost_user(3).unwrap()).resolved);
        assert_eq!(name(1), None, "an id never recorded");
        assert_eq!(name(NO_STACK), None);
        assert_eq!(
            r.describe(0),
            vec![
                "__schedule ([kernel])",
                "clock_nanosleep (libc.so.6)",
                "short_sleeper (t)",
                "main (t)"
            ]
        );
    }

    /// Issue 17 point 2: a stripped library's frames at many addresses were as many rows
    /// (`libcrypto.so.3+0x29c368`, `+0x29c2be`, …). Unnamed code of one module is one
    /// function, and consecutive unnamed frames of one module one frame.
    #[test]
    fn unnamed_frames_group_per_module() {
        let modules: HashMap<u32, String> = [
            (1, "/usr/lib/x86_64-linux-gnu/libcrypto.so.3".to_string()),
            (2, "/usr/bin/prog".to_string()),
        ]
        .into();
        let f = |module, offset| FrameRef { module, offset };
        let stacks = vec![
            (0, vec![f(1, 0x29c368), f(1, 0x29c2be), f(2, 0x100)]),
            (1, vec![f(1, 0x1000), f(2, 0x100)]),
            // Two unnamed runs of one module, split by a named frame: two frames.
            (2, vec![f(1, 0x10), f(2, 0x200), f(1, 0x20)]),
        ];
        let lookup = |fr: FrameRef| -> Option<String> {
            match (fr.module, fr.offset) {
                (2, 0xff) => Some("hash_file".into()),
                (2, 0x1ff) => Some("main".into()),
                _ => None,
            }
        };
        let r = ResolvedStacks::resolve(&stacks, &modules, &lookup, FunctionScope::default());
        assert_eq!(
            r.describe(0),
            vec![
                "libcrypto.so.3 [no symbols] (libcrypto.so.3)",
                "hash_file (prog)"
            ]
        );
        assert_eq!(
            r.frames(0)[0],
            r.frames(1)[0],
            "one function for the module"
        );
        assert_eq!(r.frames(2).len(), 3);
        let unnamed: Vec<_> = r.functions.iter().filter(|f| !f.resolved).collect();
        assert_eq!(unnamed.len(), 1, "{unnamed:?}");
    }

    /// Issue 51: a thin front end's CPU time is its library's. In the default view a
    /// frame of any library (`liblzma`, in `/usr/lib`) is the program's and holds the
    /// time; only the C runtime and the kernel fold into their caller. `--program-only`
    /// folds the distribution's libraries too, as every view did before.
    #[test]
    fn the_default_view_charges_the_library_that_did_the_work() {
        let modules: HashMap<u32, String> = [
            (0, "[kernel]".to_string()),
            (1, "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string()),
            (2, "/usr/lib/x86_64-linux-gnu/liblzma.so.5".to_string()),
            (3, "/usr/bin/xz".to_string()),
        ]
        .into();
        let f = |module, offset| FrameRef { module, offset };
        let stacks = vec![
            // Compressing: liblzma's code, called from xz's main.
            (0, vec![f(2, 0x500), f(3, 0x100)]),
            // Writing: the kernel, libc's write(), called from liblzma.
            (1, vec![f(0, 0x10), f(1, 0x20), f(2, 0x600), f(3, 0x100)]),
        ];
        let lookup = |fr: FrameRef| -> Option<String> {
            match (fr.module, fr.offset) {
                (2, 0x500) => Some("lzma_mf_bt4_find".into()),
                (2, 0x5ff) => Some("lzma_code".into()),
                (3, 0xff) => Some("main".into()),
                (1, 0x1f) => Some("write".into()),
                (0, 0x10) => Some("vfs_write".into()),
                _ => None,
            }
        };
        let name = |scope| {
            let r = ResolvedStacks::resolve(&stacks, &modules, &lookup, scope);
            [0, 1].map(|id| r.function(r.innermost_user(id).unwrap()).name.clone())
        };
        assert_eq!(
            name(FunctionScope::Modules),
            ["lzma_mf_bt4_find", "lzma_code"]
        );
        assert_eq!(name(FunctionScope::ProgramOnly), ["main", "main"]);
    }
}
