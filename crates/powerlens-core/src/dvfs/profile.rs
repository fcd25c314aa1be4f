//! CPU profiles: the maximum frequency per license level and active-core bucket, and the
//! cost of changing license.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::Level;

/// Names of the profiles compiled into powerlens.
pub const BUILTIN_PROFILES: [&str; 2] = ["xeon-gold-6130", "i9-7940x"];

/// The model's transition costs, in µs of stalled execution (the report's Figures 3/4).
pub const DEFAULT_COSTS: TransitionCosts = TransitionCosts {
    normal_to_avx2_us: 17.0,
    normal_to_avx512_us: 24.0,
    avx2_to_avx512_us: 17.0,
    up_us: 10.0,
};

/// A CPU: its frequency table and transition costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub name: String,
    pub buckets: Vec<CoreBucket>,
    pub costs: TransitionCosts,
}

/// The maximum frequencies while `min_cores..=max_cores` cores are active.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreBucket {
    pub min_cores: u32,
    pub max_cores: u32,
    pub normal_ghz: f64,
    pub avx2_ghz: f64,
    pub avx512_ghz: f64,
}

impl CoreBucket {
    /// `1-2`, or `4` for a single core count.
    pub fn label(&self) -> String {
        if self.min_cores == self.max_cores {
            self.min_cores.to_string()
        } else {
            format!("{}-{}", self.min_cores, self.max_cores)
        }
    }

    /// The frequency (GHz) of each level, indexed by [`Level::index`].
    pub fn ghz(&self) -> [f64; 3] {
        [self.normal_ghz, self.avx2_ghz, self.avx512_ghz]
    }
}

/// Stall times of license changes, in µs. Lowering the license ("down") costs depend on
/// the pair; raising it ("up") costs the same from any level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransitionCosts {
    #[serde(default = "default_normal_to_avx2")]
    pub normal_to_avx2_us: f64,
    #[serde(default = "default_normal_to_avx512")]
    pub normal_to_avx512_us: f64,
    #[serde(default = "default_avx2_to_avx512")]
    pub avx2_to_avx512_us: f64,
    #[serde(default = "default_up")]
    pub up_us: f64,
}

fn default_normal_to_avx2() -> f64 {
    DEFAULT_COSTS.normal_to_avx2_us
}
fn default_normal_to_avx512() -> f64 {
    DEFAULT_COSTS.normal_to_avx512_us
}
fn default_avx2_to_avx512() -> f64 {
    DEFAULT_COSTS.avx2_to_avx512_us
}
fn default_up() -> f64 {
    DEFAULT_COSTS.up_us
}

impl Default for TransitionCosts {
    fn default() -> Self {
        DEFAULT_COSTS
    }
}

/// The keys `--cost KEY=US` accepts, in the order of [`TransitionCosts`].
pub const COST_KEYS: [&str; 4] = [
    "normal_to_avx2_us",
    "normal_to_avx512_us",
    "avx2_to_avx512_us",
    "up_us",
];

impl TransitionCosts {
    /// The stall of lowering the license from `from` to `to` (`from < to`); 0 otherwise.
    pub fn down_us(&self, from: Level, to: Level) -> f64 {
        match (from, to) {
            (Level::Normal, Level::Avx2) => self.normal_to_avx2_us,
            (Level::Normal, Level::Avx512) => self.normal_to_avx512_us,
            (Level::Avx2, Level::Avx512) => self.avx2_to_avx512_us,
            _ => 0.0,
        }
    }

    /// t_o of a swing between `high` (the faster, lower level) and `low`: one license
    /// change down and one back up.
    pub fn round_trip_us(&self, high: Level, low: Level) -> f64 {
        self.down_us(high, low) + self.up_us
    }

    /// One line for provenance: `t_down 0->1 17 us, 0->2 24 us, 1->2 17 us, t_up 10 us`.
    pub fn describe(&self) -> String {
        format!(
            "t_down 0->1 {} us, 0->2 {} us, 1->2 {} us, t_up {} us",
            self.normal_to_avx2_us, self.normal_to_avx512_us, self.avx2_to_avx512_us, self.up_us
        )
    }

    /// Overrides one cost from `KEY=VALUE` (keys in [`COST_KEYS`], values in µs).
    pub fn set_from_str(&mut self, assignment: &str) -> Result<(), ProfileError> {
        let bad = || ProfileError::BadCost {
            text: assignment.to_string(),
        };
        let (key, value) = assignment.split_once('=').ok_or_else(bad)?;
        let value: f64 = value.trim().parse().map_err(|_| bad())?;
        if !(0.0..=MAX_COST_US).contains(&value) {
            return Err(bad());
        }
        match key.trim() {
            "normal_to_avx2_us" => self.normal_to_avx2_us = value,
            "normal_to_avx512_us" => self.normal_to_avx512_us = value,
            "avx2_to_avx512_us" => self.avx2_to_avx512_us = value,
            "up_us" => self.up_us = value,
            _ => return Err(bad()),
        }
        Ok(())
    }
}

