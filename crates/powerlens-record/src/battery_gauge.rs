//! The battery behind battery-life figures: its full charge (or `--battery-wh`), and the
//! gauge of the discharging batteries, read with every meter reading so that each run and
//! each recording knows the charge range it covered.

use std::path::PathBuf;

use powerlens_core::battery_life::{
    full_charge_text, given_capacity, BatterySetup, Capacity, Missing,
};
use powerlens_sys::energy::battery_meter::UNPLUG;
use powerlens_sys::{power_supply, Roots, SysError};

/// The fix for battery figures on a machine whose battery cannot be used.
const GIVE_CAPACITY: &str =
    "or give --battery-wh WH to compute battery life from this meter's energy";

/// The battery side of a meter.
#[derive(Debug)]
pub struct MeterBattery {
    pub setup: BatterySetup,
    /// The discharging batteries whose charges are read, each with its weight (its full
    /// charge in Wh, or 1 when unknown), so that several batteries read as one.
    gauge: Vec<(PathBuf, f64)>,
}

impl MeterBattery {
    /// The battery of this machine, or the capacity the user gave. `None` when there is
    /// no battery and no `--battery-wh`: no battery figures to make. `whole_system`: the
    /// meter is the battery itself.
    pub fn open(
        roots: &Roots,
        battery_wh: Option<f64>,
        whole_system: bool,
    ) -> Result<Option<MeterBattery>, SysError> {
        let batteries = power_supply::batteries(roots)?;
        if batteries.is_empty() && battery_wh.is_none() {
            return Ok(None);
        }
        let discharging: Vec<&power_supply::Battery> =
            batteries.iter().filter(|b| b.is_discharging()).collect();
        let names: Vec<String> = discharging.iter().map(|b| b.name.clone()).collect();
        let not_a_meter = power_supply::not_discharging(&batteries)
            .map(|states| format!("{states}: a battery that is charging or full is not a meter"));

        // The gauge: every discharging battery's charge, weighed by its full charge.
        let mut gauge = Vec::new();
        let mut charge_source = None;
        let mut whole_percent = false;
        let mut charge_unavailable = None;
        let mut full = Vec::new();
        for b in &discharging {
            let wh = power_supply::energy_full_wh(&b.dir)?;
            full.push((b.name.clone(), wh));
            match power_supply::charge_pct(&b.dir)? {
                Some((_, source)) => {
                    whole_percent |= source == power_supply::CHARGE_FROM_CAPACITY;
                    charge_source.get_or_insert(source);
                    gauge.push((b.dir.clone(), wh.map_or(1.0, |(wh, _)| wh)));
                }
                None => {
                    charge_unavailable = Some(format!(
                        "{} has no energy_now, charge_now or capacity to read its charge from",
                        b.name
                    ));
                }
            }
        }
        if charge_unavailable.is_some() {
            gauge.clear();
            charge_source = None;
        }
        if discharging.is_empty() {
            charge_unavailable = Some(match &not_a_meter {
                Some(why) => format!("{why}, so there is no discharge to time; {UNPLUG}"),
                None => "no battery to time a discharge on".into(),
            });
        }

        let (capacity, capacity_unavailable) = match battery_wh {
            Some(wh) => (Some(given_capacity(wh, names)), None),
            None => match capacity_of(&full) {
                _ if discharging.is_empty() => (
                    None,
                    Some(Missing {
                        reason: not_a_meter.unwrap_or_default(),
                        fix: Some(format!("{UNPLUG}, {GIVE_CAPACITY}")),
                    }),
                ),
                Ok(c) => (Some(c), None),
                Err(missing) => (None, Some(missing)),
            },
        };
        Ok(Some(MeterBattery {
            setup: BatterySetup {
                capacity,
                capacity_unavailable,
                charge_source: charge_source.map(String::from),
                whole_percent,
                charge_unavailable,
                whole_system,
            },
            gauge,
        }))
    }

