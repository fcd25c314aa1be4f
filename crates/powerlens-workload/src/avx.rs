//! `avx`: phases of wide-vector code alternating with phases of scalar code.
//!
//! "Dim Silicon and the Case for Improved DVFS Policies": AVX2 and AVX-512 code makes Intel CPUs lower their
//! frequency (a "frequency license") and they raise it again only about 670 µs after the
//! last wide instruction, which slows the scalar code that follows. Alternating U µs of
//! vector and U µs of scalar code reproduces that heterogeneous workload; the phase length
//! relative to the license timeout decides how much the scalar phases suffer.
//!
//! The kernels are also the building blocks of `dvfs measure`: [`Isa`],
//! [`Isa::check_supported`], [`run_kernel_for`] and [`run_kernel_iterations`].

use std::fmt;
use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::compute::repeat_until;
use super::threads::{numbered_names, run_threads, WorkCounts};
use super::{as_seconds, Report};
use crate::error::{invalid_unless, WorkloadError};

/// An instruction set for the multiply-add kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Isa {
    /// Scalar single-precision multiply and add (no vector registers wider than a lane).
    Scalar,
    /// 256-bit FMA on ymm registers (needs AVX2 and FMA).
    Avx2,
    /// 512-bit FMA on zmm registers (needs AVX-512F).
    Avx512,
}

/// The CPU features the kernels may need, in the order they are reported.
const KNOWN_FEATURES: [&str; 4] = ["avx", "avx2", "fma", "avx512f"];

/// Which of the features the kernels may need (avx, avx2, fma, avx512f) a CPU has.
/// `detect` asks this CPU; `from_names` makes up one, so that the error path can be
/// tested on a CPU that has everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFeatures {
    present: Vec<&'static str>,
}

impl CpuFeatures {
    /// The features of the CPU this runs on (runtime detection, cached by std).
    pub fn detect() -> CpuFeatures {
        CpuFeatures {
            present: KNOWN_FEATURES
                .into_iter()
                .filter(|name| detected(name))
                .collect(),
        }
    }

