//! Why a figure has a value on one side only, in true words: one report has no such key (a
//! battery section the other recording was not given, a recording made by another
//! version), or the key is there without a value (the report's `unavailable` list says
//! why, or the recording is reduced).

use serde_json::Value;

/// A side's name and its report, with its figures flattened to dotted keys.
pub(super) struct Side<'a> {
    pub name: &'static str,
    pub report: &'a Value,
    pub leaves: &'a [(String, Value)],
}

/// The notes on figures only `side` has a value for, against `other`.
pub(super) fn one_sided(side: &Side<'_>, other: &Side<'_>) -> Vec<String> {
    let mut absent_battery = 0;
    let mut absent = Vec::new();
    let mut null = Vec::new();
    for (key, v) in side.leaves {
        if v.is_null() {
            continue;
        }
        match other.leaves.iter().find(|(k, _)| k == key) {
            None if key.starts_with("battery.") => absent_battery += 1,
            None => absent.push(key.as_str()),
            Some((_, w)) if w.is_null() => null.push(key.as_str()),
            Some(_) => {}
        }
    }
    let (s, o) = (side.name, other.name);
    let mut notes = Vec::new();
    if absent_battery > 0 {
        notes.push(format!(
            "{s} was recorded with --battery-wh (or on a discharging battery) and {o} was not: {} of {s} shown with {o}'s side null; record {o} with --battery-wh to compare them",
            count(absent_battery, "battery figure"),
        ));
    }
    if !absent.is_empty() {
        let why = if is_reduced(other.report) {
            format!("{o} is a reduced recording (procfs samples, no scheduler trace)")
        } else {
            format!("{o}'s recording was made by another version of powerlens")
        };
        let verb = if absent.len() == 1 { "is" } else { "are" };
        notes.push(format!(
            "{} {verb} only in {s}'s report ({}): {why}; shown with {o}'s side null",
            count(absent.len(), "figure"),
            examples(&absent)
        ));
    }
    if !null.is_empty() {
        let why = if is_reduced(other.report) {
            format!("{o} is a reduced recording (procfs samples give CPU time and switch counts, not idle or wake-up figures)")
        } else {
            let reasons = reasons_only_in(other.report, side.report);
            if reasons.is_empty() {
                format!("{o}'s recording had nothing to compute them from")
            } else {
                format!("{o}'s report says why: {}", reasons.join("; "))
            }
        };
        notes.push(format!(
            "{o} has no value for {} {s} has ({}): {why}",
            count(null.len(), "figure"),
            examples(&null)
        ));
    }
    notes
}

/// When `side`'s recording lost trace records: its counts are short of what happened.
pub(super) fn lost_records(side: &Side<'_>) -> Option<String> {
    let lost = side.report["system"]["lost_records"]
        .as_u64()
        .filter(|n| *n > 0)?;
    let s = side.name;
    Some(format!(
        "{s}'s recording lost {lost} trace records (the recorder's rings overflowed): its counts of switches and wake-ups are short, and a finding on them may not hold; record it again with a larger --buffer-pages, or with less running beside it"
    ))
}

/// "1 figure", "7 figures".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The first three keys, and how many more.
fn examples(keys: &[&str]) -> String {
    let shown = keys.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    match keys.len() {
        n if n > 3 => format!("{shown} and {} more", n - 3),
        _ => shown,
    }
}

/// A reduced recording's thread rows take their CPU time from procfs.
fn is_reduced(report: &Value) -> bool {
    report["threads"]
        .as_array()
        .is_some_and(|t| !t.is_empty() && t.iter().all(|r| r["cpu_time_source"] == "procfs"))
}

/// The `unavailable` figures of `report` (as "figure: reason") that `other` does not list.
fn reasons_only_in(report: &Value, other: &Value) -> Vec<String> {
    let list = |r: &Value| r["unavailable"].as_array().cloned().unwrap_or_default();
    let theirs = list(other);
    list(report)
        .iter()
        .filter(|u| !theirs.iter().any(|t| t["figure"] == u["figure"]))
        .filter_map(|u| {
            Some(format!(
                "{}: {}",
                u["figure"].as_str()?,
                u["reason"].as_str()?
            ))
        })
        .collect()
}
