//! Trace-driven simulation of upclocking policies (the model of docs/DVFS.md).
//!
//! The license C starts at 0. A phase of level L > C first stalls t_down(C→L), then
//! C = L. Work runs at f(C): w µs of level-0 work take w · f(0)/f(C). When the policy
//! upclocks, the core stalls t_up and C becomes the level of the code now running; the
//! rest of the phase runs at the new frequency.

use serde::Serialize;
use thiserror::Error;

use super::breakeven::break_even_us;
use super::policy::Policy;
use super::profile::{Profile, ProfileError, TransitionCosts};
use super::trace::Phase;
use super::Level;
use crate::provenance::Provenance;

/// The profile evaluated at one active-core count, in the form the simulator needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// f(0)/f(level): how much longer work takes under each license.
    slowdown: [f64; 3],
    /// t_down[from][to] in µs (0 unless from < to).
    down_us: [[f64; 3]; 3],
    up_us: f64,
    /// t_BE[license][running level] in µs for running < license; infinite without swing.
    break_even_us: [[f64; 3]; 3],
}

impl Machine {
    pub fn new(ghz: [f64; 3], costs: &TransitionCosts) -> Machine {
        let mut down_us = [[0.0; 3]; 3];
        let mut break_even = [[f64::INFINITY; 3]; 3];
        for low in Level::ALL {
            for high in Level::ALL.into_iter().filter(|h| *h < low) {
                down_us[high.index()][low.index()] = costs.down_us(high, low);
                break_even[low.index()][high.index()] = break_even_us(
                    ghz[high.index()],
                    ghz[low.index()],
                    costs.round_trip_us(high, low),
                )
                .unwrap_or(f64::INFINITY);
            }
        }
        Machine {
            slowdown: ghz.map(|f| ghz[0] / f),
            down_us,
            up_us: costs.up_us,
            break_even_us: break_even,
        }
    }

    /// The machine of `profile` with `active_cores` cores active.
    pub fn from_profile(profile: &Profile, active_cores: u32) -> Result<Machine, ProfileError> {
        Ok(Machine::new(
            profile.bucket(active_cores)?.ghz(),
            &profile.costs,
        ))
    }

    /// Every phase at its own level's frequency, transitions free and instant.
    pub fn ideal_time_us(&self, trace: &[Phase]) -> f64 {
        // A fold from +0.0: `sum` of nothing is -0.0, which would print as "-0.0".
        trace.iter().fold(0.0, |t, p| {
            t + p.duration_us * self.slowdown[p.level.index()]
        })
    }
}

/// The outcome of one policy on one trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    pub policy: String,
    pub total_time_us: f64,
    pub ideal_time_us: f64,
    /// total − ideal: time lost to stalls and to running below the needed frequency.
    pub overhead_us: f64,
    /// License changes, down and up (0→2 counts as one).
    pub transitions: u64,
    /// Wall time running under each license (stalls excluded).
    pub time_normal_us: f64,
    pub time_avx2_us: f64,
    pub time_avx512_us: f64,
    /// Wall time stalled in license changes; the four times add up to the total.
    pub stall_us: f64,
    /// overhead / oracle's overhead; `None` when the oracle has no overhead and this
    /// policy has some (an infinite ratio). 1 when both have none.
    pub overhead_ratio_to_oracle: Option<f64>,
}

/// The state of one simulated core.
struct Core<'m> {
    machine: &'m Machine,
    now_us: f64,
    license: usize,
    /// When code of level ≥ the license last ran: the fixed timeout counts from here.
    last_at_license_us: f64,
    transitions: u64,
    at_level_us: [f64; 3],
    stall_us: f64,
}

