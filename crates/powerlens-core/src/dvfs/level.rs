//! License levels: which turbo schedule the core runs under.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A frequency license level. The order matters: a higher level is a lower (or equal)
/// frequency, and code of level L needs a license of at least L.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Level 0: scalar and light vector code, the highest turbo schedule.
    Normal = 0,
    /// Level 1: heavy 256-bit (AVX2) or light 512-bit code.
    Avx2 = 1,
    /// Level 2: heavy 512-bit (AVX-512) code, the lowest turbo schedule.
    Avx512 = 2,
}

impl Level {
    /// All levels, lowest first.
    pub const ALL: [Level; 3] = [Level::Normal, Level::Avx2, Level::Avx512];

    /// 0, 1 or 2: the number used in traces and samples, and an array index.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The level with this number, if there is one.
    pub fn from_index(index: u64) -> Option<Level> {
        match index {
            0 => Some(Level::Normal),
            1 => Some(Level::Avx2),
            2 => Some(Level::Avx512),
            _ => None,
        }
    }

    /// Reads `0`/`1`/`2` or the names `normal`/`avx2`/`avx512`.
    pub fn parse(text: &str) -> Option<Level> {
        match text {
            "0" | "normal" => Some(Level::Normal),
            "1" | "avx2" => Some(Level::Avx2),
            "2" | "avx512" => Some(Level::Avx512),
            _ => None,
        }
    }

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
