//! The power model used when no energy meter can be read (virtual machines, containers).
//!
//! A linear model of whole-system CPU power in the number of busy CPUs:
//! `P = idle_w + busy_cpu_w × busy CPUs`, so the energy over an interval is
//! `idle_w × seconds + busy_cpu_w × busy CPU-seconds`. It is coarse by design: it knows
//! nothing of frequency, vector width or idle depth, and every figure it produces is
//! labelled an estimate. The default parameters depend on the kind of machine ([`class`],
//! [`PowerModel::for_machine`]); `powerlens calibrate` fits the two parameters on a
//! machine with a meter; `--power-model FILE` loads them.

pub mod class;

use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;
use class::{Classification, MachineClass, MachineFacts};

/// Parameters of the linear busy-CPU power model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// Name shown in provenance labels, e.g. `server-vcpu-linear` or `calibrated`.
    pub name: String,
    /// Power with every CPU idle, in watts.
    pub idle_w: f64,
    /// Added power per fully busy CPU, in watts.
    pub busy_cpu_w: f64,
    /// Where the parameters come from (a citation, or the calibration run).
    pub source: String,
    /// The class of machine the default parameters were chosen for; absent for a model
    /// file (`--power-model`), whose parameters are the user's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_class: Option<MachineClass>,
    /// Why that class: the facts it was decided from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_class_reason: Option<String>,
}

/// Server default, per vCPU (a hardware thread, or a VM's virtual CPU): the AWS averages
/// of the Cloud Carbon Footprint methodology (Thoughtworks; "Methodology", Appendix I,
/// "Energy Coefficients"), themselves averages over the CPU micro-architectures of AWS
/// instances of SPECpower_ssj2008 results (whole-server wall power at 0% and 100% load,
/// divided by the hardware threads). Watts at 0% load.
pub const SERVER_MIN_W_PER_VCPU: f64 = 0.74;
/// …and at 100% load.
pub const SERVER_MAX_W_PER_VCPU: f64 = 3.5;
/// Desktop default, per hardware thread: the Cloud Carbon Coefficients (ccfcoef) AWS usage
/// coefficients for Coffee Lake, the micro-architecture of Intel's 8th/9th-generation
/// desktop Core i3/i5/i7/i9 (and of the Xeon E-2100/E-2200 built on the same die), from
/// the SPECpower_ssj2008 results of that family: 1.138 W at 0% load…
pub const DESKTOP_MIN_W_PER_THREAD: f64 = 1.14;
/// …and 5.422 W at 100% load.
pub const DESKTOP_MAX_W_PER_THREAD: f64 = 5.42;
/// Laptop default, for the whole machine: the Sandy Bridge laptop (4 cores, HT) of Alex
/// Shi's power-aware scheduling series as quoted by Len Brown (LKML, 11 Apr 2013): `x`
/// spinning shells drew 43.06 W at x = 1 and 59.07 W at x = 2 in "performance" mode, i.e.
/// 16.0 W per added busy CPU and 27.06 W extrapolated to none busy. Beyond one busy thread
/// per physical core the real curve flattens (HT, turbo limits); the model does not.
pub const LAPTOP_IDLE_W: f64 = 27.06;
pub const LAPTOP_BUSY_CPU_W: f64 = 16.0;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("power model is not valid JSON with keys name, idle_w, busy_cpu_w, source: {0}")]
    Syntax(String),
    #[error("power model parameter {name} = {value} must be a finite number ≥ 0")]
    Parameter { name: &'static str, value: f64 },
    #[error("cannot fit a power model: {0}")]
    Fit(String),
}

impl PowerModel {
    /// The default model for a machine: parameters for its class ([`class::classify`]),
    /// per CPU where the source gives them per CPU, scaled by its logical CPUs.
    pub fn for_machine(facts: &MachineFacts) -> Self {
        Self::for_class(&class::classify(facts), facts.logical_cpus)
    }

