//! TEMPORARY stand-in until the sources branch lands (replaced by the real discovery).

use super::{EnergySource, SourceStatus};
use crate::Roots;

pub fn open_best(_roots: &Roots) -> (Option<Box<dyn EnergySource>>, Vec<SourceStatus>) {
    (None, Vec::new())
}
