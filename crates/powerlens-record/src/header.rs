//! What the analysis of a recording reads besides its events — the metadata it looks up,
//! the thread table, the meter, cpuidle, cpufreq and procfs thread samples — read from the
//! store in one trip ([`RecordingReader::header`], one snapshot and one scan of the sample
//! table). [`crate::context`] makes the report's context, span, energy, idle counters and
//! battery figures from it; after this the analysis only goes back to the file for events
//! and stacks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use powerlens_store::recording::{RecordingReader, ThreadRow};
use powerlens_store::StoreError;

use crate::{meta, sampler};

/// The metadata the analysis reads.
const META_KEYS: [&str; 15] = [
    meta::MODE,
    meta::START,
    meta::MACHINE,
    meta::TARGET,
    meta::STOP,
    meta::UNAVAILABLE,
    meta::LOST,
    meta::ENERGY,
    meta::BATTERY,
    meta::STACKS,
    meta::TRACING_COST,
    meta::UNWIND,
    meta::IN_KERNEL,
    meta::UNTRACED_RUNS,
    meta::START_UP,
];

/// The sample kinds the analysis reads (`THREADS` only reduced recordings have).
const SAMPLE_KINDS: [&str; 4] = [
    sampler::ENERGY,
    sampler::CPUIDLE,
    sampler::CPUFREQ,
    sampler::THREADS,
];

/// A recording's header, read once ([`Header::read`]).
#[derive(Debug, Clone)]
pub struct Header {
    path: PathBuf,
    meta: BTreeMap<String, Value>,
    /// The thread table, by tid.
    pub threads: Vec<ThreadRow>,
    samples: BTreeMap<String, Vec<(u64, Value)>>,
}

impl Header {
    pub fn read(reader: &RecordingReader) -> Result<Header, StoreError> {
        let stored = reader.header(&META_KEYS, &SAMPLE_KINDS)?;
        Ok(Header {
            path: reader.path().to_path_buf(),
            meta: stored.meta,
            threads: stored.threads,
            samples: stored.samples,
        })
    }

    /// The recording's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One metadata value; `None` when the recording has none. Only the keys the
    /// analysis reads are kept: asking for another is a mistake in powerlens.
    pub fn meta(&self, key: &str) -> Option<&Value> {
        debug_assert!(
            META_KEYS.contains(&key),
            "{key} is not read into the header"
        );
        self.meta.get(key)
    }

    /// The samples of `kind` (`(time_ns, data)`), in time order, ties in the order they
    /// were appended.
    pub fn samples(&self, kind: &str) -> &[(u64, Value)] {
        debug_assert!(
            SAMPLE_KINDS.contains(&kind),
            "{kind} is not read into the header"
        );
        self.samples.get(kind).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether it is a reduced recording (procfs samples, no trace).
    pub fn is_reduced(&self) -> bool {
        self.meta(meta::MODE).and_then(Value::as_str) == Some(crate::MODE_REDUCED)
    }

    /// When the recording stopped (CLOCK_MONOTONIC ns); 0 when the recorder was killed
    /// before it wrote its end.
    pub fn stop_ns(&self) -> u64 {
        self.meta(meta::STOP)
            .and_then(|s| s["monotonic_ns"].as_u64())
            .unwrap_or(0)
    }
}