    /// A CPU with exactly these features.
    pub fn from_names(names: &[&'static str]) -> CpuFeatures {
        CpuFeatures {
            present: KNOWN_FEATURES
                .into_iter()
                .filter(|name| names.contains(name))
                .collect(),
        }
    }

    pub fn has(&self, feature: &str) -> bool {
        self.present.contains(&feature)
    }
}

#[cfg(target_arch = "x86_64")]
fn detected(feature: &str) -> bool {
    match feature {
        "avx" => is_x86_feature_detected!("avx"),
        "avx2" => is_x86_feature_detected!("avx2"),
        "fma" => is_x86_feature_detected!("fma"),
        "avx512f" => is_x86_feature_detected!("avx512f"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected(_feature: &str) -> bool {
    false
}

impl Isa {
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The CPU features the kernel of this ISA executes.
    pub fn required_features(self) -> &'static [&'static str] {
        match self {
            Isa::Scalar => &[],
            Isa::Avx2 => &["avx2", "fma"],
            Isa::Avx512 => &["avx512f"],
        }
    }

    /// Whether this CPU can run the kernel; the error names the ISA, the missing features,
    /// what the CPU has and which ISAs it can run instead.
    pub fn check_supported(self) -> Result<(), String> {
        self.check_supported_on(&CpuFeatures::detect())
    }

    /// [`Isa::check_supported`] against a given feature set.
    pub fn check_supported_on(self, cpu: &CpuFeatures) -> Result<(), String> {
        let missing: Vec<&str> = self
            .required_features()
            .iter()
            .copied()
            .filter(|feature| !cpu.has(feature))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let has = if cpu.present.is_empty() {
            "none of them".to_string()
        } else {
            cpu.present.join(", ")
        };
        let usable: Vec<&str> = Isa::ALL
            .into_iter()
            .filter(|isa| isa.required_features().iter().all(|f| cpu.has(f)))
            .map(Isa::name)
            .collect();
        Err(format!(
            "this CPU cannot run the {} kernel: it lacks the CPU feature{} {} (of {}, it has: {has}); \
             use an ISA it supports: {}",
            self.name(),
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            KNOWN_FEATURES.join(", "),
            usable.join(", "),
        ))
    }

    /// Panics with the reason unless this CPU can run the kernel: running it anyway would
    /// be undefined behaviour (an illegal instruction at best).
    fn assert_supported(self) {
        if let Err(reason) = self.check_supported() {
            panic!("{reason}");
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Independent accumulators per kernel: enough to keep both FMA pipes busy despite the
/// four-cycle FMA latency.
const ACCUMULATORS: usize = 8;
/// Multiply-adds per accumulator per iteration.
const ROUNDS: usize = 4;
/// Iterations between two clock reads in [`run_kernel_for`]: well under a microsecond of
/// work, so phases end on time, and long enough that the clock reads cost little.
const BATCH: u64 = 64;
/// acc ← acc × MUL + ADD has the fixed point 1.0, so the values never overflow or become
/// denormal (which would slow the kernel down for reasons that have nothing to do with ISA).
const MUL: f32 = 0.999_999;
const ADD: f32 = 1.0 - MUL;

/// What one kernel iteration is, for the reports.
pub const KERNEL_ITERATION: &str = "kernel iteration";

/// Runs `n` iterations of the kernel: each is 32 multiply-adds (8 accumulators × 4
/// rounds) one register wide, i.e. 32 scalar, 256 AVX2 or 512 AVX-512 single-precision
/// multiply-adds.
///
/// Panics if this CPU cannot run `isa` (check with [`Isa::check_supported`] first).
pub fn run_kernel_iterations(isa: Isa, n: u64) {
    isa.assert_supported();
    black_box(kernel(isa, n));
}

/// Runs the kernel in batches until `duration` has passed; returns the iterations done
/// (a multiple of 64, at least 64). Panics like [`run_kernel_iterations`].
pub fn run_kernel_for(isa: Isa, duration: Duration) -> u64 {
    run_kernel_until(isa, Instant::now() + duration)
}

/// [`run_kernel_for`] up to an instant, so that phases can end at a shared deadline.
pub fn run_kernel_until(isa: Isa, deadline: Instant) -> u64 {
    isa.assert_supported();
    BATCH
        * repeat_until(deadline, || {
            black_box(kernel(isa, BATCH));
        })
}

/// Dispatches to the kernel of `isa`; the caller has checked that the CPU supports it.
fn kernel(isa: Isa, n: u64) -> f32 {
    match isa {
        Isa::Scalar => scalar_kernel(n),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the callers checked the features that Isa::required_features lists.
        Isa::Avx2 => unsafe { x86::avx2_kernel(n) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx512 => unsafe { x86::avx512_kernel(n) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => unreachable!("checked: no x86-64 vector ISA here"),
    }
}

/// Scalar single-precision multiply-adds. Each accumulator goes through `black_box` once
/// per iteration so that the compiler cannot turn the eight independent chains into SSE
/// vector code: the point of this kernel is that it uses no vector width.
fn scalar_kernel(n: u64) -> f32 {
    let (mul, add) = black_box((MUL, ADD));
    let mut acc = [1.0f32; ACCUMULATORS];
    for _ in 0..n {
        for a in acc.iter_mut() {
            let mut x = *a;
            for _ in 0..ROUNDS {
                x = x * mul + add;
            }
            *a = black_box(x);
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{black_box, ACCUMULATORS, ADD, MUL, ROUNDS};
    use std::arch::x86_64::*;

    /// Defines one FMA kernel per vector width from a single body, so that the ISAs differ
    /// only in register width: same accumulators, same rounds, same dependency chains.
    macro_rules! fma_kernel {
        ($name:ident, $features:literal, $lanes:literal, $set1:ident, $fmadd:ident, $storeu:ident) => {
            #[target_feature(enable = $features)]
            pub fn $name(n: u64) -> f32 {
                let (mul, add) = black_box(($set1(MUL), $set1(ADD)));
                let mut acc = [$set1(1.0); ACCUMULATORS];
                for _ in 0..n {
                    for _ in 0..ROUNDS {
                        for a in acc.iter_mut() {
                            *a = $fmadd(*a, mul, add);
                        }
                    }
                }
                let mut lanes = [0f32; $lanes];
                let mut total = 0.0;
                for a in acc {
                    // SAFETY: `lanes` has room for every float of one register.
                    unsafe { $storeu(lanes.as_mut_ptr(), a) };
                    total += lanes.iter().sum::<f32>();
                }
                total
            }
        };
    }

    fma_kernel!(
        avx2_kernel,
        "avx2,fma",
        8,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_storeu_ps
    );
    fma_kernel!(
        avx512_kernel,
        "avx512f",
        16,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_storeu_ps
    );
}

#[derive(Debug, Clone, Serialize)]
pub struct AvxOptions {
    /// The ISA of the vector phases (with `Scalar`, both phases are scalar).
    pub isa: Isa,
    /// Threads, each alternating phases on its own (≥ 1).
    pub threads: usize,
    /// Length of each vector phase and of each scalar phase (> 0).
    #[serde(rename = "phase_s", serialize_with = "as_seconds")]
    pub phase: Duration,
    /// How long the whole run lasts (> 0).
    #[serde(rename = "duration_s", serialize_with = "as_seconds")]
    pub duration: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct AvxThread {
    /// Vector phases started (each followed by a scalar phase unless the run ended).
    pub phases: u64,
    pub vector_iterations: u64,
    pub scalar_iterations: u64,
}

impl WorkCounts for AvxThread {
    fn work_units(&self) -> u64 {
        self.vector_iterations + self.scalar_iterations
    }
}

pub type AvxReport = Report<AvxOptions, AvxThread>;

pub fn run(options: AvxOptions) -> Result<AvxReport, WorkloadError> {
    options
        .isa
        .check_supported()
        .map_err(WorkloadError::Unsupported)?;
    invalid_unless!(options.threads >= 1, "avx needs at least one thread");
    invalid_unless!(
        !options.phase.is_zero(),
        "avx needs a phase longer than zero"
    );
    invalid_unless!(
        !options.duration.is_zero(),
        "avx needs a duration greater than zero"
    );
    let end = Instant::now() + options.duration;
    let threads = run_threads(&numbered_names("avx", options.threads), |_| {
        let mut done = AvxThread {
            phases: 0,
            vector_iterations: 0,
            scalar_iterations: 0,
        };
        let phase_end = || (Instant::now() + options.phase).min(end);
        loop {
            done.phases += 1;
            done.vector_iterations += run_kernel_until(options.isa, phase_end());
            if Instant::now() >= end {
                return done;
            }
            done.scalar_iterations += run_kernel_until(Isa::Scalar, phase_end());
            if Instant::now() >= end {
                return done;
            }
        }
    })?;
    Ok(Report::new("avx", KERNEL_ITERATION, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_isa_is_named_with_what_the_cpu_has() {
        let avx2_only = CpuFeatures::from_names(&["avx", "avx2", "fma"]);
        assert_eq!(Isa::Avx2.check_supported_on(&avx2_only), Ok(()));
        assert_eq!(Isa::Scalar.check_supported_on(&avx2_only), Ok(()));
        let err = Isa::Avx512.check_supported_on(&avx2_only).unwrap_err();
        assert!(err.contains("avx512 kernel"), "{err}");
        assert!(err.contains("lacks the CPU feature avx512f"), "{err}");
        assert!(err.contains("it has: avx, avx2, fma"), "{err}");
        assert!(err.contains("supports: scalar, avx2"), "{err}");

        let no_fma = CpuFeatures::from_names(&["avx", "avx2"]);
        let err = Isa::Avx2.check_supported_on(&no_fma).unwrap_err();
        assert!(
            err.contains("avx2 kernel") && err.contains("feature fma"),
            "{err}"
        );

        let bare = CpuFeatures::from_names(&[]);
        let err = Isa::Avx512.check_supported_on(&bare).unwrap_err();
        assert!(
            err.contains("it has: none of them") && err.ends_with("supports: scalar"),
            "{err}"
        );
    }

    #[test]
    fn detection_agrees_with_proc_cpuinfo() {
        let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
            eprintln!("skip: /proc/cpuinfo unreadable");
            return;
        };
        let flags: Vec<&str> = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("flags"))
            .map(|l| {
                l.trim_start_matches([' ', '\t', ':'])
                    .split_whitespace()
                    .collect()
            })
            .unwrap_or_default();
        let cpu = CpuFeatures::detect();
        for feature in KNOWN_FEATURES {
            // Detection also needs the OS to save the registers (XSAVE), so it may say no
            // where cpuinfo says yes, never the other way round.
            if cpu.has(feature) {
                assert!(
                    flags.contains(&feature),
                    "{feature} detected but not in cpuinfo"
                );
            }
        }
    }

    /// What holds however the scheduler stretches phases: no more phases than fit, every
    /// phase at least one batch, and a scalar phase after every vector phase but the last.
    fn assert_phases_alternate(thread: &AvxThread, most_phases: u64) {
        assert!((1..=most_phases).contains(&thread.phases), "{thread:?}");
        assert!(
            thread.vector_iterations >= BATCH * thread.phases,
            "{thread:?}"
        );
        assert!(
            thread.scalar_iterations >= BATCH * (thread.phases - 1),
            "{thread:?}"
        );
    }

    #[test]
    fn every_supported_isa_runs_and_an_unsupported_one_is_refused() {
        let _serial = crate::measured_test_lock();
        for isa in Isa::ALL {
            let options = AvxOptions {
                isa,
                threads: 1,
                phase: Duration::from_millis(2),
                duration: Duration::from_millis(20),
            };
            match isa.check_supported() {
                Ok(()) => {
                    run_kernel_iterations(isa, 10);
                    assert!(run_kernel_for(isa, Duration::from_millis(1)) >= BATCH);
                    let report = run(options).unwrap();
                    let thread = &report.threads[0].counts;
                    assert_phases_alternate(thread, 5);
                    assert!(report.wall_s >= 0.02);
                }
                Err(reason) => {
                    eprintln!("this CPU lacks {isa}: {reason}");
                    let err = run(options).unwrap_err().to_string();
                    assert!(err.contains(isa.name()), "{err}");
                }
            }
        }
    }
}