    /// A given full charge and no gauge: the mock executor's battery ([`crate::mock`]),
    /// which has no discharge to time.
    pub fn given(battery_wh: f64) -> MeterBattery {
        MeterBattery {
            setup: BatterySetup {
                capacity: Some(given_capacity(battery_wh, Vec::new())),
                capacity_unavailable: None,
                charge_source: None,
                whole_percent: false,
                charge_unavailable: Some("the mock executor has no battery gauge".into()),
                whole_system: false,
            },
            gauge: Vec::new(),
        }
    }

    /// A battery whose files could not be read (a driver writing something else than a
    /// number, say): no figures, and why — the energy is still measured.
    pub fn unreadable(err: &SysError, battery_wh: Option<f64>) -> MeterBattery {
        let why = format!("the battery could not be read: {err}");
        MeterBattery {
            setup: BatterySetup {
                capacity: battery_wh.map(|wh| given_capacity(wh, Vec::new())),
                capacity_unavailable: battery_wh.is_none().then(|| Missing {
                    reason: why.clone(),
                    fix: Some("give the full charge with --battery-wh WH".into()),
                }),
                charge_source: None,
                whole_percent: false,
                charge_unavailable: Some(why),
                whole_system: false,
            },
            gauge: Vec::new(),
        }
    }

    /// The charge left now, in percent of the full charge of every discharging battery;
    /// `None` when there is no gauge or a read fails (the runs then have no charge span,
    /// and the conventional figure says so).
    pub fn charge_pct(&self) -> Option<f64> {
        if self.gauge.is_empty() {
            return None;
        }
        let mut weighed = 0.0;
        let mut weights = 0.0;
        for (dir, weight) in &self.gauge {
            let (pct, _) = power_supply::charge_pct(dir).ok()??;
            weighed += pct * weight;
            weights += weight;
        }
        Some(weighed / weights)
    }

    /// One line for stderr: the full charge behind the figures, or why there are none.
    pub fn describe(&self) -> String {
        let s = &self.setup;
        match (&s.capacity, &s.capacity_unavailable) {
            (Some(c), _) => format!(
                "battery: {}; {}",
                full_charge_text(&c.batteries, c.energy_full_wh, &c.energy_full_source),
                match (&s.charge_source, &s.charge_unavailable) {
                    (Some(source), _) => format!("charge read from {source}"),
                    (None, why) => format!(
                        "no conventional life: {}",
                        why.as_deref().unwrap_or("no gauge")
                    ),
                }
            ),
            (None, missing) => {
                let m = missing.as_ref();
                format!(
                    "battery: no battery-life figures: {}{}",
                    m.map_or("the full charge is unknown", |m| m.reason.as_str()),
                    m.and_then(|m| m.fix.as_ref())
                        .map(|f| format!(" (fix: {f})"))
                        .unwrap_or_default()
                )
            }
        }
    }
}

