//! The recording's metadata (docs/FORMAT.md): its keys, which readers look up, and what
//! the recorder writes under them at the start.

use serde_json::{json, Value};

use powerlens_core::battery_life::Charged;
use powerlens_core::sched::tracing_cost::{
    UNWIND_STACK_COPY, UNWIND_STACK_COPY_AND_FRAME_POINTERS,
};
use powerlens_store::recording::RecordingWriter;
use powerlens_sys::machine::MachineInfo;
use powerlens_sys::trace::{monotonic_now_ns, Collector};
use powerlens_sys::unwind::UnwindStats;
use powerlens_sys::Roots;

use crate::drain::SampledStacks;
use crate::error::RecordError;
use crate::meter::Meter;
use crate::{stacks, RecordOptions, Target};

pub const MODE: &str = "mode";
pub const TARGET: &str = "target";
pub const MACHINE: &str = "machine";
pub const START: &str = "start";
pub const STOP: &str = "stop";
/// How long the recorder took to start tracing: `start_up_s`, and `tracing_cost_s` of it
/// spent measuring the events' cost (0 when kept from earlier in the boot). Written with
/// the first commit, so that a recorder killed later still says it.
pub const START_UP: &str = "start_up";
pub const EVENTS: &str = "events";
pub const UNAVAILABLE: &str = "unavailable";
pub const ENERGY: &str = "energy";
pub const LOST: &str = "lost_records";
pub const NOTES: &str = "notes";
pub const CODEC: &str = "codec_version";
pub const SAMPLE_INTERVAL: &str = "sample_interval_s";
/// Whether call stacks were recorded, with the cpu-clock rate, or why not:
/// `{"recorded": bool, "cpu_clock_hz": n, "reason": "…"}`.
pub const STACKS: &str = "stacks";
/// How user stacks were unwound (counts), written at the end.
pub const UNWIND: &str = "unwind";
/// The battery behind battery-life figures (`powerlens_core::battery_life::BatterySetup`):
/// its full charge and how its gauge is read; absent without a battery or
/// `--battery-wh`.
pub const BATTERY: &str = "battery";
/// What one traced event of each kind cost the thread it fired in, measured at the
/// start (`powerlens_core::sched::tracing_cost::EventCosts`); absent in reduced
/// recordings and older ones.
pub const TRACING_COST: &str = "tracing_cost";
/// Which tracepoints were collected in the kernel (BPF) and not through perf rings, and
/// why none were where it was asked for: `{"events": [..], "refused": string | null}`;
/// absent in reduced recordings and those made before in-kernel collection.
pub const IN_KERNEL: &str = "in_kernel";
/// The command's runs untraced before the recording (`--untraced-runs`), each
/// `powerlens_core::sched::untraced::UntracedRun`; absent without them. The recorded
/// run's CPU time and wall time, measured the same way, are the `stop` metadata's
/// `command_cpu_s` and `command_wall_s`.
pub const UNTRACED_RUNS: &str = "untraced_runs";

/// A full recording (trace) or the procfs fallback.
pub const MODE_TRACE: &str = "trace";
pub const MODE_REDUCED: &str = "reduced";

/// The `stacks` metadata: recorded with the cpu-clock rate, or not and why.
pub(crate) fn stacks_meta(c: &Collector, opts: &RecordOptions, roots: &Roots) -> Value {
    let kernel_frames = opts.kernel_stacks;
    // How the user stacks of the stack events were unwound: from the copy alone, or
    // continued with the kernel's frame-pointer chain (`--full-stacks`).
    let unwinding = if opts.full_stacks {
        UNWIND_STACK_COPY_AND_FRAME_POINTERS
    } else {
        UNWIND_STACK_COPY
    };
    match opts.stacks_hz {
        None => json!({"recorded": false, "reason": "--no-stacks"}),
        Some(hz) if c.has_cpu_clock() => json!({
            "recorded": true,
            "cpu_clock_hz": hz,
            "user_stack_bytes": c.user_stack_bytes(),
            "sample_stack_bytes": c.sample_stack_bytes(),
            "events": stacks::STACK_EVENTS,
            "events_kernel_frames": kernel_frames,
            "events_unwinding": unwinding,
            "events_samples_per_s": opts.stack_samples_per_s,
            "mappings": c.has_mmap_records(),
            // The sampling timer's callback: its expiries are powerlens's own wake-ups,
            // which report leaves out of the wake-up causes.
            "sampling_timer_function": sampling_timer_function(roots),
        }),
        Some(_) => json!({
            "recorded": true,
            "cpu_clock_hz": null,
            "user_stack_bytes": c.user_stack_bytes(),
            "events": stacks::STACK_EVENTS,
            "events_kernel_frames": kernel_frames,
            "events_unwinding": unwinding,
            "events_samples_per_s": opts.stack_samples_per_s,
            "mappings": c.has_mmap_records(),
            "reason": "the cpu-clock event could not be opened: no CPU-time samples, so per-function CPU time and energy are unavailable",
        }),
    }
}

