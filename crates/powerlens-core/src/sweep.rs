//! Parameter sweeps: every combination of parameter values, one row each, with the
//! energy and time to retire the work, the best by each, and ratios to a reference.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compare::Sample;
use crate::stats::Summary;

/// One swept parameter and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub values: Vec<String>,
}

/// A sweep's parameters or reference that do not make a sweep. The messages name no
/// command-line flag: those that are about one parameter or the reference read after
/// its flag, which the command line puts first (`--param "threads": expected …`).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SweepError {
    #[error(
        "{0:?}: expected NAME=V1,V2,… or NAME=FIRST..LAST (e.g. threads=1,2,4 or threads=1..8)"
    )]
    Syntax(String),
    #[error("{name:?} is given twice")]
    Duplicate { name: String },
    #[error("parameter {name:?} has an empty value in {text:?}")]
    EmptyValue { name: String, text: String },
    #[error("range {text:?} is empty or too long (at most 10000 values)")]
    BadRange { text: String },
    #[error("the command uses {{{name}}} but no parameter {name} is given")]
    UnknownPlaceholder { name: String },
    #[error("{name} is not used in the command: add {{{name}}} where its value goes")]
    UnusedParam { name: String },
    #[error("{text:?} matches no combination (values: {known})")]
    UnknownReference { text: String, known: String },
    #[error("combination {0} has no finished runs")]
    NoRuns(String),
}

/// Parses `NAME=V1,V2,…` or `NAME=A..B` (inclusive integer range).
pub fn parse_param(text: &str) -> Result<Param, SweepError> {
    let (name, values) = text
        .split_once('=')
        .ok_or_else(|| SweepError::Syntax(text.into()))?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(SweepError::Syntax(text.into()));
    }
    let values: Vec<String> = match values.split_once("..") {
        Some((a, b)) if !values.contains(',') => {
            let (a, b): (i64, i64) = match (a.trim().parse(), b.trim().parse()) {
                (Ok(a), Ok(b)) => (a, b),
                _ => return Err(SweepError::Syntax(text.into())),
            };
            if b < a || b - a >= 10_000 {
                return Err(SweepError::BadRange { text: text.into() });
            }
            (a..=b).map(|v| v.to_string()).collect()
        }
        _ => values.split(',').map(|v| v.trim().to_string()).collect(),
    };
    if values.iter().any(String::is_empty) {
        return Err(SweepError::EmptyValue {
            name: name.into(),
            text: text.into(),
        });
    }
    Ok(Param {
        name: name.into(),
        values,
    })
}

/// Every combination, the first parameter varying slowest; each as (name, value) pairs in
/// parameter order.
pub fn combinations(params: &[Param]) -> Result<Vec<Vec<(String, String)>>, SweepError> {
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            return Err(SweepError::Duplicate {
                name: p.name.clone(),
            });
        }
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for p in params {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                p.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((p.name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    Ok(combos)
}

/// Names inside `{…}` in a command argument.
fn placeholders(arg: &str) -> impl Iterator<Item = &str> {
    arg.split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// Checks that the command and the parameters match: every `{NAME}` has a parameter and
/// every parameter appears.
pub fn check_command(argv: &[String], params: &[Param]) -> Result<(), SweepError> {
    for name in argv.iter().flat_map(|a| placeholders(a)) {
        if !params.iter().any(|p| p.name == name) {
            return Err(SweepError::UnknownPlaceholder { name: name.into() });
        }
    }
    for p in params {
        let token = format!("{{{}}}", p.name);
        if !argv.iter().any(|a| a.contains(&token)) {
            return Err(SweepError::UnusedParam {
                name: p.name.clone(),
            });
        }
    }
    Ok(())
}

/// The command with one combination's values substituted.
pub fn substitute(argv: &[String], combo: &[(String, String)]) -> Vec<String> {
    argv.iter()
        .map(|a| {
            combo
                .iter()
                .fold(a.clone(), |acc, (n, v)| acc.replace(&format!("{{{n}}}"), v))
        })
        .collect()
}

/// `threads=2,mode=fast` for messages and tables.
pub fn combo_label(combo: &[(String, String)]) -> String {
    combo
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Finds the combination `--reference` names: `V` (one parameter) or `NAME=V[,NAME=V]`.
pub fn find_reference(combos: &[Vec<(String, String)>], text: &str) -> Result<usize, SweepError> {
    let wanted: Vec<(String, String)> = text
        .split(',')
        .map(|part| match part.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), v.trim().to_string()),
            None => (String::new(), part.trim().to_string()),
        })
        .collect();
    combos
        .iter()
        .position(|c| {
            wanted.iter().all(|(n, v)| {
                c.iter()
                    .any(|(cn, cv)| cv == v && (n.is_empty() && c.len() == 1 || cn == n))
            })
        })
        .ok_or_else(|| SweepError::UnknownReference {
            text: text.into(),
            known: combos
                .iter()
                .map(|c| combo_label(c))
                .collect::<Vec<_>>()
                .join("; "),
        })
}

/// One combination's figures (means over its runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub params: BTreeMap<String, String>,
    pub runs: usize,
    pub wall_s: f64,
    pub energy_j: f64,
    pub power_w: f64,
    pub edp_js: f64,
    /// Units of work per joule.
    pub perf_per_watt: f64,
    pub wall_ci95: Option<[f64; 2]>,
    pub energy_ci95: Option<[f64; 2]>,
    /// Ratios to the reference row: time, energy, power, edp.
    pub ratios: BTreeMap<String, f64>,
    pub best_energy: bool,
    pub best_time: bool,
}

