//! Continuous monitoring: the scheduler analysis fed without end, closed interval by
//! interval into per-process counters, with each interval's energy attributed so that it
//! closes exactly on the node's. What `powerlens agent` exports and `powerlens top` shows.

pub mod cgroup;
pub mod interval;
pub mod processes;
pub mod residency;
pub mod series;

pub use interval::{StreamAnalysis, ThreadInterval};
pub use processes::{ProcessDirectory, ProcessInfo, ProcessKey};
pub use residency::{interval_residency, CpuResidency, IdleStateTime, StateResidency};
pub use series::{
    Basis, Counters, DomainInterval, IntervalInput, IntervalReport, Monitor, MonitorConfig,
    ProcessInterval, ProcessLabels, ProcessSeries, Shown, WakeupEstimate, UNKNOWN_CGROUP,
};
