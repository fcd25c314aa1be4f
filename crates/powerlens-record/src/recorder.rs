//! The writing side of a recording in progress: the file created (an existing one moved
//! aside), drained events buffered per ring CPU and written as chunks, samples and thread
//! rows as they come, and the end's metadata.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use powerlens_core::codec::ChunkEncoder;
use powerlens_core::sched::event::EventKind;
use powerlens_store::recording::RecordingWriter;

use crate::error::RecordError;
use crate::{drain, meta, sampler};

/// Events buffered per ring CPU until the next flush.
const CHUNK_EVENTS: usize = 16_384;

/// Creates the recording, moving an existing one aside to `FILE.old` as perf does — with
/// the `-wal`/`-shm` files a killed recorder may have left beside it.
pub(crate) fn create_file(path: &Path, tell_now: fn(&str)) -> Result<RecordingWriter, RecordError> {
    let with_suffix = |p: &Path, suffix: &str| {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    if path.exists() {
        let old = with_suffix(path, ".old");
        for side in ["", "-wal", "-shm", "-journal"] {
            let (from, to) = (with_suffix(path, side), with_suffix(&old, side));
            let _ = std::fs::remove_file(&to);
            if from.exists() {
                std::fs::rename(&from, &to).map_err(|source| RecordError::MoveAside {
                    from: from.clone(),
                    to: to.clone(),
                    source,
                })?;
            }
        }
        tell_now(&format!(
            "moved the existing {} to {}",
            path.display(),
            old.display()
        ));
    }
    Ok(RecordingWriter::create(path)?)
}

/// The writing side of a recording in progress.
pub(crate) struct Recorder {
    pub(crate) writer: RecordingWriter,
    /// Converted events (with their context) per ring CPU, not yet written.
    pending: Vec<(u32, Vec<drain::InContext>)>,
    encoder: ChunkEncoder,
    /// Events written, of them CPU-time samples, and meter/cpuidle/cpufreq readings.
    pub(crate) events: u64,
    pub(crate) cpu_samples: u64,
    pub(crate) samples: u64,
}

impl Recorder {
    pub(crate) fn new(writer: RecordingWriter) -> Recorder {
        Recorder {
            writer,
            pending: Vec::new(),
            encoder: ChunkEncoder::new(),
            events: 0,
            cpu_samples: 0,
            samples: 0,
        }
    }

    /// Adds a drained batch: events to the pending ones, thread rows straight to the file.
    pub(crate) fn take(&mut self, batch: drain::Batch) {
        // Modules and stacks first: events name them. A failure is a failing disk, which
        // the next flush reports.
        // Each file's build ID as it is now, when its first frame is recorded: a report
        // that names frames later (after the recorder was killed, or with a damaged symbol
        // cache) reads names only from the same build.
        for (id, path) in &batch.modules {
            let build_id = path
                .starts_with('/')
                .then(|| powerlens_sys::symbolize::build_id(Path::new(path)))
                .flatten();
            let _ = self.writer.add_module(*id, path, build_id.as_deref());
        }
        for (id, frames) in &batch.stacks {
            let _ = self.writer.add_stack(*id, frames);
        }
        for (cpu, mut events) in batch.events {
            self.cpu_samples += events
                .iter()
                .filter(|(e, _)| matches!(e.kind, EventKind::CpuSample { .. }))
                .count() as u64;
            match self.pending.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, pending)) => pending.append(&mut events),
                None => self.pending.push((cpu, events)),
            }
        }
        for row in batch.threads {
            // A failure here is a failing disk: the next flush reports it.
            let _ = self.writer.upsert_thread(&row);
        }
    }

    pub(crate) fn take_samples(&mut self, samples: impl Iterator<Item = sampler::Sample>) {
        for s in samples {
            if self
                .writer
                .append_sample(s.time_ns, s.kind, &s.data)
                .is_ok()
            {
                // `samples` counts readings of meters, idle states and frequencies (the
                // summary's "meter/idle-state samples"); a command line read is none.
                self.samples += u64::from(s.kind != sampler::COMMANDS);
            }
        }
    }

    /// Writes pending events as chunks (each CPU's in time order) and commits.
    pub(crate) fn flush(&mut self) -> Result<(), RecordError> {
        for (cpu, events) in &mut self.pending {
            // A ring is in write order, which is time order except for records written
            // after an interrupt that nested inside them: sort (stable) to restore it.
            events.sort_by_key(|(e, _)| e.time_ns);
            for chunk in events.chunks(CHUNK_EVENTS) {
                for (e, context) in chunk {
                    self.encoder.push_in_context(e, *context);
                }
                let (first, last) = (chunk[0].0.time_ns, chunk[chunk.len() - 1].0.time_ns);
                let data = self.encoder.finish();
                self.writer
                    .append_chunk(*cpu, first, last, chunk.len() as u32, &data)?;
                self.events += chunk.len() as u64;
            }
            events.clear();
        }
        self.writer.flush()?;
        Ok(())
    }

    /// The last events and the end's metadata, then the file is closed as one
    /// self-contained file (no -wal/-shm beside it). Returns the events and samples written.
    pub(crate) fn finish(
        mut self,
        stop: &Value,
        lost: &[(u32, u64)],
        notes: &[String],
    ) -> Result<(u64, u64), RecordError> {
        self.flush()?;
        self.writer.set_meta(meta::STOP, stop)?;
        self.writer.set_meta(
            meta::LOST,
            &json!(lost
                .iter()
                .map(|(cpu, n)| json!({"cpu": cpu, "lost": n}))
                .collect::<Vec<_>>()),
        )?;
        self.writer.set_meta(meta::NOTES, &json!(notes))?;
        let counts = (self.events, self.samples);
        self.writer.finish()?;
        Ok(counts)
    }
}
