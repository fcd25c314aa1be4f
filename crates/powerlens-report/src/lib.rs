//! Views of powerlens: terminal tables, JSON, CSV and Markdown. Takes analysed values in,
//! returns strings; never measures anything.

pub mod dvfs;
pub mod run;
pub mod table;
