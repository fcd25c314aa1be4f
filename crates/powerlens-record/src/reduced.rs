//! A reduced recording read back: its procfs thread samples, as the per-thread summary the
//! report shows.

use powerlens_core::sched::analysis::SchedSummary;
use powerlens_core::sched::reduced::{self, ThreadSample};

use crate::error::RecordError;
use crate::header::Header;
use crate::{meta, sampler};

pub fn summary(header: &Header) -> Result<SchedSummary, RecordError> {
    let mut samples = Vec::new();
    for &(time_ns, ref data) in header.samples(sampler::THREADS) {
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
    }
    if samples.is_empty() {
        return Err(RecordError::NoThreadSamples {
            path: header.path().to_path_buf(),
        });
    }
    // A command the recorder started began with the recording: its counters start at zero.
    let all_new = header
        .meta(meta::TARGET)
        .is_some_and(|t| t["kind"] == "command");
    Ok(reduced::summary(samples, all_new))
}