/// The frequencies a profile may give, in GHz. Real CPUs run at 0.4–6 GHz; beyond these
/// bounds the ratio of two frequencies makes simulated times overflow (fuzzing found a
/// profile of 1e308 GHz giving an infinite time).
pub const GHZ_RANGE: (f64, f64) = (0.001, 1000.0);

/// The longest transition cost a profile may give, in µs (real ones: 10–700 µs).
pub const MAX_COST_US: f64 = 1e6;

/// Why a profile could not be built or used.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProfileError {
    #[error(
        "unknown profile `{name}`: built-in profiles are {builtins}; or pass the path of a TOML/JSON profile file",
        builtins = BUILTIN_PROFILES.join(", ")
    )]
    Unknown { name: String },
    #[error("profile is not valid TOML: {message}")]
    Toml { message: String },
    #[error("profile is not valid JSON: {message}")]
    Json { message: String },
    #[error("profile `{profile}`: {problem}")]
    Invalid { profile: String, problem: String },
    #[error(
        "profile `{profile}` has no bucket for {cores} active cores (buckets: {buckets}); choose --active-cores within them"
    )]
    NoBucket {
        profile: String,
        cores: u32,
        buckets: String,
    },
    #[error(
        "bad transition cost `{text}`: write KEY=US with KEY one of {keys} and US >= 0, e.g. up_us=10",
        keys = COST_KEYS.join(", ")
    )]
    BadCost { text: String },
}

/// The file layout of a user profile (TOML or JSON with the same keys).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    #[serde(rename = "bucket")]
    buckets: Vec<CoreBucket>,
    #[serde(default)]
    transition_us: TransitionCosts,
}

