//! A reduced recording read back: its procfs thread samples, as the per-thread summary the
//! report shows.

use powerlens_core::sched::analysis::SchedSummary;
use powerlens_core::sched::reduced::{self, ThreadSample};
use powerlens_store::recording::RecordingReader;

use crate::{meta, sampler};

pub fn summary(reader: &RecordingReader) -> anyhow::Result<SchedSummary> {
    let mut samples = Vec::new();
    reader.samples(sampler::THREADS, |time_ns, data| {
        let threads = data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| {
                Some(ThreadSample {
                    tid: row[0].as_u64()? as u32,
                    pid: row[1].as_u64()? as u32,
                    comm: row[2].as_str()?.to_string(),
                    cpu_time_ns: row[3].as_u64()?,
                    voluntary: row[4].as_u64()?,
                    nonvoluntary: row[5].as_u64()?,
                })
            })
            .collect();
        samples.push((time_ns, threads));
    })?;
    if samples.is_empty() {
        anyhow::bail!(
            "the reduced recording {} holds no thread samples (it was stopped before the first sample)",
            reader.path().display()
        );
    }
    // A command the recorder started began with the recording: its counters start at zero.
    let target = reader.meta(meta::TARGET)?.unwrap_or_default();
    let all_new = target["kind"] == "command";
    Ok(reduced::summary(samples, all_new))
}