/// The result of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub params: Vec<Param>,
    pub reference: BTreeMap<String, String>,
    pub rows: Vec<SweepRow>,
}

/// Builds the rows from each combination's samples; `reference` indexes `combos`.
pub fn analyse(
    params: &[Param],
    combos: &[Vec<(String, String)>],
    samples: &[Vec<Sample>],
    reference: usize,
    work: f64,
) -> Result<Sweep, SweepError> {
    let mut rows = Vec::with_capacity(combos.len());
    for (combo, s) in combos.iter().zip(samples) {
        let summary =
            |f: &dyn Fn(&Sample) -> f64| Summary::of(&s.iter().map(f).collect::<Vec<_>>());
        let (Some(wall), Some(energy)) = (summary(&|x| x.wall_s), summary(&|x| x.energy_j)) else {
            return Err(SweepError::NoRuns(combo_label(combo)));
        };
        let mean = |f: &dyn Fn(&Sample) -> f64| summary(f).map(|s| s.mean).unwrap_or(f64::NAN);
        rows.push(SweepRow {
            params: combo.iter().cloned().collect(),
            runs: s.len(),
            wall_s: wall.mean,
            energy_j: energy.mean,
            power_w: mean(&|x| x.power_w),
            edp_js: mean(&|x| x.energy_j * x.wall_s),
            perf_per_watt: mean(&|x| work / x.energy_j),
            wall_ci95: wall.ci95,
            energy_ci95: energy.ci95,
            ratios: BTreeMap::new(),
            best_energy: false,
            best_time: false,
        });
    }
    let r = rows[reference].clone();
    for row in &mut rows {
        row.ratios = BTreeMap::from([
            ("time".to_string(), row.wall_s / r.wall_s),
            ("energy".to_string(), row.energy_j / r.energy_j),
            ("power".to_string(), row.power_w / r.power_w),
            ("edp".to_string(), row.edp_js / r.edp_js),
        ]);
    }
    let best = |rows: &[SweepRow], key: fn(&SweepRow) -> f64| {
        (0..rows.len()).min_by(|&a, &b| key(&rows[a]).total_cmp(&key(&rows[b])))
    };
    if let Some(i) = best(&rows, |r| r.energy_j) {
        rows[i].best_energy = true;
    }
    if let Some(i) = best(&rows, |r| r.wall_s) {
        rows[i].best_time = true;
    }
    Ok(Sweep {
        params: params.to_vec(),
        reference: combos[reference].iter().cloned().collect(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn params_ranges_and_combinations() {
        let t = parse_param("threads=1..3").unwrap();
        assert_eq!(t.values, ["1", "2", "3"]);
        let m = parse_param("mode = fast, slow").unwrap();
        assert_eq!((m.name.as_str(), m.values.len()), ("mode", 2));
        let c = combinations(&[t.clone(), m.clone()]).unwrap();
        assert_eq!(c.len(), 6);
        assert_eq!(combo_label(&c[1]), "threads=1,mode=slow");
        assert!(matches!(parse_param("threads"), Err(SweepError::Syntax(_))));
        assert!(matches!(
            parse_param("t=3..1"),
            Err(SweepError::BadRange { .. })
        ));
        assert!(matches!(
            parse_param("t=1,,2"),
            Err(SweepError::EmptyValue { .. })
        ));
        assert!(matches!(
            combinations(&[t.clone(), t]),
            Err(SweepError::Duplicate { .. })
        ));
    }

    #[test]
    fn command_placeholders() {
        let p = [parse_param("threads=1,2").unwrap()];
        let cmd = argv(&["spin", "--threads", "{threads}", "--tag=t{threads}"]);
        check_command(&cmd, &p).unwrap();
        assert_eq!(
            substitute(&cmd, &[("threads".into(), "2".into())]),
            argv(&["spin", "--threads", "2", "--tag=t2"])
        );
        assert_eq!(
            check_command(&argv(&["x", "{thread}"]), &p),
            Err(SweepError::UnknownPlaceholder {
                name: "thread".into()
            })
        );
        assert_eq!(
            check_command(&argv(&["x"]), &p),
            Err(SweepError::UnusedParam {
                name: "threads".into()
            })
        );
    }

    #[test]
    fn rows_best_and_reference_by_hand() {
        let p = [parse_param("threads=1,2,4").unwrap()];
        let combos = combinations(&p).unwrap();
        let s = |t: f64, e: f64| {
            vec![Sample {
                wall_s: t,
                energy_j: e,
                power_w: e / t,
                ..Sample::default()
            }]
        };
        // 1 thread: 4 s, 40 J; 2: 2 s, 30 J; 4: 1.5 s, 33 J.
        let samples = [s(4.0, 40.0), s(2.0, 30.0), s(1.5, 33.0)];
        let reference = find_reference(&combos, "1").unwrap();
        let sweep = analyse(&p, &combos, &samples, reference, 1.0).unwrap();
        assert!(sweep.rows[1].best_energy && !sweep.rows[1].best_time);
        assert!(sweep.rows[2].best_time && !sweep.rows[2].best_energy);
        assert_eq!(sweep.rows[1].ratios["energy"], 0.75);
        assert_eq!(sweep.rows[2].ratios["time"], 0.375);
        assert_eq!(sweep.rows[1].power_w, 15.0);
        assert_eq!(find_reference(&combos, "threads=4").unwrap(), 2);
        assert!(matches!(
            find_reference(&combos, "3"),
            Err(SweepError::UnknownReference { .. })
        ));
        assert!(matches!(
            analyse(&p, &combos, &[s(1.0, 1.0), vec![], s(1.0, 1.0)], 0, 1.0),
            Err(SweepError::NoRuns(_))
        ));
    }
}
