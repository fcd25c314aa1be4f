//! What a recording says beyond its events, made from its [`Header`] for the report: the
//! thread table, the target's processes, the machine's idle states, the cpuidle and
//! cpufreq samples, and the energy over the recording — measured from the meter's
//! samples, or estimated with the power model the recording names from the trace's busy
//! CPU time. Nothing here reads the file: the header was read in one trip.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use powerlens_core::battery_life::{
    given_capacity, BatteryReport, BatterySetup, ChargeSpan, Charged, Workload,
};
use powerlens_core::model::{ModelError, PowerModel};
use powerlens_core::provenance::Provenance;
use powerlens_core::sched::report::{
    EnergyInput, IdleStateInfo, RecordingContext, RecordingSpan, SysfsIdle, ThreadInfo,
};
use powerlens_core::sched::tracing_cost::{
    TracingPath, PATH_BPF, PATH_PERF_RING, UNWIND_STACK_COPY_AND_FRAME_POINTERS,
};
use powerlens_core::sched::untraced::UntracedRecord;
use powerlens_core::window::CounterWindow;
use powerlens_store::recording::ThreadRow;

use crate::header::Header;
use crate::{meta, sampler};

/// A CPU number from the file, when it is one a machine can have. The report makes a table
/// row per CPU up to the highest number it sees: a damaged sample's CPU of 4000000000 asked
/// for 64 GB (found while writing the recording fuzz target), and `as u32` would have
/// folded 2^32 + 1 onto CPU 1.
fn cpu_number(value: &Value) -> Option<u32> {
    value
        .as_u64()
        .filter(|&n| n <= u64::from(powerlens_sys::sysfs::MAX_CPU))
        .map(|n| n as u32)
}