/// The kernel address of the cpu-clock event's hrtimer callback, from kallsyms; `None`
/// when kallsyms hides it.
fn sampling_timer_function(roots: &Roots) -> Option<u64> {
    powerlens_sys::symbolize::kallsyms::KernelSymbols::address_in(
        &roots.proc("kallsyms"),
        "perf_swevent_hrtimer",
    )
}

/// The metadata known at the start: mode, codec, machine, start time, sample interval,
/// events asked and unavailable, the energy source, the battery.
pub(crate) fn write_start(
    w: &mut RecordingWriter,
    roots: &Roots,
    opts: &RecordOptions,
    mode: &str,
    collector: &Option<Collector>,
    meter: &Meter,
    baseline_w: Option<f64>,
) -> Result<(), RecordError> {
    w.set_meta(MODE, &json!(mode))?;
    w.set_meta(CODEC, &json!(powerlens_core::codec::CODEC_VERSION))?;
    w.set_meta(MACHINE, &serde_json::to_value(MachineInfo::collect(roots))?)?;
    w.set_meta(
        START,
        &json!({
            "monotonic_ns": monotonic_now_ns(),
            "unix_s": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            "powerlens_version": env!("CARGO_PKG_VERSION"),
            // Its own threads are in the recording like any other: the report says what
            // they used beside the target.
            "recorder_pid": std::process::id(),
        }),
    )?;
    w.set_meta(SAMPLE_INTERVAL, &json!(opts.sample_interval.as_secs_f64()))?;
    let events: Vec<String> = collector
        .iter()
        .flat_map(|c| c.events().iter().map(|e| e.full_name()))
        .collect();
    w.set_meta(EVENTS, &json!(events))?;
    if let Some(c) = collector {
        w.set_meta(
            IN_KERNEL,
            &json!({"events": c.in_kernel_events(), "refused": c.in_kernel_refused()}),
        )?;
    }
    w.set_meta(
        UNAVAILABLE,
        &json!(collector
            .as_ref()
            .map(unavailable_events)
            .unwrap_or_default()),
    )?;
    let energy = match meter.model() {
        Some(model) => json!({
            "provenance": meter.provenance(),
            "model": model,
            "describe": meter.describe_charging(Charged::Machine),
        }),
        None => json!({
            "provenance": meter.provenance(),
            "baseline_w": baseline_w,
            "describe": meter.describe_charging(Charged::Machine),
        }),
    };
    w.set_meta(ENERGY, &energy)?;
    if let Some(battery) = &meter.battery {
        w.set_meta(BATTERY, &serde_json::to_value(&battery.setup)?)?;
    }
    w.flush()?;
    Ok(())
}

/// The requested events the kernel could not give, with the reason and the fix.
pub(crate) fn unavailable_events(c: &Collector) -> Vec<Value> {
    c.unavailable()
        .iter()
        .map(|u| json!({ "event": u.event, "reason": u.reason, "fix": u.fix }))
        .collect()
}

/// The `target` metadata: what was recorded and the process tree's root.
pub(crate) fn target(target: &Target, root_pid: Option<u32>) -> Value {
    json!({
        "kind": match target { Target::Command(_) => "command", Target::Pid(_) => "pid", Target::All => "all" },
        "command": match target { Target::Command(argv) => json!(argv), _ => Value::Null },
        "root_pid": root_pid,
    })
}

/// The `unwind` metadata: how the user stacks were unwound, written at the end, and how
/// sampling them went (`stack_samples`, `null` when every event carried its stack).
pub(crate) fn unwind(
    distinct_stacks: usize,
    u: &UnwindStats,
    samples: Option<&SampledStacks>,
) -> Value {
    json!({
        "stack_samples": samples.map(|s| json!({
            "paired": s.counts.paired,
            "dropped": s.counts.dropped,
            "max_period": s.max_period,
        })),
        "distinct_stacks": distinct_stacks,
        "user_stacks": u.stacks,
        "unwound_complete": u.complete,
        "spliced_with_frame_pointers": u.spliced,
        "frame_pointers_only": u.fp_only,
        "unreadable_modules": u.unreadable_modules,
        "maps_refreshes": u.maps_refreshes,
        "processes_forgotten": u.processes_forgotten,
    })
}
