//! Views of powerlens: terminal tables, JSON, CSV, Markdown, self-contained HTML pages
//! (`page`, `html`) and trace exports (Perfetto, Firefox Profiler). Takes analysed values in,
//! returns strings; never measures anything.

pub mod battery_view;
pub mod compare;
pub mod diff;
pub mod dvfs;
pub mod export;
pub mod html;
pub mod info;
pub mod names;
pub mod page;
pub mod recording;
pub mod run;
pub mod stack_tree;
pub mod svg;
pub mod sweep;
pub mod table;
pub mod wake;