    /// The default model for a class decided elsewhere, on a machine of `logical_cpus`
    /// (0, unknown, counts as 1).
    pub fn for_class(c: &Classification, logical_cpus: usize) -> Self {
        let n = logical_cpus.max(1);
        let per_cpu = |name: &str, min_w: f64, max_w: f64, source: String| PowerModel {
            name: name.into(),
            idle_w: min_w * n as f64,
            busy_cpu_w: max_w - min_w,
            source: format!(
                "{source}: {min_w} W per {unit} idle, {max_w} W at full load, × {n} {unit}s",
                unit = if c.virtual_machine { "vCPU" } else { "CPU" }
            ),
            machine_class: Some(c.class),
            machine_class_reason: Some(c.reason.clone()),
        };
        let server_source =
            "Cloud Carbon Footprint methodology, AWS average of SPECpower_ssj2008 servers";
        match c.class {
            MachineClass::Server => per_cpu(
                "server-vcpu-linear",
                SERVER_MIN_W_PER_VCPU,
                SERVER_MAX_W_PER_VCPU,
                server_source.into(),
            ),
            MachineClass::Desktop => per_cpu(
                "desktop-thread-linear",
                DESKTOP_MIN_W_PER_THREAD,
                DESKTOP_MAX_W_PER_THREAD,
                "Cloud Carbon Coefficients, Coffee Lake (desktop Core 8th/9th gen) from SPECpower_ssj2008".into(),
            ),
            MachineClass::Laptop => PowerModel {
                name: "laptop-linear".into(),
                idle_w: LAPTOP_IDLE_W,
                busy_cpu_w: LAPTOP_BUSY_CPU_W,
                source: "Sandy Bridge laptop, 1 and 2 busy CPUs (Shi/Brown, LKML 2013-04-11)"
                    .into(),
                machine_class: Some(c.class),
                machine_class_reason: Some(c.reason.clone()),
            },
            // Per CPU, so that the estimate grows with the machine rather than assuming a
            // laptop's 27 W for a 128-thread server or a server's for a 4-thread board.
            MachineClass::Unknown => per_cpu(
                "fallback-vcpu-linear",
                SERVER_MIN_W_PER_VCPU,
                SERVER_MAX_W_PER_VCPU,
                format!("{server_source} (the fallback for an unknown class)"),
            ),
        }
    }

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
            machine_class: self.machine_class.map(|c| c.name().to_string()),
            machine_class_reason: self.machine_class_reason.clone(),
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
        machine_class: None,
        machine_class_reason: None,
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
        let mut laptop = class::facts("Intel(R) Core(TM) i7-2720QM CPU @ 2.20GHz", 8);
        laptop.chassis_type = Some(10);
        let m = PowerModel::for_machine(&laptop);
        // 2 s wall with 3 busy CPU-seconds: 27.06 × 2 + 16 × 3 = 102.12 J.
        assert!((m.energy_j(2.0, 3.0) - 102.12).abs() < 1e-9);
        assert!(m.provenance().is_estimate());
        assert_eq!(m.provenance().label(), "estimated (laptop-linear)");
    }

    #[test]
    fn a_server_is_charged_per_vcpu() {
        // A 128-thread EPYC: 0.74 W × 128 idle, 3.5 − 0.74 = 2.76 W per busy CPU.
        let m = PowerModel::for_machine(&class::facts("AMD EPYC 7B13 64-Core Processor", 128));
        assert_eq!(m.name, "server-vcpu-linear");
        assert!((m.idle_w - 94.72).abs() < 1e-9, "{}", m.idle_w);
        assert!((m.busy_cpu_w - 2.76).abs() < 1e-9, "{}", m.busy_cpu_w);
        // Every CPU busy for 1 s: the source's 3.5 W per vCPU at full load.
        assert!((m.energy_j(1.0, 128.0) - 3.5 * 128.0).abs() < 1e-9);
        match m.provenance() {
            Provenance::Estimated {
                model,
                parameters,
                machine_class,
                machine_class_reason,
            } => {
                assert_eq!(model, "server-vcpu-linear");
                assert!(
                    parameters.contains("94.72 W idle + 2.76 W per busy CPU"),
                    "{parameters}"
                );
                assert_eq!(machine_class.as_deref(), Some("server"));
                assert!(machine_class_reason.unwrap().contains("EPYC"));
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn a_desktop_and_an_unknown_machine() {
        let d =
            PowerModel::for_machine(&class::facts("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 12));
        assert_eq!(d.name, "desktop-thread-linear");
        assert!((d.idle_w - 1.14 * 12.0).abs() < 1e-9);
        assert!((d.busy_cpu_w - (5.42 - 1.14)).abs() < 1e-9);
        let u = PowerModel::for_machine(&class::facts("Mystery CPU", 4));
        assert_eq!(u.name, "fallback-vcpu-linear");
        assert_eq!(u.machine_class, Some(MachineClass::Unknown));
        assert!((u.idle_w - 0.74 * 4.0).abs() < 1e-9);
        assert!(u.source.contains("fallback"), "{}", u.source);
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