/// The full charge of the discharging batteries: the sum of theirs, when each has one.
fn capacity_of(full: &[(String, Option<(f64, &'static str)>)]) -> Result<Capacity, Missing> {
    let mut wh = 0.0;
    let mut sources: Vec<&str> = Vec::new();
    for (name, capacity) in full {
        let Some((w, source)) = capacity else {
            return Err(Missing {
                reason: format!(
                    "{name} has no energy_full (nor charge_full with voltage_now): its full charge is unknown"
                ),
                fix: Some("give it with --battery-wh WH (from the battery's label, or `upower -i` on a system that knows it)".into()),
            });
        };
        if *w <= 0.0 {
            return Err(Missing {
                reason: format!("{name} reports a full charge of {w} Wh"),
                fix: Some("give the real one with --battery-wh WH".into()),
            });
        }
        wh += w;
        if !sources.contains(source) {
            sources.push(source);
        }
    }
    Ok(Capacity {
        energy_full_wh: wh,
        energy_full_source: sources.join(" + "),
        batteries: full.iter().map(|(n, _)| n.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_sys::fixture::{BatterySpec, FixtureTree};

    fn discharging() -> BatterySpec {
        BatterySpec {
            status: "Discharging".into(),
            ..Default::default()
        }
    }

    #[test]
    fn no_battery_no_figures_unless_a_capacity_is_given() {
        let tree = FixtureTree::new();
        assert!(MeterBattery::open(&tree.roots(), None, false)
            .unwrap()
            .is_none());
        let b = MeterBattery::open(&tree.roots(), Some(50.0), false)
            .unwrap()
            .unwrap();
        let c = b.setup.capacity.as_ref().unwrap();
        assert_eq!(
            (c.energy_full_wh, c.energy_full_source.as_str()),
            (50.0, "--battery-wh")
        );
        assert_eq!(b.charge_pct(), None);
        assert!(b.setup.charge_unavailable.unwrap().contains("no battery"));
    }

    #[test]
    fn an_unreadable_battery_gives_no_figures_but_says_why() {
        let tree = FixtureTree::new();
        let dir = tree.battery(
            "BAT0",
            &BatterySpec {
                energy_now_uwh: Some(5),
                ..discharging()
            },
        );
        powerlens_sys::fixture::write_attr(&dir.join("energy_full"), "n/a");
        let err = MeterBattery::open(&tree.roots(), None, true).unwrap_err();
        let b = MeterBattery::unreadable(&err, None);
        let m = b.setup.capacity_unavailable.as_ref().unwrap();
        assert!(m.reason.contains("BAT0/energy_full"), "{m:?}");
        assert_eq!(b.charge_pct(), None);
        assert!(
            b.describe().contains("no battery-life figures"),
            "{}",
            b.describe()
        );
    }

    #[test]
    fn two_batteries_read_as_one() {
        let tree = FixtureTree::new();
        // 30 of 40 Wh and 5 of 20 Wh: 35 of 60 Wh.
        for (name, now, full) in [
            ("BAT0", 30_000_000, 40_000_000),
            ("BAT1", 5_000_000, 20_000_000),
        ] {
            tree.battery(
                name,
                &BatterySpec {
                    energy_now_uwh: Some(now),
                    energy_full_uwh: Some(full),
                    ..discharging()
                },
            );
        }
        let b = MeterBattery::open(&tree.roots(), None, true)
            .unwrap()
            .unwrap();
        let c = b.setup.capacity.as_ref().unwrap();
        assert_eq!(c.energy_full_wh, 60.0);
        assert_eq!(c.batteries, ["BAT0", "BAT1"]);
        assert_eq!(c.energy_full_source, "energy_full");
        let pct = b.charge_pct().unwrap();
        assert!((pct - 100.0 * 35.0 / 60.0).abs() < 1e-9, "{pct}");
        assert_eq!(
            b.setup.charge_source.as_deref(),
            Some("energy_now / energy_full")
        );
        assert!(
            b.describe().contains("BAT0 + BAT1 60 Wh full"),
            "{}",
            b.describe()
        );
    }

    #[test]
    fn charging_or_unknown_capacity_says_why_and_the_fix() {
        let tree = FixtureTree::new();
        tree.battery(
            "BAT0",
            &BatterySpec {
                status: "Full".into(),
                energy_full_uwh: Some(50_000_000),
                ..Default::default()
            },
        );
        let b = MeterBattery::open(&tree.roots(), None, false)
            .unwrap()
            .unwrap();
        let m = b.setup.capacity_unavailable.as_ref().unwrap();
        assert!(
            m.reason.contains("BAT0 is \"Full\"") && m.reason.contains("not a meter"),
            "{m:?}"
        );
        assert!(m.fix.as_ref().unwrap().contains("unplug"));
        // With a capacity the figures come from the meter, and the gauge says unplug.
        let b = MeterBattery::open(&tree.roots(), Some(50.0), false)
            .unwrap()
            .unwrap();
        assert!(b.setup.capacity.is_some());
        assert!(b.setup.charge_unavailable.unwrap().contains("unplug"));

        let tree = FixtureTree::new();
        tree.battery(
            "BAT0",
            &BatterySpec {
                energy_now_uwh: Some(5),
                ..discharging()
            },
        );
        let b = MeterBattery::open(&tree.roots(), None, true)
            .unwrap()
            .unwrap();
        let m = b.setup.capacity_unavailable.unwrap();
        assert!(m.reason.contains("no energy_full"), "{m:?}");
        assert!(m.fix.unwrap().contains("--battery-wh"));
    }
}
