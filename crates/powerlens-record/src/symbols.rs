//! A recording's call stacks resolved to functions: the stack and module tables read from
//! the file, each distinct frame symbolized once — from the recording's symbol cache when
//! an earlier `record` or `report` filled it, else by reading the modules (ELF symbol
//! tables, kallsyms) — and the new names saved back into the cache.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use powerlens_core::stacks::{
    decode_frames, lookups, FrameRef, FunctionScope, ResolvedStacks, JIT_MODULE,
};
use powerlens_store::recording::{RecordingReader, SymbolRow};
use powerlens_sys::procfs::maps::Mapping;
use powerlens_sys::symbolize::perf_map;
use powerlens_sys::symbolize::{Symbolizer, KERNEL_MODULE};
use powerlens_sys::Roots;

use crate::error::RecordError;
use crate::jit_names::JitNames;

/// What resolving found.
pub struct Resolved {
    pub stacks: ResolvedStacks,
    /// Frames newly symbolized (0 when the cache had them all).
    pub symbolized: usize,
    /// Why the kernel's frames have no names, when they have none.
    pub kernel_note: Option<String>,
    /// Kernel addresses to names, for the kernel functions events carry (timer callbacks;
    /// the recorder stores each as a one-frame stack so that it is symbolized here).
    pub kernel_names: HashMap<u64, String>,
    /// What the caller should tell the user: damaged stacks or symbol cache, a cache that
    /// could not be written, files that changed since the recording ended.
    pub warnings: Vec<String>,
    /// Files left unnamed because they are another build than the one recorded (their
    /// frames show as `FILE [no symbols]`, but debug symbols are not what they lack).
    pub changed_files: Vec<String>,
    /// The frames symbolized here, for the recording's symbol cache ([`save`]).
    pub unsaved: Vec<SymbolRow>,
}

/// When the recording ended, in Unix seconds: its `stop`, or for a recorder that was
/// killed before writing one, its last committed event. `None` when the file does not say.
fn ended_unix_s(reader: &RecordingReader) -> Result<Option<f64>, RecordError> {
    let start = reader.meta(crate::meta::START)?.unwrap_or_default();
    let (Some(unix_s), Some(start_ns)) = (start["unix_s"].as_f64(), start["monotonic_ns"].as_u64())
    else {
        return Ok(None);
    };
    let stop_ns = match reader
        .meta(crate::meta::STOP)?
        .and_then(|v| v["monotonic_ns"].as_u64())
    {
        Some(t) => Some(t),
        None => reader.last_event_ns()?,
    };
    Ok(stop_ns.map(|t| unix_s + t.saturating_sub(start_ns) as f64 / 1e9))
}

/// Why `path` is not the build the recording's frames point into, when it is not: names
/// read from it now would be another build's. `record` names the frames at its end, so
/// this matters when the recorder was killed or the symbol cache is damaged.
///
/// With the build ID recorded with the module: the file's build ID now differs (a rebuild,
/// or a package upgrade, which keeps the package's modification times). Without one (a
/// recording made before they were recorded, a file without a build ID): the file was
/// modified after the recording ended. (A file built and run during the recording, as
/// `record -- cargo test` does, was modified before the end and is named.)
fn another_build(
    path: &str,
    recorded: Option<&String>,
    ended_unix_s: Option<f64>,
) -> Option<String> {
    match recorded {
        Some(recorded) => match powerlens_sys::symbolize::build_id(Path::new(path)) {
            Some(now) if &now == recorded => None,
            Some(now) => Some(format!(
                "the file is another build now (build ID {now}, {recorded} when recorded)"
            )),
            None if Path::new(path).exists() => Some(format!(
                "the file has no build ID now ({recorded} when recorded): it is another build"
            )),
            // Gone: the symbolizer finds nothing to name it from, and says so.
            None => None,
        },
        None => {
            let modified = std::fs::metadata(path).ok()?.modified().ok()?;
            let modified = modified
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_secs_f64();
            let after = modified - ended_unix_s?;
            (after > 0.0).then(|| format!(
                "the file changed {after:.0} s after the recording ended, so names read from it now could belong to another build"
            ))
        }
    }
}

