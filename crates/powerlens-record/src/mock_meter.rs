//! The mock executor's fixture meter ([`crate::mock`]): the real energy source of a
//! fixture sysfs tree, read on the mock clock, over meter files that the script's `draw`
//! steps drive. The readers of this machine's meters — RAPL's wrap-around, the totals of
//! packages and DRAM, a battery's `power_now` integral, the battery gauge — then run on
//! files whose value at every read is known from the script, so that what they make of
//! them can be checked exactly whatever else loads the machine.
//!
//! The source is read in the background as the sampler thread of a real meter reads it,
//! at every multiple of the read interval since the meter opened, but on the mock clock:
//! the clock moves by a step's time, the reads that fall inside the step happen at their
//! instants, each after the files are written for that instant. Energy is counted in
//! femtojoules (1 µW for 1 ns), so that the files' whole microjoules are exact.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use powerlens_sys::energy::files::MeterFiles;
use powerlens_sys::energy::EnergySource;
use powerlens_sys::SysError;

/// One meter of the fixture that a `draw` step gave power to.
struct Draw {
    dir: PathBuf,
    files: MeterFiles,
    uw: u64,
    fj: u128,
}

/// The fixture's energy source, read on the mock clock, and the meter files it reads.
pub(crate) struct FixtureMeter {
    sysfs: PathBuf,
    source: Box<dyn EnergySource>,
    interval_ns: u64,
    /// The mock instant (ns since the origin) of the next background read.
    next_read_ns: u64,
    draws: Vec<Draw>,
    /// The first error a background read or write met, for the next reading to report,
    /// as the sampler thread keeps it.
    error: Option<SysError>,
}

impl FixtureMeter {
    /// Reads `source`, opened on the tree at `sysfs`, every `interval` of the mock clock.
    pub(crate) fn new(sysfs: PathBuf, source: Box<dyn EnergySource>, interval: Duration) -> Self {
        // At least 1 µs: a read every nanosecond would take the mock hours per second.
        let interval_ns = u64::try_from(interval.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1_000);
        FixtureMeter {
            sysfs,
            source,
            interval_ns,
            next_read_ns: interval_ns,
            draws: Vec::new(),
            error: None,
        }
    }

    /// The meter in `dir` (below the sysfs root) draws `uw` from now on; its files count
    /// from the values they hold when it first draws.
    pub(crate) fn draw(&mut self, dir: &Path, uw: u64) -> Result<(), String> {
        let inside = dir.components().all(|c| matches!(c, Component::Normal(_)));
        if !inside || dir.as_os_str().is_empty() {
            return Err(format!(
                "draw {}: a meter's directory below the fixture sysfs root, e.g. class/powercap/intel-rapl:0",
                dir.display()
            ));
        }
        if let Some(d) = self.draws.iter_mut().find(|d| d.dir == dir) {
            d.uw = uw;
            return Ok(());
        }
        let files = MeterFiles::of_dir(&self.sysfs.join(dir)).map_err(|e| {
            format!(
                "draw {}: no meter files there (energy_uj with max_energy_range_uj, energy_now, or charge_now with voltage_now), nor an hwmon input file (energyK_input, powerK_input, powerK_average): {e}",
                dir.display()
            )
        })?;
        self.draws.push(Draw {
            dir: dir.to_path_buf(),
            files,
            uw,
            fj: 0,
        });
        Ok(())
    }

    /// Lets `ns` pass from `now_ns`, reading the source at each background instant in it.
    pub(crate) fn advance(&mut self, origin: Instant, now_ns: u64, ns: u64) {
        let end = now_ns.saturating_add(ns);
        let mut at = now_ns;
        while self.next_read_ns <= end {
            let read_at = self.next_read_ns;
            self.pass(read_at - at);
            at = read_at;
            let read = self.read_files(origin, read_at);
            if let Err(e) = read {
                self.error.get_or_insert(e);
            }
            self.next_read_ns += self.interval_ns;
        }
        self.pass(end - at);
    }

    /// A reading at `now_ns`: the first error since the last reading, if any, else the
    /// source's joules from the files as they stand.
    pub(crate) fn read(&mut self, origin: Instant, now_ns: u64) -> Result<Vec<f64>, SysError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.read_files(origin, now_ns)
    }

    /// Writes every drawn meter's files for the energy so far, then reads the source.
    fn read_files(&mut self, origin: Instant, at_ns: u64) -> Result<Vec<f64>, SysError> {
        for d in &self.draws {
            // 1e9 fJ in a µJ; the files hold whole microjoules.
            let used_uj = u64::try_from(d.fj / 1_000_000_000).unwrap_or(u64::MAX);
            d.files.write(&self.sysfs.join(&d.dir), used_uj, d.uw)?;
        }
        self.source
            .read_joules(origin + Duration::from_nanos(at_ns))
    }

    fn pass(&mut self, ns: u64) {
        for d in &mut self.draws {
            d.fj += u128::from(ns) * u128::from(d.uw);
        }
    }
}

