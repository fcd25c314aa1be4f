//! Views of powerlens: terminal tables, JSON, CSV and Markdown. Takes analysed values in,
//! returns strings; never measures anything.

pub mod compare;
pub mod dvfs;
pub mod info;
pub mod recording;
pub mod run;
pub mod svg;
pub mod sweep;
pub mod table;
pub mod wake;