/// Reads and resolves the recording's stacks, and saves the names it found in the
/// recording's symbol cache. `None` when the recording has none.
pub fn resolve(
    reader: &RecordingReader,
    roots: &Roots,
    scope: FunctionScope,
) -> Result<Option<Resolved>, RecordError> {
    let mut resolved = resolve_unsaved(reader, roots, scope)?;
    if let Some(r) = &mut resolved {
        save(reader, r);
    }
    Ok(resolved)
}

/// Saves the names [`resolve_unsaved`] found in the recording's symbol cache; when it
/// cannot (a read-only file), a warning says the next report symbolizes again.
pub fn save(reader: &RecordingReader, resolved: &mut Resolved) {
    let rows = std::mem::take(&mut resolved.unsaved);
    if rows.is_empty() {
        return;
    }
    if let Err(e) = reader.save_symbols(&rows) {
        resolved.warnings.push(format!(
            "the symbols were not cached in the recording ({e}); the next report symbolizes again"
        ));
    }
}

/// [`resolve`] without writing to the recording: a reader that resolves while another
/// thread reads the recording's events saves once that thread is done (a write would wait
/// on its reads, and its reads on the write).
pub fn resolve_unsaved(
    reader: &RecordingReader,
    roots: &Roots,
    scope: FunctionScope,
) -> Result<Option<Resolved>, RecordError> {
    let modules: HashMap<u32, String> = reader.modules()?.into_iter().collect();
    let mut stacks = Vec::new();
    let mut damaged = 0usize;
    let mut rows = 0usize;
    reader.stacks(|id, bytes| {
        rows += 1;
        match decode_frames(bytes) {
            Ok(frames) => stacks.push((id, frames)),
            Err(_) => damaged += 1,
        }
    })?;
    // The recorder numbers stacks 0, 1, 2…: an id past the table's row count is damaged.
    // One flipped into the billions made the resolved table (indexed by id) ask for 96 GB.
    let before = stacks.len();
    stacks.retain(|(id, _)| (*id as usize) < rows);
    damaged += before - stacks.len();
    let mut warnings = Vec::new();
    if stacks.is_empty() {
        if damaged > 0 {
            return Err(RecordError::StacksDamaged {
                damaged,
                path: reader.path().to_path_buf(),
            });
        }
        return Ok(None);
    }
    if damaged > 0 {
        warnings.push(format!(
            "{damaged} damaged stacks in the recording are shown as [no stack]"
        ));
    }
    // A damaged cache would name frames wrongly: it is set aside and the frames are
    // symbolized again (and the cache rewritten) from the files that are still there.
    let cached = if let Some(rows) = reader.symbols_checked()? {
        rows
    } else {
        warnings.push(format!(
            "the symbol cache of {} is damaged (it no longer matches its checksum): symbolizing its frames again",
            reader.path().display()
        ));
        Vec::new()
    };
    let mut names: HashMap<FrameRef, Option<String>> = cached
        .into_iter()
        .map(|r| {
            (
                FrameRef {
                    module: r.module,
                    offset: r.offset,
                },
                r.function,
            )
        })
        .collect();
    // Frames the cache lacks, by module.
    let mut missing: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut seen = HashSet::new();
    for (_, frames) in &stacks {
        for f in lookups(frames) {
            if !names.contains_key(&f) && seen.insert(f) {
                missing.entry(f.module).or_default().push(f.offset);
            }
        }
    }
    let mut kernel_note = None;
    let mut new_rows = Vec::new();
    let mut changed_files = Vec::new();
    if !missing.is_empty() {
        let ended = ended_unix_s(reader)?;
        let build_ids = reader.module_build_ids()?;
        let mut symbolizer = Symbolizer::new(roots);
        let mut jit = JitNames::default();
        for (module, offsets) in missing {
            let path = modules.get(&module).map(String::as_str).unwrap_or("");
            if perf_map::is_perf_map(path) {
                // Without a map (not written yet by a process still running, or deleted)
                // nothing goes to the cache: the next report looks again. A map that does
                // not list a frame's code never will (code is listed when it is made), so
                // those frames are cached unnamed, and not warned about again.
                let Some(named) = jit.name(path, &offsets) else {
                    continue;
                };
                for (offset, function) in offsets.into_iter().zip(named) {
                    names.insert(FrameRef { module, offset }, function.clone());
                    new_rows.push(SymbolRow {
                        module,
                        offset,
                        function,
                    });
                }
                continue;
            }
            if let Some(why) = another_build(path, build_ids.get(&module), ended) {
                // Left unnamed and out of the cache: the next report checks again.
                warnings.push(format!(
                    "{} frames of {path} are not named: {why}; record again with the build you want to see",
                    offsets.len()
                ));
                changed_files.push(path.to_string());
                continue;
            }
            let found = if path == KERNEL_MODULE {
                kernel_note = symbolizer.kernel_unavailable_reason();
                symbolizer.kernel(&offsets)
            } else {
                // Frames are file offsets already: a mapping of the whole file at 0.
                let whole = Mapping {
                    start: 0,
                    end: u64::MAX,
                    file_offset: 0,
                    path: path.to_string(),
                };
                symbolizer.user(std::slice::from_ref(&whole), &offsets)
            };
            for (offset, symbol) in offsets.into_iter().zip(found) {
                names.insert(FrameRef { module, offset }, symbol.function.clone());
                new_rows.push(SymbolRow {
                    module,
                    offset,
                    function: symbol.function,
                });
            }
        }
        warnings.extend(jit.warnings());
    }
    let kernel = modules
        .iter()
        .find(|(_, path)| path.as_str() == KERNEL_MODULE)
        .map(|(id, _)| *id);
    let kernel_names = names
        .iter()
        .filter(|(f, _)| Some(f.module) == kernel)
        .filter_map(|(f, name)| Some((f.offset, name.clone()?)))
        .collect();
    let lookup = |f: FrameRef| names.get(&f).cloned().flatten();
    let mut shown = modules;
    for path in shown.values_mut() {
        if perf_map::is_perf_map(path) {
            *path = JIT_MODULE.to_string();
        }
    }
    Ok(Some(Resolved {
        stacks: ResolvedStacks::resolve(&stacks, &shown, &lookup, scope),
        symbolized: new_rows.len(),
        kernel_note,
        kernel_names,
        warnings,
        changed_files,
        unsaved: new_rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::stacks::encode_frames;
    use powerlens_store::recording::RecordingWriter;

    /// A stack id damaged into the billions (found while writing the recording fuzz target:
    /// `report` aborted on a 96 GB allocation) is a damaged stack, not a table that size.
    #[test]
    fn a_stack_id_past_the_table_is_damaged_not_allocated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        w.add_module(0, "/nonexistent/module", None).unwrap();
        let mut frames = Vec::new();
        encode_frames(
            &[FrameRef {
                module: 0,
                offset: 16,
            }],
            &mut frames,
        );
        w.add_stack(0, &frames).unwrap();
        w.add_stack(1, &frames).unwrap();
        w.add_stack(4_000_000_000, &frames).unwrap();
        w.finish().unwrap();
        let reader = RecordingReader::open(&path).unwrap();
        let roots = Roots {
            sysfs: dir.path().to_path_buf(),
            procfs: dir.path().to_path_buf(),
        };
        let r = resolve(&reader, &roots, FunctionScope::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            r.warnings,
            ["1 damaged stacks in the recording are shown as [no stack]"]
        );
        assert!(r.stacks.describe(4_000_000_000).is_empty());
        assert_eq!(r.stacks.describe(1).len(), 1);
    }

    /// JIT frames are named from the process's perf map when the recording ends, and the
    /// names stay in the recording: a report after the map is deleted names the same
    /// functions. A frame the map does not cover stays unnamed, with a warning, once.
    #[test]
    fn jit_frames_are_named_from_the_perf_map_and_kept_after_it_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("perf-4242.map");
        std::fs::write(
            &map,
            "7f5d68006180 180 JS:*fibonacciHotLoop /srv/hot.js:1:26\n\
             0x00007f69bcec7620 0x00000000000000d8 long Hot.collatzSteps(long)\n",
        )
        .unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        w.add_module(0, map.to_str().unwrap(), None).unwrap();
        // Innermost: in fibonacciHotLoop; its caller's return address in collatzSteps;
        // then an address no line covers.
        let frames = [0x7f5d68006190u64, 0x7f69bcec7621, 0x1000]
            .map(|offset| FrameRef { module: 0, offset });
        let mut blob = Vec::new();
        encode_frames(&frames, &mut blob);
        w.add_stack(0, &blob).unwrap();
        w.finish().unwrap();
        let roots = Roots {
            sysfs: dir.path().to_path_buf(),
            procfs: dir.path().to_path_buf(),
        };
        // Rows show JIT code under one module for every process and run ([jit]).
        let expected = [
            "fibonacciHotLoop /srv/hot.js:1:26 ([jit])",
            "long Hot.collatzSteps(long) ([jit])",
            "[jit] [no symbols] ([jit])",
        ];
        let reader = RecordingReader::open(&path).unwrap();
        let first = resolve(&reader, &roots, FunctionScope::default())
            .unwrap()
            .unwrap();
        assert_eq!(first.stacks.describe(0), expected);
        assert_eq!(first.symbolized, 3);
        assert_eq!(
            first.warnings,
            [format!(
                "1 of 3 frames of JIT code are not in {} (code the runtime does not list, such as its own stubs, or code compiled after the map was read)",
                map.display()
            )]
        );
        drop(reader);
        std::fs::remove_file(&map).unwrap();
        let reader = RecordingReader::open(&path).unwrap();
        let again = resolve(&reader, &roots, FunctionScope::default())
            .unwrap()
            .unwrap();
        assert_eq!(again.stacks.describe(0), expected);
        assert_eq!(again.symbolized, 0);
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    }

    /// A map not there when the recording ends (a JVM still running writes it at its
    /// exit) leaves the frames out of the cache, with a warning: a later report names them
    /// once the map is there.
    #[test]
    fn a_perf_map_written_after_the_recording_is_read_by_the_next_report() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("perf-77.map");
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        w.add_module(0, map.to_str().unwrap(), None).unwrap();
        let mut blob = Vec::new();
        encode_frames(
            &[FrameRef {
                module: 0,
                offset: 0x7f69bcec7630,
            }],
            &mut blob,
        );
        w.add_stack(0, &blob).unwrap();
        w.finish().unwrap();
        let roots = Roots {
            sysfs: dir.path().to_path_buf(),
            procfs: dir.path().to_path_buf(),
        };
        let reader = RecordingReader::open(&path).unwrap();
        let before = resolve(&reader, &roots, FunctionScope::default())
            .unwrap()
            .unwrap();
        assert_eq!(before.stacks.describe(0), ["[jit] [no symbols] ([jit])"]);
        assert_eq!(before.symbolized, 0);
        assert!(
            before.warnings[0].starts_with(&format!(
                "1 frames of JIT code are not named: there is no perf map at {}",
                map.display()
            )),
            "{:?}",
            before.warnings
        );
        std::fs::write(
            &map,
            "0x00007f69bcec7620 0x00000000000000d8 long Hot.collatzSteps(long)\n",
        )
        .unwrap();
        let after = resolve(&reader, &roots, FunctionScope::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            after.stacks.describe(0),
            ["long Hot.collatzSteps(long) ([jit])"]
        );
        assert!(after.warnings.is_empty(), "{:?}", after.warnings);
    }

    /// A recording whose recorder was killed is named at its first report, from the files
    /// as they are then: a file modified after the recording ended is left unnamed, with a
    /// warning, out of the cache and out of the "install debug symbols" note; one modified
    /// before its end (built and run during the recording) is named as usual. The end is
    /// the `stop`, else the last committed event.
    #[test]
    fn a_file_changed_after_the_recording_is_not_named_from() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("program");
        std::fs::copy(std::env::current_exe().unwrap(), &module).unwrap();
        let modified = std::fs::metadata(&module)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let roots = Roots {
            sysfs: dir.path().to_path_buf(),
            procfs: dir.path().to_path_buf(),
        };
        let actual = powerlens_sys::symbolize::build_id(&module).expect("a test binary has one");
        let changed = "the file changed 99 s after the recording ended";
        let rebuilt =
            format!("the file is another build now (build ID {actual}, 00ff when recorded)");
        // (start's Unix time, stop's monotonic ns or a last event's; 1 s = 1e9 ns after
        // the start's 5e9; the build ID recorded): why the program is not named, if not.
        let cases = [
            (
                "ended 99 s before the change",
                modified - 100.0,
                Some(6_000_000_000u64),
                None,
                Some(changed),
            ),
            (
                "killed, last event 99 s before",
                modified - 100.0,
                None,
                None,
                Some(changed),
            ),
            (
                "ended 101 s after the change",
                modified + 100.0,
                Some(6_000_000_000u64),
                None,
                None,
            ),
            // With a build ID, the build decides, not the time: a file touched since is
            // still the build; a package upgrade keeps older modification times.
            (
                "the same build, modified after the end",
                modified - 100.0,
                Some(6_000_000_000u64),
                Some(actual.as_str()),
                None,
            ),
            (
                "another build, modified before the end",
                modified + 100.0,
                Some(6_000_000_000u64),
                Some("00ff"),
                Some(rebuilt.as_str()),
            ),
        ];
        for (i, (what, start_unix_s, stop_ns, build_id, unnamed)) in cases.into_iter().enumerate() {
            let named = unnamed.is_none();
            let path = dir.path().join(format!("{i}.rec"));
            let mut w = RecordingWriter::create(&path).unwrap();
            w.set_meta(
                crate::meta::START,
                &serde_json::json!({"unix_s": start_unix_s, "monotonic_ns": 5_000_000_000u64}),
            )
            .unwrap();
            match stop_ns {
                Some(t) => w
                    .set_meta(crate::meta::STOP, &serde_json::json!({"monotonic_ns": t}))
                    .unwrap(),
                None => {
                    let mut enc = powerlens_core::codec::ChunkEncoder::new();
                    enc.push(&powerlens_core::sched::event::Event {
                        time_ns: 6_000_000_000,
                        cpu: 0,
                        kind: powerlens_core::sched::event::EventKind::IdleExit,
                    });
                    w.append_chunk(0, 6_000_000_000, 6_000_000_000, 1, &enc.finish())
                        .unwrap();
                }
            }
            w.add_module(0, module.to_str().unwrap(), build_id).unwrap();
            let mut frames = Vec::new();
            encode_frames(
                &[FrameRef {
                    module: 0,
                    offset: 4096,
                }],
                &mut frames,
            );
            w.add_stack(0, &frames).unwrap();
            w.finish().unwrap();
            let reader = RecordingReader::open(&path).unwrap();
            let r = resolve(&reader, &roots, FunctionScope::default())
                .unwrap()
                .unwrap();
            if named {
                assert_eq!(r.symbolized, 1, "{what}: {:?}", r.warnings);
                assert!(
                    r.changed_files.is_empty() && r.warnings.is_empty(),
                    "{what}"
                );
            } else {
                assert_eq!(r.symbolized, 0, "{what}: nothing read or cached");
                assert_eq!(r.changed_files, [module.to_str().unwrap()], "{what}");
                let warning = r.warnings.join("\n");
                assert!(
                    warning.starts_with(&format!(
                        "1 frames of {} are not named: {}",
                        module.display(),
                        unnamed.unwrap()
                    )),
                    "{what}: {warning}"
                );
                assert!(reader.symbols().unwrap().is_empty(), "{what}: cached");
            }
        }
    }
}