#[cfg(test)]
mod tests {
    use powerlens_sys::energy::powercap::PowercapSource;
    use powerlens_sys::fixture::FixtureTree;

    use super::*;
    use crate::exec::Executor;
    use crate::mock::MockMachine;

    const ZONE: &str = "class/powercap/intel-rapl:0";

    /// A mock machine reading the tree's RAPL zones every `interval_ms` of its clock.
    fn machine(tree: &FixtureTree, interval_ms: u64) -> MockMachine {
        let source = PowercapSource::open(&tree.roots()).unwrap();
        let interval = Duration::from_millis(interval_ms);
        MockMachine::reading(FixtureMeter::new(
            tree.roots().sysfs,
            Box::new(source),
            interval,
        ))
    }

    fn run(m: &MockMachine, line: &str) -> Result<(), String> {
        m.run_shell(line, false)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reads_every_interval_see_every_wrap_and_slower_ones_lose_them() {
        // A 2 J range at 10 W wraps every 0.2 s. Read every 150 ms, at 0.15, 0.30 and
        // 0.45 s, each read sees 1.5 J more, under the range: the 0.5 s sleep reads 5 J.
        // Read every 1 s, nothing reads between 0 and 0.5 s: the counter went from 0 to
        // 5 J mod 2 J = 1 J, and the two wraps are lost.
        for (interval_ms, expected) in [(150, 5.0), (1000, 1.0)] {
            let tree = FixtureTree::new();
            tree.rapl_zone(0, "package-0", 0, 2_000_000);
            let m = machine(&tree, interval_ms);
            run(&m, &format!("draw {ZONE} 10W")).unwrap();
            let before = m.read_meter().unwrap()[0];
            run(&m, "sleep 0.5").unwrap();
            let after = m.read_meter().unwrap()[0];
            assert_eq!(after - before, expected, "read every {interval_ms} ms");
        }
    }

    #[test]
    fn a_draw_holds_from_its_instant_and_files_hold_whole_microjoules() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 1_000_000, 50_000_000);
        let m = machine(&tree, 100);
        // 10 W for 0.3 s, then 30 W for 0.1 s: 3 J + 3 J. Then 1 µW for 0.0015 s is
        // 1.5 nJ: under a microjoule, the counter does not move.
        let line = format!("draw {ZONE} 10W; sleep 0.3; draw {ZONE} 30W; sleep 0.1");
        run(&m, &line).unwrap();
        assert_eq!(m.read_meter().unwrap(), [6.0]);
        run(&m, &format!("draw {ZONE} 0.000001W; sleep 0.0015")).unwrap();
        assert_eq!(m.read_meter().unwrap(), [6.0]);
        // From 1 J: 7 J in the file.
        let raw = std::fs::read_to_string(zone.join("energy_uj")).unwrap();
        assert_eq!(raw.trim(), "7000000");
    }

    #[test]
    fn what_the_fixture_meter_refuses() {
        let tree = FixtureTree::new();
        tree.rapl_zone(0, "package-0", 0, 50_000_000);
        tree.write_sys("class/power_supply/AC/type", "Mains");
        let m = machine(&tree, 100);
        for (line, expected) in [
            ("draw ../sys 5W", "below the fixture sysfs root"),
            (
                "draw /sys/class/powercap/intel-rapl:0 5W",
                "below the fixture",
            ),
            ("draw class/power_supply/AC 5W", "no meter files there"),
            ("idle 5W", "give the power with `draw`"),
            ("spin 0.5 30W", "give the power with `draw`"),
        ] {
            let err = run(&m, line).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
        // CPU time at no power of its own is a step it runs.
        run(&m, "spin 0.5 0W; idle 0W").unwrap();
        // The mock's own meter has no fixture to draw on.
        let own = MockMachine::new();
        let err = run(&own, &format!("draw {ZONE} 5W")).unwrap_err();
        assert!(err.contains("no fixture meter"), "{err}");
    }

    #[test]
    fn a_link_to_this_machines_sysfs_is_not_a_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("sys");
        std::os::unix::fs::symlink("/sys", &link).unwrap();
        let roots = powerlens_sys::Roots::new(&link, "/proc").unwrap();
        let options = crate::meter::MeterOptions::default();
        let err = crate::meter::Meter::mock(&roots, &format!("draw {ZONE} 5W"), &options)
            .err()
            .expect("no fixture meter on /sys")
            .to_string();
        assert!(err.contains("no fixture meter"), "{err}");
    }

    #[test]
    fn a_background_read_that_fails_is_the_next_readings_error() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, 50_000_000);
        let m = machine(&tree, 100);
        std::fs::remove_file(zone.join("energy_uj")).unwrap();
        // The read at 0.1 s fails; the reading after says so once, naming the file.
        run(&m, "sleep 0.15").unwrap();
        let err = m.read_meter().unwrap_err().to_string();
        assert!(err.contains("intel-rapl:0/energy_uj"), "{err}");
    }
}