impl Profile {
    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let buckets = match name {
            // Table 1 of the report: maximum turbo frequency of the Xeon Gold 6130.
            "xeon-gold-6130" => [
                (1, 2, 3.7, 3.6, 3.5),
                (3, 4, 3.5, 3.4, 3.1),
                (5, 8, 3.4, 3.1, 2.4),
                (9, 12, 3.1, 2.6, 2.1),
                (13, 16, 2.8, 2.4, 1.9),
            ]
            .map(bucket)
            .to_vec(),
            // Section 6.2.1: the i9-7940X as configured for the simulation, 3.1/2.7/2.4
            // GHz whatever the core count, with the same buckets as the Xeon so tables line
            // up (the chip has 14 cores; the last bucket is there for comparability).
            "i9-7940x" => [(1, 2), (3, 4), (5, 8), (9, 12), (13, 16)]
                .map(|(lo, hi)| bucket((lo, hi, 3.1, 2.7, 2.4)))
                .to_vec(),
            _ => {
                return Err(ProfileError::Unknown {
                    name: name.to_string(),
                })
            }
        };
        Ok(Profile {
            name: name.to_string(),
            buckets,
            costs: DEFAULT_COSTS,
        })
    }

    /// A user profile from the text of a TOML or JSON file (JSON when it starts with `{`).
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let file: ProfileFile = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| ProfileError::Json {
                message: e.to_string(),
            })?
        } else {
            toml::from_str(text).map_err(|e| ProfileError::Toml {
                message: e.to_string(),
            })?
        };
        let profile = Profile {
            name: file.name,
            buckets: file.buckets,
            costs: file.transition_us,
        };
        profile.validate()?;
        Ok(profile)
    }

    /// Checks what the model relies on: ordered, non-overlapping buckets; frequencies in
    /// [`GHZ_RANGE`] that do not rise with the level; costs from 0 to [`MAX_COST_US`].
    pub fn validate(&self) -> Result<(), ProfileError> {
        let invalid = |problem: String| ProfileError::Invalid {
            profile: self.name.clone(),
            problem,
        };
        if self.buckets.is_empty() {
            return Err(invalid("no [[bucket]] entries".into()));
        }
        let mut previous_max = 0;
        for b in &self.buckets {
            if b.min_cores == 0 || b.min_cores > b.max_cores || b.min_cores <= previous_max {
                return Err(invalid(format!(
                    "bucket {} must have 1 <= min_cores <= max_cores and come after the previous bucket",
                    b.label()
                )));
            }
            previous_max = b.max_cores;
            let ghz = b.ghz();
            let (min, max) = GHZ_RANGE;
            if ghz.iter().any(|f| !(min..=max).contains(f)) {
                return Err(invalid(format!(
                    "bucket {}: frequencies must be between {min} and {max} GHz",
                    b.label()
                )));
            }
            if ghz[1] > ghz[0] || ghz[2] > ghz[1] {
                return Err(invalid(format!(
                    "bucket {}: a higher license cannot be faster (need normal_ghz >= avx2_ghz >= avx512_ghz)",
                    b.label()
                )));
            }
        }
        let c = self.costs;
        let costs = [
            c.normal_to_avx2_us,
            c.normal_to_avx512_us,
            c.avx2_to_avx512_us,
            c.up_us,
        ];
        if costs.iter().any(|v| !(0.0..=MAX_COST_US).contains(v)) {
            return Err(invalid(format!(
                "transition costs must be between 0 and {MAX_COST_US:e} us"
            )));
        }
        Ok(())
    }

    /// The bucket that applies with `active_cores` cores active.
    pub fn bucket(&self, active_cores: u32) -> Result<&CoreBucket, ProfileError> {
        self.buckets
            .iter()
            .find(|b| (b.min_cores..=b.max_cores).contains(&active_cores))
            .ok_or_else(|| ProfileError::NoBucket {
                profile: self.name.clone(),
                cores: active_cores,
                buckets: self
                    .buckets
                    .iter()
                    .map(CoreBucket::label)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

fn bucket(
    (min_cores, max_cores, normal_ghz, avx2_ghz, avx512_ghz): (u32, u32, f64, f64, f64),
) -> CoreBucket {
    CoreBucket {
        min_cores,
        max_cores,
        normal_ghz,
        avx2_ghz,
        avx512_ghz,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_pick_the_right_bucket() {
        for name in BUILTIN_PROFILES {
            Profile::builtin(name).unwrap().validate().unwrap();
        }
        let xeon = Profile::builtin("xeon-gold-6130").unwrap();
        assert_eq!(xeon.bucket(10).unwrap().ghz(), [3.1, 2.6, 2.1]);
        assert_eq!(xeon.bucket(2).unwrap().label(), "1-2");
        let err = xeon.bucket(17).unwrap_err().to_string();
        assert!(
            err.contains("no bucket for 17") && err.contains("13-16"),
            "{err}"
        );
    }

    #[test]
    fn unknown_profile_names_the_builtins() {
        let err = Profile::builtin("xeon").unwrap_err().to_string();
        assert!(err.contains("xeon-gold-6130, i9-7940x"), "{err}");
    }

    #[test]
    fn parses_toml_with_default_costs() {
        let text = r#"
            name = "laptop"
            [[bucket]]
            min_cores = 1
            max_cores = 4
            normal_ghz = 4.0
            avx2_ghz = 3.8
            avx512_ghz = 3.0
            [transition_us]
            up_us = 12
        "#;
        let p = Profile::parse(text).unwrap();
        assert_eq!(p.name, "laptop");
        assert_eq!(p.costs.up_us, 12.0);
        assert_eq!(p.costs.normal_to_avx512_us, 24.0);
        assert_eq!(p.bucket(3).unwrap().ghz(), [4.0, 3.8, 3.0]);
    }

    #[test]
    fn parses_json_with_the_same_keys() {
        let text = r#"{"name": "j", "bucket": [{"min_cores": 1, "max_cores": 2,
            "normal_ghz": 3, "avx2_ghz": 2, "avx512_ghz": 1}]}"#;
        let p = Profile::parse(text).unwrap();
        assert_eq!(p.costs, DEFAULT_COSTS);
        assert_eq!(p.buckets[0].label(), "1-2");
    }

    #[test]
    fn rejects_inconsistent_profiles() {
        let faster_avx = r#"name = "x"
            [[bucket]]
            min_cores = 1
            max_cores = 2
            normal_ghz = 3.0
            avx2_ghz = 3.5
            avx512_ghz = 2.0"#;
        let err = Profile::parse(faster_avx).unwrap_err().to_string();
        assert!(err.contains("cannot be faster"), "{err}");
        let typo = "name = \"x\"\n[[bucket]]\nmin_cores = 1\nmax_cores = 1\nnormal = 3\n";
        assert!(matches!(
            Profile::parse(typo),
            Err(ProfileError::Toml { .. })
        ));
    }

    /// Regression (fuzz/regressions/dvfs_profile/normal-ghz-1e308): a frequency of 1e308
    /// GHz passed as "> 0" and the simulated times came out infinite.
    #[test]
    fn frequencies_and_costs_beyond_any_cpu_are_refused() {
        let profile = |normal: &str, up: &str| {
            format!(
                "name = \"x\"\n[[bucket]]\nmin_cores = 1\nmax_cores = 2\nnormal_ghz = {normal}\navx2_ghz = 0.5\navx512_ghz = 0.4\n[transition_us]\nup_us = {up}\n"
            )
        };
        let err = Profile::parse(&profile("1e308", "10"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("between 0.001 and 1000 GHz"), "{err}");
        let err = Profile::parse(&profile("3", "1e300"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("between 0 and 1e6 us"), "{err}");
        assert!(Profile::parse(&profile("1000", "1e6")).is_ok());
        assert!(DEFAULT_COSTS.clone().set_from_str("up_us=1e7").is_err());
    }

    #[test]
    fn costs_can_be_overridden() {
        let mut c = DEFAULT_COSTS;
        c.set_from_str("up_us=16").unwrap();
        c.set_from_str("normal_to_avx2_us = 20").unwrap();
        assert_eq!((c.up_us, c.normal_to_avx2_us), (16.0, 20.0));
        assert_eq!(c.round_trip_us(Level::Normal, Level::Avx2), 36.0);
        assert!(c.set_from_str("sideways=3").is_err());
        assert!(c.set_from_str("up_us=-1").is_err());
    }
}