impl<'m> Core<'m> {
    fn new(machine: &'m Machine) -> Core<'m> {
        Core {
            machine,
            now_us: 0.0,
            license: 0,
            last_at_license_us: 0.0,
            transitions: 0,
            at_level_us: [0.0; 3],
            stall_us: 0.0,
        }
    }

    fn stall(&mut self, us: f64, license: usize) {
        self.now_us += us;
        self.stall_us += us;
        self.license = license;
        self.transitions += 1;
    }

    fn lower_license(&mut self, to: usize) {
        self.stall(self.machine.down_us[self.license][to], to);
    }

    fn raise_license(&mut self, to: usize) {
        self.stall(self.machine.up_us, to);
    }

    /// Runs `wall_us` of wall time under the current license.
    fn run_wall(&mut self, wall_us: f64) {
        self.now_us += wall_us;
        self.at_level_us[self.license] += wall_us;
    }

    /// Runs `work_us` of level-0 work under the current license.
    fn run_work(&mut self, work_us: f64) {
        self.run_wall(work_us * self.machine.slowdown[self.license]);
    }

    /// A phase under a timeout policy: upclock `timeout_us` after code of the license's
    /// level last ran (the caller picks the timeout for this license and phase level), or
    /// at once on a hinted phase when `hint_upclocks`.
    fn timed_phase(&mut self, phase: &Phase, timeout_us: f64, hint_upclocks: bool) {
        let level = phase.level.index();
        if level > self.license {
            self.lower_license(level);
        } else if level < self.license {
            if hint_upclocks && phase.hint {
                self.raise_license(level);
            } else {
                let deadline = self.last_at_license_us + timeout_us;
                let wall = phase.duration_us * self.machine.slowdown[self.license];
                if self.now_us >= deadline {
                    self.raise_license(level);
                } else if self.now_us + wall <= deadline {
                    // The whole phase runs under the old license; the timer keeps running.
                    self.run_wall(wall);
                    return;
                } else {
                    let before = deadline - self.now_us;
                    let work_done = before / self.machine.slowdown[self.license];
                    self.run_wall(before);
                    self.raise_license(level);
                    self.run_work((phase.duration_us - work_done).max(0.0));
                    self.last_at_license_us = self.now_us;
                    return;
                }
            }
        }
        self.run_work(phase.duration_us);
        self.last_at_license_us = self.now_us;
    }

    fn finish(self, policy: &Policy, ideal_time_us: f64) -> PolicyResult {
        PolicyResult {
            policy: policy.to_string(),
            total_time_us: self.now_us,
            ideal_time_us,
            overhead_us: self.now_us - ideal_time_us,
            transitions: self.transitions,
            time_normal_us: self.at_level_us[0],
            time_avx2_us: self.at_level_us[1],
            time_avx512_us: self.at_level_us[2],
            stall_us: self.stall_us,
            overhead_ratio_to_oracle: None,
        }
    }
}

/// The oracle's two options for the stretch of lower-level phases starting at `start`
/// under `license`: (end of the stretch, time if staying, time if upclocking at once).
/// Both include the stall to re-enter the level of the phase after the stretch, because
/// that is when the stretch has "finished": code of the license's level runs again.
/// Upclocking is costed as one t_up, then the stretch at its own levels, lowering the
/// license where it rises within the stretch.
fn stretch_options(
    machine: &Machine,
    trace: &[Phase],
    start: usize,
    license: usize,
) -> (usize, f64, f64) {
    let mut end = start;
    let mut stay = 0.0;
    let mut eager = machine.up_us;
    let mut eager_license = trace[start].level.index();
    while let Some(phase) = trace.get(end).filter(|p| p.level.index() < license) {
        let level = phase.level.index();
        stay += phase.duration_us * machine.slowdown[license];
        if level > eager_license {
            eager += machine.down_us[eager_license][level];
            eager_license = level;
        }
        eager += phase.duration_us * machine.slowdown[eager_license];
        end += 1;
    }
    if let Some(next) = trace.get(end) {
        let next = next.level.index();
        stay += machine.down_us[license][next];
        eager += machine.down_us[eager_license][next];
    }
    (end, stay, eager)
}

fn run_oracle<'m>(machine: &'m Machine, trace: &[Phase]) -> Core<'m> {
    let mut core = Core::new(machine);
    // Phases before this index belong to a stretch the oracle decided to sit out.
    let mut staying_until = 0;
    for (i, phase) in trace.iter().enumerate() {
        let level = phase.level.index();
        if level > core.license {
            core.lower_license(level);
        } else if level < core.license && i >= staying_until {
            let (end, stay, eager) = stretch_options(machine, trace, i, core.license);
            if eager < stay {
                core.raise_license(level);
            } else {
                staying_until = end;
            }
        }
        core.run_work(phase.duration_us);
    }
    core
}

/// Simulates one policy (without the ratio to the oracle, which needs the oracle run).
pub fn simulate(machine: &Machine, trace: &[Phase], policy: &Policy) -> PolicyResult {
    run_policy(machine, trace, policy).finish(policy, machine.ideal_time_us(trace))
}

fn run_policy<'m>(machine: &'m Machine, trace: &[Phase], policy: &Policy) -> Core<'m> {
    match *policy {
        Policy::Oracle => run_oracle(machine, trace),
        Policy::Fixed { timeout_us } => {
            let mut core = Core::new(machine);
            trace
                .iter()
                .for_each(|p| core.timed_phase(p, timeout_us, false));
            core
        }
        Policy::Hint => {
            let mut core = Core::new(machine);
            let timeout = super::breakeven::HARDWARE_TIMEOUT_US;
            trace
                .iter()
                .for_each(|p| core.timed_phase(p, timeout, true));
            core
        }
        Policy::FixedBreakEven => {
            let mut core = Core::new(machine);
            for p in trace {
                let timeout = machine.break_even_us[core.license][p.level.index()];
                core.timed_phase(p, timeout, false);
            }
            core
        }
    }
}

