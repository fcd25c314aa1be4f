//! One module per command; each turns its arguments into options and calls the libraries.

pub mod agent;
pub mod calibrate;
pub mod compare;
pub mod completions;
pub mod demo;
pub mod diff;
pub mod dvfs;
pub mod export;
pub mod info;
pub mod live;
pub mod record;
pub mod report;
pub mod restore;
pub mod run;
pub mod runs;
pub mod sweep;
pub mod top;
pub mod wake;
pub mod workload;
