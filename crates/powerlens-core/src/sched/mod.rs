//! Scheduler and idle analysis: from a time-ordered stream of [`event::Event`]s to the
//! per-thread and per-CPU figures of the application-centric grid.

pub mod analysis;
pub mod attribution;
pub mod cpu_accounts;
pub mod event;
pub mod name;
pub mod reduced;
pub mod report;
pub mod summary;
pub(crate) mod tid_table;
pub mod tracing_cost;
pub mod untraced;
pub mod wakeups;

#[cfg(test)]
mod tests;
