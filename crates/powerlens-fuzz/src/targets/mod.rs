//! The fuzz targets, one module per parser (or family of readers) of outside input.

pub mod agent;
pub mod chunk;
pub mod compare_csv;
pub mod dvfs;
pub mod maps;
pub mod procfs;
pub mod recording;
pub mod results;
pub mod runtimes;
pub mod settings;
pub mod stack_frames;
pub mod sysfs;
pub mod target_table;
pub mod tracefs;

mod scratch;