/// Everything but the energy, which needs the analysis' busy time when it is estimated.
pub fn read(header: &Header) -> RecordingContext {
    let rows = &header.threads;
    let target_pids = target_pids(header, rows);
    let threads = rows
        .iter()
        .map(|r| ThreadInfo {
            tid: r.tid,
            pid: r.pid.unwrap_or(r.tid),
            comm: r.comm.clone(),
        })
        .collect();
    let machine = header.meta(meta::MACHINE).unwrap_or(&Value::Null);
    let unavailable_events = header
        .meta(meta::UNAVAILABLE)
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .map(|u| {
            (
                u["event"].as_str().unwrap_or_default().to_string(),
                u["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let lost_records = header
        .meta(meta::LOST)
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|l| Some((cpu_number(&l["cpu"])?, l["lost"].as_u64()?)))
        .collect();
    RecordingContext {
        threads,
        target_pids,
        idle_states: idle_states(machine),
        // Filled in by `sysfs_idle` once the traced interval is known.
        sysfs_idle: Err("not computed yet".into()),
        // Filled in by `energy` once the busy time is known.
        energy: Err(Provenance::Unavailable {
            reason: "not computed yet".into(),
            fix: None,
        }),
        frequency_samples: frequency_samples(header),
        lost_records,
        unavailable_events,
        span: span(header),
        tracing_path: tracing_path(header),
        recorder_pid: header
            .meta(meta::START)
            .and_then(|s| s["recorder_pid"].as_u64())
            .and_then(|p| u32::try_from(p).ok()),
        start_up_s: header
            .meta(meta::START_UP)
            .and_then(|s| s["start_up_s"].as_f64()),
        untraced: untraced(header),
        tracing_cost: match header.meta(meta::TRACING_COST) {
            None => Err("the recording has no measured cost per traced event (made before powerlens measured it)".to_string()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
                format!("the recording's measured cost per traced event does not read ({e}): the file is damaged or from another version")
            }),
        },
    }
}

/// The command's untraced runs and the recorded run's CPU time and wall time; runs that
/// do not read are said to (the comparison is then left out, with the reason).
fn untraced(header: &Header) -> UntracedRecord {
    let (runs, unreadable) = match header.meta(meta::UNTRACED_RUNS).map(|v| serde_json::from_value(v.clone())) {
        None => (Vec::new(), None),
        Some(Ok(runs)) => (runs, None),
        Some(Err(e)) => (
            Vec::new(),
            Some(format!(
                "the recording's untraced runs do not read ({e}): the file is damaged or from another version"
            )),
        ),
    };
    let stop = header.meta(meta::STOP);
    let stop_s = |key: &str| stop.and_then(|s| s[key].as_f64());
    UntracedRecord {
        runs,
        recorded_cpu_s: stop_s("command_cpu_s"),
        recorded_wall_s: stop_s("command_wall_s"),
        unreadable,
    }
}

/// How the recording traced, from its mode and stacks metadata; `None` for a reduced one.
/// Recordings from before `stacks.events_unwinding` continued every stack with the
/// kernel's frame-pointer walk.
fn tracing_path(header: &Header) -> Option<TracingPath> {
    if header.meta(meta::MODE).and_then(Value::as_str) != Some(meta::MODE_TRACE) {
        return None;
    }
    let stacks = header.meta(meta::STACKS).filter(|s| s["recorded"] == true);
    let in_kernel_events: Vec<String> = header
        .meta(meta::IN_KERNEL)
        .and_then(|k| k["events"].as_array())
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Some(TracingPath {
        events: if in_kernel_events.is_empty() {
            PATH_PERF_RING
        } else {
            PATH_BPF
        }
        .to_string(),
        in_kernel_events,
        stack_unwinding: stacks.map(|s| {
            s["events_unwinding"]
                .as_str()
                .unwrap_or(UNWIND_STACK_COPY_AND_FRAME_POINTERS)
                .to_string()
        }),
        user_stack_bytes: stacks
            .and_then(|s| s["user_stack_bytes"].as_u64())
            .and_then(|b| u32::try_from(b).ok()),
        stack_samples_per_s: stacks
            .and_then(|s| s["events_samples_per_s"].as_u64())
            .and_then(|n| u32::try_from(n).ok()),
        max_stack_sample_period: header
            .meta(meta::UNWIND)
            .and_then(|u| u["stack_samples"]["max_period"].as_u64()),
        stack_samples_dropped: header
            .meta(meta::UNWIND)
            .and_then(|u| u["stack_samples"]["dropped"].as_u64()),
    })
}

/// What stretch of time the recording covers, from its target and how it stopped: a
/// command's whole run only when the command exited before the recording ended.
fn span(header: &Header) -> Option<RecordingSpan> {
    let target = header.meta(meta::TARGET)?;
    match target["kind"].as_str() {
        Some("command") => {
            // No `stop` at all: the recorder was killed before it wrote one.
            let stop = header.meta(meta::STOP).unwrap_or(&Value::Null);
            let exited = !stop["exit"].is_null();
            let stopped_early = !stop["stopped_early"].is_null();
            Some(if exited && !stopped_early {
                RecordingSpan::WholeRun
            } else {
                RecordingSpan::CutShort
            })
        }
        Some("pid" | "all") => Some(RecordingSpan::Window),
        _ => None,
    }
}

/// The target's processes: the recorded root and every process descended from it; `None`
/// (the whole system) for `record -a`.
fn target_pids(header: &Header, rows: &[ThreadRow]) -> Option<BTreeSet<u32>> {
    let target = header.meta(meta::TARGET).unwrap_or(&Value::Null);
    let root = target["root_pid"].as_u64().map(|p| p as u32)?;
    let by_tid: HashMap<u32, &ThreadRow> = rows.iter().map(|r| (r.tid, r)).collect();
    // A process's parent: procfs's PPid for processes that existed at the start, else the
    // process of the thread that forked its main thread.
    let parent_of = |pid: u32| -> Option<u32> {
        let leader = by_tid.get(&pid)?;
        leader.ppid.or_else(|| {
            let forker = by_tid.get(&leader.parent_tid?)?;
            forker.pid.or(Some(forker.tid))
        })
    };
    let processes: BTreeSet<u32> = rows.iter().map(|r| r.pid.unwrap_or(r.tid)).collect();
    let mut target = BTreeSet::from([root]);
    for &pid in &processes {
        let mut p = pid;
        // Walk up at most the table's size (a cycle in damaged data ends the walk).
        for _ in 0..processes.len() {
            if target.contains(&p) {
                target.insert(pid);
                break;
            }
            match parent_of(p) {
                Some(parent) if parent != p => p = parent,
                _ => break,
            }
        }
    }
    Some(target)
}

/// The idle states `info` saw at the start of the recording (those of the first CPU).
fn idle_states(machine: &Value) -> Result<Vec<IdleStateInfo>, String> {
    let cpuidle = &machine["cpuidle"];
    if cpuidle["available"] != Value::Bool(true) {
        return Err(cpuidle["reason"]
            .as_str()
            .unwrap_or("the recording has no cpuidle information")
            .to_string());
    }
    let states: Vec<IdleStateInfo> = cpuidle["states"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| IdleStateInfo {
            index: i as u32,
            name: s["name"].as_str().unwrap_or_default().to_string(),
            latency_us: s["latency_us"].as_u64().unwrap_or(0),
            target_residency_us: s["target_residency_us"].as_u64().unwrap_or(0),
        })
        .collect();
    if states.is_empty() {
        return Err(format!(
            "cpuidle driver {:?} registered no idle states (the CPUs idle in the kernel's default idle routine; typical of virtual machines without cpuidle-haltpoll)",
            cpuidle["driver"].as_str().unwrap_or("none")
        ));
    }
    Ok(states)
}

/// cpuidle usage/time over exactly the traced interval `[start_ns, end_ns]`: each state's
/// cumulative counters interpolated at both ends, as the energy is, so the sysfs columns
/// cover the same time as the trace's.
pub fn sysfs_idle(
    header: &Header,
    (start_ns, end_ns): (u64, u64),
) -> Result<Vec<SysfsIdle>, String> {
    // (cpu, state) → (usage, time_us) windows.
    let mut windows: Vec<((u32, u32), CounterWindow, CounterWindow)> = Vec::new();
    for &(t, ref data) in header.samples(sampler::CPUIDLE) {
        for cpu in data.as_array().into_iter().flatten() {
            let Some(n) = cpu_number(&cpu["cpu"]) else {
                continue;
            };
            for (i, s) in cpu["states"].as_array().into_iter().flatten().enumerate() {
                let (Some(usage), Some(time_us)) = (s[0].as_u64(), s[1].as_u64()) else {
                    continue;
                };
                let key = (n, i as u32);
                let slot = match windows.iter().position(|(k, _, _)| *k == key) {
                    Some(slot) => slot,
                    None => {
                        let w = CounterWindow::new(start_ns, end_ns);
                        windows.push((key, w, w));
                        windows.len() - 1
                    }
                };
                windows[slot].1.push(t, usage as f64);
                windows[slot].2.push(t, time_us as f64);
            }
        }
    }
    if windows.is_empty() {
        return Err(
            "no cpuidle counters were sampled (no cpuidle driver with states, or a reduced recording)"
                .to_string(),
        );
    }
    let mut out: Vec<SysfsIdle> = windows
        .iter()
        .filter_map(|&((cpu, index), usage, time)| {
            Some(SysfsIdle {
                cpu,
                index,
                entries: usage.increase()?.round() as u64,
                time_ns: (time.increase()? * 1000.0).round() as u64,
            })
        })
        .collect();
    out.sort_by_key(|s| (s.cpu, s.index));
    Ok(out)
}

/// The cpufreq samples: (time, CPU, kHz).
pub fn frequency_samples(header: &Header) -> Vec<(u64, u32, u64)> {
    let mut out = Vec::new();
    for &(t, ref data) in header.samples(sampler::CPUFREQ) {
        for pair in data.as_array().into_iter().flatten() {
            if let (Some(cpu), Some(khz)) = (cpu_number(&pair[0]), pair[1].as_u64()) {
                out.push((t, cpu, khz));
            }
        }
    }
    out
}

/// The energy over the recording's interval `[start_ns, end_ns]`: the meter's cumulative
/// samples interpolated at both ends when it had one, else the recorded power model applied
/// to the elapsed time and the trace's busy CPU-seconds of every thread.
pub fn energy(
    header: &Header,
    (start_ns, end_ns): (u64, u64),
    busy_cpu_s: f64,
) -> Result<EnergyInput, Provenance> {
    let energy = header.meta(meta::ENERGY).unwrap_or(&Value::Null);
    let elapsed_s = end_ns.saturating_sub(start_ns) as f64 / 1e9;
    // Checked as a model file is: a damaged one (a negative idle power) gave negative
    // energies and watts (found by the recording fuzz target's check).
    match PowerModel::from_json(&energy["model"].to_string()) {
        Err(ModelError::Parameter { name, value }) => {
            return Err(Provenance::Unavailable {
                reason: format!(
                    "the recording's power model is damaged: {name} = {value} is not a power"
                ),
                fix: Some("record again".into()),
            })
        }
        Err(_) => {}
        Ok(model) => {
            let joules = model.energy_j(elapsed_s, busy_cpu_s);
            return Ok(EnergyInput {
                total_j: joules,
                domains: vec![("system".to_string(), joules)],
                provenance: model.provenance(),
                idle_power_w: model.idle_w,
            });
        }
    }
    let provenance: Provenance =
        serde_json::from_value(energy["provenance"].clone()).unwrap_or(Provenance::Unavailable {
            reason: "the recording names no energy source".into(),
            fix: Some("record again with this powerlens".into()),
        });
    let mut total = CounterWindow::new(start_ns, end_ns);
    let mut sampled = false;
    let mut domains: Vec<(String, CounterWindow)> = Vec::new();
    for &(t, ref data) in header.samples(sampler::ENERGY) {
        if let Some(j) = data["total_j"].as_f64() {
            total.push(t, j);
            sampled = true;
        }
        for (name, j) in data["domains_j"].as_object().into_iter().flatten() {
            let Some(j) = j.as_f64() else { continue };
            match domains.iter_mut().find(|(n, _)| n == name) {
                Some((_, w)) => w.push(t, j),
                None => {
                    let mut w = CounterWindow::new(start_ns, end_ns);
                    w.push(t, j);
                    domains.push((name.clone(), w));
                }
            }
        }
    }
    let Some(total_j) = total.increase() else {
        // Samples with no finite increase (counters of ±1e308 J) are damaged ones.
        return Err(Provenance::Unavailable {
            reason: if sampled {
                "the recording's energy samples are damaged: they give no finite increase".into()
            } else {
                format!("no energy samples were recorded ({})", provenance.label())
            },
            fix: Some(if sampled {
                "record again".into()
            } else {
                "record for longer than the sample interval (--sample-every)".into()
            }),
        });
    };
    Ok(EnergyInput {
        total_j,
        domains: domains
            .iter()
            .filter_map(|(n, w)| Some((n.clone(), w.increase()?)))
            .collect(),
        provenance,
        // A damaged baseline can be negative: no baseline then, as when none was measured.
        idle_power_w: energy["baseline_w"]
            .as_f64()
            .filter(|w| w.is_finite() && *w >= 0.0)
            .unwrap_or(0.0),
    })
}

/// The battery-life figures of a recording: the recorded work is one run, its energy the
/// report's, the charge span the gauge's samples interpolated at both ends of the
/// analysed interval. `battery_wh` (`report --battery-wh`) replaces the full charge the
/// recording stored. `None` when the recording knows no battery and none is given.
pub fn battery(
    header: &Header,
    (start_ns, end_ns): (u64, u64),
    energy: &Result<EnergyInput, Provenance>,
    battery_wh: Option<f64>,
) -> Option<BatteryReport> {
    let stored: Option<BatterySetup> = header
        .meta(meta::BATTERY)
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    let setup = match (stored, battery_wh) {
        (None, None) => return None,
        (Some(setup), None) => setup,
        (Some(setup), Some(wh)) => setup.with_capacity_wh(wh),
        (None, Some(wh)) => BatterySetup {
            capacity: Some(given_capacity(wh, Vec::new())),
            capacity_unavailable: None,
            charge_source: None,
            whole_percent: false,
            charge_unavailable: Some(
                "the recording has no battery charge readings (recorded without a discharging battery)".into(),
            ),
            whole_system: false,
        },
    };
    let energy = match energy {
        Ok(e) => e,
        Err(p) => {
            return Some(BatteryReport::unavailable(
                format!("the recording's energy is {}", p.label()),
                None,
            ))
        }
    };
    let mut charge = CounterWindow::new(start_ns, end_ns);
    for &(t, ref data) in header.samples(sampler::ENERGY) {
        if let Some(pct) = data["charge_pct"].as_f64() {
            charge.push(t, pct);
        }
    }
    let seconds = end_ns.saturating_sub(start_ns) as f64 / 1e9;
    let spans: Vec<ChargeSpan> = charge
        .ends()
        .map(|(start_pct, end_pct)| ChargeSpan {
            start_pct,
            end_pct,
            seconds,
        })
        .into_iter()
        .collect();
    let workload = Workload {
        energy_per_run_j: energy.total_j,
        power_w: if seconds > 0.0 {
            energy.total_j / seconds
        } else {
            0.0
        },
        time_per_run_s: seconds,
    };
    // A recording's energy is the machine's over its window, whatever else ran in it.
    Some(
        setup
            .report(&workload, &spans, &energy.provenance)
            .charging(Charged::Machine),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_store::recording::{RecordingReader, RecordingWriter};

    fn header_of(path: &std::path::Path) -> Header {
        Header::read(&RecordingReader::open(path).unwrap()).unwrap()
    }
    use serde_json::json;

    /// CPU numbers no machine has (a damaged sample's 4000000000 asked the report for a
    /// 64 GB table; 2^32 + 1 would have folded onto CPU 1) are left out, the rest kept.
    #[test]
    fn cpu_numbers_no_machine_has_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        let idle = |cpu: u64| json!({"cpu": cpu, "states": [[1, 10], [2, 20]]});
        for t in [0, 1_000_000] {
            w.append_sample(
                t,
                sampler::CPUIDLE,
                &json!([idle(0), idle(4_000_000_000), idle(4_294_967_297)]),
            )
            .unwrap();
            w.append_sample(
                t,
                sampler::CPUFREQ,
                &json!([[1, 2_000_000], [4_000_000_000u64, 1]]),
            )
            .unwrap();
        }
        w.set_meta(
            meta::LOST,
            &json!([{"cpu": 1, "lost": 3}, {"cpu": 4_000_000_000u64, "lost": 9}]),
        )
        .unwrap();
        w.finish().unwrap();
        let header = header_of(&path);
        let idle = sysfs_idle(&header, (0, 1_000_000)).unwrap();
        assert!(idle.iter().all(|s| s.cpu == 0), "{idle:?}");
        assert_eq!(idle.len(), 2);
        let freq = frequency_samples(&header);
        assert_eq!(freq, [(0, 1, 2_000_000), (1_000_000, 1, 2_000_000)]);
        assert_eq!(read(&header).lost_records, [(1, 3)]);
    }

    /// Regression (fuzz/regressions/recording/negative-idle-power.rec): a damaged power
    /// model's negative idle power came out as a negative power and energy.
    #[test]
    fn a_damaged_power_model_is_unavailable_energy_not_a_negative_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        let model =
            json!({"name": "default-linear", "idle_w": -270.6, "busy_cpu_w": 16.0, "source": "x"});
        w.set_meta(meta::ENERGY, &json!({ "model": model }))
            .unwrap();
        w.finish().unwrap();
        match energy(&header_of(&path), (0, 1_000_000_000), 0.5) {
            Err(Provenance::Unavailable { reason, .. }) => {
                assert!(reason.contains("idle_w = -270.6"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // A valid model still estimates: 27.06 W for 1 s plus 16 W for 0.5 CPU-s.
        let mut w = RecordingWriter::create(&dir.path().join("ok.rec")).unwrap();
        let model =
            json!({"name": "default-linear", "idle_w": 27.06, "busy_cpu_w": 16.0, "source": "x"});
        w.set_meta(meta::ENERGY, &json!({ "model": model }))
            .unwrap();
        w.finish().unwrap();
        let e = energy(
            &header_of(&dir.path().join("ok.rec")),
            (0, 1_000_000_000),
            0.5,
        )
        .unwrap();
        assert!((e.total_j - 35.06).abs() < 1e-9, "{}", e.total_j);
    }

    /// Meter samples of ±1e308 J (an infinite increase) and a negative baseline, as damage
    /// could leave them, give no figure rather than an infinite energy or a negative power.
    #[test]
    fn damaged_meter_samples_and_baseline_are_no_figures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        w.set_meta(meta::ENERGY, &json!({"baseline_w": -5.0}))
            .unwrap();
        for (t, j) in [(0, -1.7e308), (1_000_000_000u64, 1.7e308)] {
            let sample = json!({"total_j": j, "domains_j": {"package-0": j}});
            w.append_sample(t, sampler::ENERGY, &sample).unwrap();
        }
        w.finish().unwrap();
        match energy(&header_of(&path), (0, 1_000_000_000), 0.5) {
            Err(Provenance::Unavailable { reason, .. }) => {
                assert!(reason.contains("damaged"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        let path = dir.path().join("ok.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        w.set_meta(meta::ENERGY, &json!({"baseline_w": -5.0}))
            .unwrap();
        for (t, j) in [(0, 10.0), (1_000_000_000u64, 30.0)] {
            w.append_sample(t, sampler::ENERGY, &json!({ "total_j": j }))
                .unwrap();
        }
        w.finish().unwrap();
        let e = energy(&header_of(&path), (0, 1_000_000_000), 0.5).unwrap();
        assert_eq!((e.total_j, e.idle_power_w), (20.0, 0.0));
    }

    /// The span follows the recorder's own `target` and `stop` metadata, as `record`
    /// writes them: a command that exited is a whole run; one the recording outlived
    /// (`--duration`) or that was interrupted, or a killed recorder (no `stop`), is cut
    /// short; `-a` and `-p` are windows; a file without a target does not say.
    #[test]
    fn the_span_is_read_from_target_and_stop() {
        let dir = tempfile::tempdir().unwrap();
        let command = json!({"kind": "command", "command": ["true"], "root_pid": 7});
        let exited = json!({"exit": {"code": 0, "signal": null}, "stopped_early": null});
        let cases = [
            (
                Some(command.clone()),
                Some(exited.clone()),
                Some(RecordingSpan::WholeRun),
            ),
            (
                Some(command.clone()),
                Some(json!({"exit": null, "stopped_early": null})),
                Some(RecordingSpan::CutShort),
            ),
            (
                Some(command.clone()),
                Some(
                    json!({"exit": {"code": 130, "signal": null}, "stopped_early": "interrupted (Ctrl-C)"}),
                ),
                Some(RecordingSpan::CutShort),
            ),
            (Some(command), None, Some(RecordingSpan::CutShort)),
            (
                Some(json!({"kind": "all"})),
                Some(exited.clone()),
                Some(RecordingSpan::Window),
            ),
            (
                Some(json!({"kind": "pid", "root_pid": 7})),
                Some(exited.clone()),
                Some(RecordingSpan::Window),
            ),
            (None, Some(exited), None),
        ];
        for (i, (target, stop, expected)) in cases.into_iter().enumerate() {
            let path = dir.path().join(format!("{i}.rec"));
            let mut w = RecordingWriter::create(&path).unwrap();
            if let Some(t) = &target {
                w.set_meta(meta::TARGET, t).unwrap();
            }
            if let Some(s) = &stop {
                w.set_meta(meta::STOP, s).unwrap();
            }
            w.finish().unwrap();
            assert_eq!(span(&header_of(&path)), expected, "{target:?} {stop:?}");
        }
    }
}