/// `overhead / oracle_overhead`, see [`PolicyResult::overhead_ratio_to_oracle`].
pub fn overhead_ratio(overhead_us: f64, oracle_overhead_us: f64) -> Option<f64> {
    if oracle_overhead_us > 0.0 {
        Some(overhead_us / oracle_overhead_us)
    } else if overhead_us <= 0.0 {
        Some(1.0)
    } else {
        None
    }
}

/// Frequencies of the bucket a simulation used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frequencies {
    pub normal_ghz: f64,
    pub avx2_ghz: f64,
    pub avx512_ghz: f64,
}

/// One trace under several policies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulation {
    pub provenance: Provenance,
    pub profile: String,
    pub active_cores: u32,
    pub frequencies: Frequencies,
    pub costs: TransitionCosts,
    pub phases: usize,
    /// Sum of phase durations: the trace's work in µs at the normal frequency.
    pub work_us: f64,
    pub rows: Vec<PolicyResult>,
}

/// The longest time a simulation may reach, in µs: up to here f64 times resolve a
/// nanosecond, so transition costs of microseconds still count. Beyond it they vanish in
/// rounding and `total − ideal` can even come out negative (fuzzing found −256 µs for a
/// trace of 1.8e18 µs).
pub const MAX_SIMULATED_US: f64 = 1e12;

/// Why a trace could not be simulated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimulateError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("the trace could take up to {bound_us:e} us of simulated time, more than the simulator resolves to the nanosecond ({MAX_SIMULATED_US:e} us, 11.6 days): simulate a part of it (the durations are in microseconds)")]
    TooLong { bound_us: f64 },
}

/// An upper bound of the time any policy takes on `trace`: every phase at the slowest
/// license, plus one transition per phase at the dearest cost.
fn time_bound_us(machine: &Machine, trace: &[Phase]) -> f64 {
    let slowest = machine.slowdown.iter().fold(1.0, |a: f64, &s| a.max(s));
    let dearest = machine
        .down_us
        .iter()
        .flatten()
        .fold(machine.up_us, |a: f64, &c| a.max(c));
    let work = trace.iter().fold(0.0, |t, p| t + p.duration_us);
    work * slowest + trace.len() as f64 * dearest
}

/// Simulates `policies` on `trace` with `profile` at `active_cores`, each row with its
/// overhead ratio to the oracle (run once more if not among the policies).
pub fn simulate_policies(
    profile: &Profile,
    active_cores: u32,
    trace: &[Phase],
    policies: &[Policy],
) -> Result<Simulation, SimulateError> {
    let bucket = profile.bucket(active_cores)?;
    let machine = Machine::new(bucket.ghz(), &profile.costs);
    let bound_us = time_bound_us(&machine, trace);
    // NaN (an overflowed bound) is refused too.
    if !(0.0..=MAX_SIMULATED_US).contains(&bound_us) {
        return Err(SimulateError::TooLong { bound_us });
    }
    let ideal = machine.ideal_time_us(trace);
    let mut rows: Vec<PolicyResult> = policies
        .iter()
        .map(|p| run_policy(&machine, trace, p).finish(p, ideal))
        .collect();
    let oracle_overhead = match policies.iter().position(|p| *p == Policy::Oracle) {
        Some(i) => rows[i].overhead_us,
        None => run_oracle(&machine, trace).now_us - ideal,
    };
    for row in &mut rows {
        row.overhead_ratio_to_oracle = overhead_ratio(row.overhead_us, oracle_overhead);
    }
    Ok(Simulation {
        provenance: Provenance::estimated(
            "powerlens dvfs phase model (docs/DVFS.md)",
            format!(
                "profile {}, {} active cores ({}), {}/{}/{} GHz, {}",
                profile.name,
                active_cores,
                bucket.label(),
                bucket.normal_ghz,
                bucket.avx2_ghz,
                bucket.avx512_ghz,
                profile.costs.describe()
            ),
        ),
        profile: profile.name.clone(),
        active_cores,
        frequencies: Frequencies {
            normal_ghz: bucket.normal_ghz,
            avx2_ghz: bucket.avx2_ghz,
            avx512_ghz: bucket.avx512_ghz,
        },
        costs: profile.costs,
        phases: trace.len(),
        work_us: trace.iter().fold(0.0, |t, p| t + p.duration_us),
        rows,
    })
}
