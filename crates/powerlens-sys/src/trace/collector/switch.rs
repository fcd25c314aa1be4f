//! Starting and stopping a collector's sources from any thread.

use super::{in_kernel_failed, open_failed};
use crate::perf::PerfCounter;
use crate::trace::in_kernel;
use crate::SysError;

/// Starts and stops a [`Collector`](super::Collector)'s sources from any thread ([`Collector::switch`](super::Collector::switch)).
#[derive(Debug)]
pub struct TraceSwitch {
    pub(super) counters: Vec<(u32, PerfCounter)>,
    /// The in-kernel programs' switch, when the collector serves any.
    pub(super) in_kernel: Option<in_kernel::ControlSwitch>,
}

impl TraceSwitch {
    /// Starts every source on every CPU.
    pub fn enable(&self) -> Result<(), SysError> {
        self.set_in_kernel(true)?;
        self.each(PerfCounter::enable, "PERF_EVENT_IOC_ENABLE")
    }

    /// Stops every source; what is in the rings can still be drained.
    pub fn disable(&self) -> Result<(), SysError> {
        self.set_in_kernel(false)?;
        self.each(PerfCounter::disable, "PERF_EVENT_IOC_DISABLE")
    }

    fn set_in_kernel(&self, on: bool) -> Result<(), SysError> {
        match &self.in_kernel {
            Some(switch) => switch
                .set(on)
                .map_err(|e| in_kernel_failed(format!("BPF_MAP_UPDATE_ELEM of its control: {e}"))),
            None => Ok(()),
        }
    }

    fn each(
        &self,
        op: fn(&PerfCounter) -> std::io::Result<()>,
        what: &str,
    ) -> Result<(), SysError> {
        for (cpu, counter) in &self.counters {
            op(counter).map_err(|e| open_failed(what, *cpu, e))?;
        }
        Ok(())
    }
}
