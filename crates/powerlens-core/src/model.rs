//! The power model used when no energy meter can be read (virtual machines, containers).
//!
//! A linear model of whole-system CPU power in the number of busy CPUs:
//! `P = idle_w + busy_cpu_w × busy CPUs`, so the energy over an interval is
//! `idle_w × seconds + busy_cpu_w × busy CPU-seconds`. It is coarse by design: it knows
//! nothing of frequency, vector width or idle depth, and every figure it produces is
//! labelled an estimate. `powerlens calibrate` fits the two parameters on a machine with
//! a meter; `--power-model FILE` loads them.

use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;

/// Parameters of the linear busy-CPU power model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// Name shown in provenance labels, e.g. `default-linear` or `calibrated`.
    pub name: String,
    /// Power with every CPU idle, in watts.
    pub idle_w: f64,
    /// Added power per fully busy CPU, in watts.
    pub busy_cpu_w: f64,
    /// Where the parameters come from (a citation, or the calibration run).
    pub source: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("power model is not valid JSON with keys name, idle_w, busy_cpu_w, source: {0}")]
    Syntax(String),
    #[error("power model parameter {name} = {value} must be a finite number ≥ 0")]
    Parameter { name: &'static str, value: f64 },
    #[error("cannot fit a power model: {0}")]
    Fit(String),
}

impl Default for PowerModel {
    /// Default parameters from the Sandy Bridge laptop (4 cores, HT) measurements in Alex Shi's
    /// power-aware scheduling series as quoted by Len Brown (LKML, 11 Apr 2013):
    /// `x` spinning shells drew 43.06 W at x = 1 and 59.07 W at x = 2 in "performance" mode,
    /// i.e. 16.0 W per added busy CPU and 27.06 W extrapolated to none busy. Beyond one busy
    /// thread per physical core the real curve flattens (HT, turbo limits); the model does not.
    fn default() -> Self {
        PowerModel {
            name: "default-linear".into(),
            idle_w: 27.06,
            busy_cpu_w: 16.0,
            source: "Sandy Bridge laptop, 1 and 2 busy CPUs (Shi/Brown, LKML 2013-04-11)".into(),
        }
    }
}

impl PowerModel {
    /// Parses a model file (the JSON that `powerlens calibrate` writes) and checks it.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let model: PowerModel =
            serde_json::from_str(text).map_err(|e| ModelError::Syntax(e.to_string()))?;
        model.validate()?;
        Ok(model)
    }

    fn validate(&self) -> Result<(), ModelError> {
        for (name, value) in [("idle_w", self.idle_w), ("busy_cpu_w", self.busy_cpu_w)] {
            if !value.is_finite() || value < 0.0 {
                return Err(ModelError::Parameter { name, value });
            }
        }
        Ok(())
    }

    /// Estimated energy in joules over `seconds` during which the CPUs were busy for
    /// `busy_cpu_s` CPU-seconds in total.
    pub fn energy_j(&self, seconds: f64, busy_cpu_s: f64) -> f64 {
        self.idle_w * seconds.max(0.0) + self.busy_cpu_w * busy_cpu_s.max(0.0)
    }

    /// The provenance every estimate from this model carries.
    pub fn provenance(&self) -> Provenance {
        Provenance::Estimated {
            model: self.name.clone(),
            parameters: format!(
                "{:.2} W idle + {:.2} W per busy CPU ({})",
                self.idle_w, self.busy_cpu_w, self.source
            ),
        }
    }
}

/// Result of fitting the model to measured (busy CPUs, watts) points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelFit {
    pub model: PowerModel,
    /// Coefficient of determination of the fit.
    pub r_squared: f64,
    pub points: usize,
}

/// Checks that calibration levels measured what they held: `points[i]` was taken while
/// `held[i]` CPUs were kept busy. Other load on the machine (a build, a browser) shows up as
/// busy CPUs at the idle level and flattens the spread; fitting such points gives nonsense.
pub fn check_levels(points: &[(f64, f64)], held: &[f64]) -> Result<(), ModelError> {
    const TOLERANCE_CPUS: f64 = 0.5;
    for (&(measured, _), &expected) in points.iter().zip(held) {
        if (measured - expected).abs() > TOLERANCE_CPUS {
            return Err(ModelError::Fit(format!(
                "the machine is not quiet: {measured:.2} CPUs were busy while calibrate held {expected}; stop other work (builds, browsers, VMs) and run calibrate again"
            )));
        }
    }
    Ok(())
}

/// Ordinary least squares of watts on busy CPUs.
pub fn fit(points: &[(f64, f64)], source: &str) -> Result<ModelFit, ModelError> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return Err(ModelError::Fit("need at least two load levels".into()));
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return Err(ModelError::Fit(
            "every point has the same number of busy CPUs".into(),
        ));
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.1 - (intercept + slope * p.0)).powi(2))
        .sum();
    let r_squared = if ss_tot == 0.0 {
        1.0
    } else {
        1.0 - ss_res / ss_tot
    };
    let model = PowerModel {
        name: "calibrated".into(),
        idle_w: intercept,
        busy_cpu_w: slope,
        source: source.into(),
    };
    model.validate().map_err(|e| {
        ModelError::Fit(format!(
            "the fitted parameters are not physical ({e}); is the meter reading this machine?"
        ))
    })?;
    Ok(ModelFit {
        model,
        r_squared,
        points: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_by_hand() {
        let m = PowerModel::default();
        // 2 s wall with 3 busy CPU-seconds: 27.06 × 2 + 16 × 3 = 102.12 J.
        assert!((m.energy_j(2.0, 3.0) - 102.12).abs() < 1e-9);
        assert!(m.provenance().is_estimate());
        assert!(m.provenance().label().contains("default-linear"));
    }

    #[test]
    fn fit_recovers_known_line() {
        let pts = [(0.0, 10.0), (1.0, 17.5), (2.0, 25.0), (3.0, 32.5)];
        let f = fit(&pts, "test").unwrap();
        assert!((f.model.idle_w - 10.0).abs() < 1e-9 && (f.model.busy_cpu_w - 7.5).abs() < 1e-9);
        assert!((f.r_squared - 1.0).abs() < 1e-12);
        assert!(fit(&[(1.0, 2.0)], "x").is_err());
        assert!(fit(&[(1.0, 2.0), (1.0, 3.0)], "x").is_err());
        assert!(
            fit(&[(0.0, 10.0), (1.0, 5.0)], "x").is_err(),
            "negative slope is not physical"
        );
    }

    #[test]
    fn busy_machines_are_refused() {
        let quiet = [(0.02, 10.0), (1.01, 17.5), (1.98, 25.0)];
        assert!(check_levels(&quiet, &[0.0, 1.0, 2.0]).is_ok());
        let busy = [(1.99, 24.3), (1.99, 24.9), (2.0, 25.0)];
        let err = check_levels(&busy, &[0.0, 1.0, 2.0])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not quiet") && err.contains("1.99 CPUs"),
            "{err}"
        );
    }

    #[test]
    fn model_files() {
        let m =
            PowerModel::from_json(r#"{"name":"lab","idle_w":5,"busy_cpu_w":9.5,"source":"bench"}"#)
                .unwrap();
        assert_eq!(m.busy_cpu_w, 9.5);
        assert!(matches!(
            PowerModel::from_json(r#"{"name":"x","idle_w":-1,"busy_cpu_w":1,"source":""}"#),
            Err(ModelError::Parameter { name: "idle_w", .. })
        ));
        assert!(matches!(
            PowerModel::from_json("{"),
            Err(ModelError::Syntax(_))
        ));
    }
}
