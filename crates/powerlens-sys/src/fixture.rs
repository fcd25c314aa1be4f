//! Fixture trees laid out like `/sys` and `/proc`, and a fake energy meter, so that every
//! reader — and the `powerlens` binary through `POWERLENS_SYSFS_ROOT` — can be tested
//! without the hardware. Compiled for tests and with the `fixtures` feature.
//!
//! Setters panic on I/O errors: they only run in tests, where a panic is the failure report.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::energy::files::MeterFiles;
use crate::Roots;

/// Says that the test running now cannot run here, and why: on stderr, and as a line
/// (`test<TAB>why`) of the file `POWERLENS_TEST_SKIPS` names, when it names one. The test
/// harness has no skip of its own, so a test that returns early reads as passed; the test
/// command counts these lines and reports them as skipped instead. Use
/// [`skip_test!`](crate::skip_test), which formats its arguments.
pub fn note_skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    eprintln!("skipped: {why}");
    if let Some(log) = std::env::var_os("POWERLENS_TEST_SKIPS") {
        use std::io::Write;
        let line = format!("{test}\t{}\n", why.replace(['\n', '\t'], " "));
        // One write of one line to a file opened for appending: lines from test threads
        // and binaries running at once do not interleave.
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!(
                "cannot note a skipped test in {}: {e}",
                log.to_string_lossy()
            );
        }
    }
}

/// For a live test whose oracle holds only on idle CPUs (a bound on wall time, a ring read
/// once at the end that other processes' records would fill): whether the CPUs are idle
/// enough, judged over 200 ms of `/proc/stat` (other work under half of them); when not,
/// notes the skip with the share seen ([`note_skip`]) and returns `false`.
pub fn needs_idle_cpus() -> bool {
    let roots = Roots::default();
    let read = || crate::procfs::read_cpu_times(&roots).ok();
    let (Some(before), started) = (read(), Instant::now()) else {
        return true;
    };
    std::thread::sleep(Duration::from_millis(200));
    let Some(after) = read() else {
        return true;
    };
    let capacity_s = started.elapsed().as_secs_f64() * f64::from(after.cpus.max(1));
    let busy = after.busy_since(&before) / capacity_s;
    if busy > 0.5 {
        note_skip(&format!(
            "needs idle CPUs: other work kept {:.0}% of them busy (run it on a quiet machine)",
            busy * 100.0
        ));
        return false;
    }
    true
}

/// `skip_test!("no BTF here: {why}")`: [`note_skip`] with `format!`'s arguments.
#[macro_export]
macro_rules! skip_test {
    ($($arg:tt)*) => {
        $crate::fixture::note_skip(&format!($($arg)*))
    };
}

/// A temporary directory holding `sys/` and `proc/`, removed on drop.
pub struct FixtureTree {
    dir: tempfile::TempDir,
}

/// One cpuidle state as the fixture writes it (`stateK/{name,desc,latency,residency,…}`).
#[derive(Debug, Clone, Default)]
pub struct IdleStateSpec {
    pub name: String,
    pub desc: String,
    pub latency_us: u64,
    pub residency_us: u64,
    pub disabled: bool,
    pub usage: u64,
    pub time_us: u64,
}

/// One cpufreq policy as the fixture writes it (frequencies in kHz, as sysfs has them).
#[derive(Debug, Clone, Default)]
pub struct PolicySpec {
    pub cpus: String,
    pub driver: String,
    pub governor: String,
    pub epp: Option<String>,
    pub scaling_min_khz: u64,
    pub scaling_max_khz: u64,
    pub cpuinfo_min_khz: u64,
    pub cpuinfo_max_khz: u64,
    pub cur_khz: u64,
}

/// One `power_supply` battery; absent attributes are not written.
#[derive(Debug, Clone, Default)]
pub struct BatterySpec {
    pub status: String,
    pub energy_now_uwh: Option<u64>,
    pub energy_full_uwh: Option<u64>,
    pub charge_now_uah: Option<u64>,
    pub charge_full_uah: Option<u64>,
    pub voltage_now_uv: Option<u64>,
    pub power_now_uw: Option<u64>,
    /// `capacity`: the charge left in whole percent.
    pub capacity_pct: Option<u64>,
}

/// One event of the perf `power` PMU (`events/<name>` and its `.scale`/`.unit` files).
#[derive(Debug, Clone)]
pub struct PmuEventSpec<'a> {
    pub name: &'a str,
    pub config: &'a str,
    pub scale: Option<&'a str>,
    pub unit: Option<&'a str>,
}

impl Default for FixtureTree {
    fn default() -> Self {
        Self::new()
    }
}

impl FixtureTree {
    /// An empty tree: `sys/` and `proc/` exist, nothing else.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("powerlens-fixture-")
            .tempdir()
            .expect("create fixture dir");
        std::fs::create_dir(dir.path().join("sys")).expect("create sys/");
        std::fs::create_dir(dir.path().join("proc")).expect("create proc/");
        FixtureTree { dir }
    }

    /// Roots pointing at this tree.
    pub fn roots(&self) -> Roots {
        Roots::new(self.dir.path().join("sys"), self.dir.path().join("proc"))
            .expect("fixture roots exist")
    }

    /// A path below the fixture's sysfs root.
    pub fn sys_path(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join("sys").join(relative)
    }

    /// A path below the fixture's procfs root.
    pub fn proc_path(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join("proc").join(relative)
    }

    /// Writes `value` and a newline to a sysfs attribute, creating its directories.
    pub fn write_sys(&self, relative: impl AsRef<Path>, value: impl Display) -> PathBuf {
        write_attr(&self.sys_path(relative), value)
    }

    /// Writes `value` and a newline to a procfs file, creating its directories.
    pub fn write_proc(&self, relative: impl AsRef<Path>, value: impl Display) -> PathBuf {
        write_attr(&self.proc_path(relative), value)
    }

    /// `/proc/cpuinfo` with two processors of the given model and vendor.
    pub fn cpuinfo(&self, model: &str, vendor: &str) {
        let one = |n| format!("processor\t: {n}\nvendor_id\t: {vendor}\nmodel name\t: {model}\n");
        self.write_proc("cpuinfo", format!("{}\n{}", one(0), one(1)));
    }

    /// `/proc/cpuinfo` listing `processors` processors of the given model (none: no
    /// `model name` lines, as on arm64) with the given `flags` line (e.g. `fpu hypervisor`).
    pub fn cpuinfo_with(&self, model: Option<&str>, processors: usize, flags: &str) {
        let text: Vec<String> = (0..processors)
            .map(|n| {
                let model = model
                    .map(|m| format!("model name\t: {m}\n"))
                    .unwrap_or_default();
                format!("processor\t: {n}\n{model}flags\t\t: {flags}\n")
            })
            .collect();
        self.write_proc("cpuinfo", text.join("\n"));
    }

    /// The SMBIOS chassis type as DMI shows it (`class/dmi/id/chassis_type`), e.g. `10`.
    pub fn chassis_type(&self, value: &str) {
        self.write_sys("class/dmi/id/chassis_type", value);
    }

    /// `devices/system/cpu/online`, e.g. `0-3`.
    pub fn online_cpus(&self, list: &str) {
        self.write_sys("devices/system/cpu/online", list);
    }

    /// Package and core of one CPU.
    pub fn cpu_topology(&self, cpu: u32, package: u32, core: u32) {
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        self.write_sys(format!("{dir}/physical_package_id"), package);
        self.write_sys(format!("{dir}/core_id"), core);
    }

    /// `/proc/sys/kernel/perf_event_paranoid`.
    pub fn perf_event_paranoid(&self, level: i64) {
        self.write_proc("sys/kernel/perf_event_paranoid", level);
    }

    /// The cpuidle driver and governor (`current_governor`).
    pub fn cpuidle_driver(&self, driver: &str, governor: &str) {
        self.write_sys("devices/system/cpu/cpuidle/current_driver", driver);
        self.write_sys("devices/system/cpu/cpuidle/current_governor", governor);
    }

    /// `devices/system/cpu/cpu<cpu>/cpuidle/state<index>/…`.
    pub fn cpuidle_state(&self, cpu: u32, index: u32, spec: &IdleStateSpec) {
        let dir = format!("devices/system/cpu/cpu{cpu}/cpuidle/state{index}");
        self.write_sys(format!("{dir}/name"), &spec.name);
        self.write_sys(format!("{dir}/desc"), &spec.desc);
        self.write_sys(format!("{dir}/latency"), spec.latency_us);
        self.write_sys(format!("{dir}/residency"), spec.residency_us);
        self.write_sys(format!("{dir}/disable"), u8::from(spec.disabled));
        self.write_sys(format!("{dir}/usage"), spec.usage);
        self.write_sys(format!("{dir}/time"), spec.time_us);
    }

    /// `devices/system/cpu/cpufreq/policy<policy>/…`.
    pub fn cpufreq_policy(&self, policy: u32, spec: &PolicySpec) {
        let dir = format!("devices/system/cpu/cpufreq/policy{policy}");
        self.write_sys(format!("{dir}/affected_cpus"), &spec.cpus);
        self.write_sys(format!("{dir}/scaling_driver"), &spec.driver);
        self.write_sys(format!("{dir}/scaling_governor"), &spec.governor);
        if let Some(epp) = &spec.epp {
            self.write_sys(format!("{dir}/energy_performance_preference"), epp);
        }
        self.write_sys(format!("{dir}/scaling_min_freq"), spec.scaling_min_khz);
        self.write_sys(format!("{dir}/scaling_max_freq"), spec.scaling_max_khz);
        self.write_sys(format!("{dir}/cpuinfo_min_freq"), spec.cpuinfo_min_khz);
        self.write_sys(format!("{dir}/cpuinfo_max_freq"), spec.cpuinfo_max_khz);
        self.write_sys(format!("{dir}/scaling_cur_freq"), spec.cur_khz);
    }

    /// A RAPL powercap zone `class/powercap/intel-rapl:<zone>`; returns its directory
    /// (`energy_uj` is inside).
    pub fn rapl_zone(&self, zone: u32, name: &str, energy_uj: u64, max_range_uj: u64) -> PathBuf {
        self.rapl_dir(&format!("intel-rapl:{zone}"), name, energy_uj, max_range_uj)
    }

    /// A RAPL subzone `class/powercap/intel-rapl:<zone>:<sub>`; returns its directory.
    pub fn rapl_subzone(
        &self,
        zone: u32,
        sub: u32,
        name: &str,
        energy_uj: u64,
        max_range_uj: u64,
    ) -> PathBuf {
        let dir = format!("intel-rapl:{zone}:{sub}");
        self.rapl_dir(&dir, name, energy_uj, max_range_uj)
    }

    fn rapl_dir(&self, dir: &str, name: &str, energy_uj: u64, max_range_uj: u64) -> PathBuf {
        let dir = format!("class/powercap/{dir}");
        self.write_sys(format!("{dir}/name"), name);
        self.write_sys(format!("{dir}/energy_uj"), energy_uj);
        self.write_sys(format!("{dir}/max_energy_range_uj"), max_range_uj);
        self.write_sys(format!("{dir}/enabled"), 1);
        self.sys_path(dir)
    }

    /// A battery `class/power_supply/<name>`; returns its directory.
    pub fn battery(&self, name: &str, spec: &BatterySpec) -> PathBuf {
        let dir = format!("class/power_supply/{name}");
        self.write_sys(format!("{dir}/type"), "Battery");
        self.write_sys(format!("{dir}/status"), &spec.status);
        let optional = [
            ("energy_now", spec.energy_now_uwh),
            ("energy_full", spec.energy_full_uwh),
            ("charge_now", spec.charge_now_uah),
            ("charge_full", spec.charge_full_uah),
            ("voltage_now", spec.voltage_now_uv),
            ("power_now", spec.power_now_uw),
            ("capacity", spec.capacity_pct),
        ];
        for (file, value) in optional {
            if let Some(value) = value {
                self.write_sys(format!("{dir}/{file}"), value);
            }
        }
        self.sys_path(dir)
    }

    /// An hwmon device `class/hwmon/hwmon<index>` with its `name`; returns its directory, in
    /// which tests write `energyK_input`, `powerK_input` and `*_label` with [`write_attr`].
    pub fn hwmon(&self, index: u32, name: &str) -> PathBuf {
        let dir = format!("class/hwmon/hwmon{index}");
        self.write_sys(format!("{dir}/name"), name);
        self.sys_path(dir)
    }

    /// The perf `power` PMU as sysfs describes it: `type`, `cpumask` and `events/`.
    pub fn perf_power_pmu(&self, pmu_type: u32, cpumask: &str, events: &[PmuEventSpec<'_>]) {
        let dir = "bus/event_source/devices/power";
        self.write_sys(format!("{dir}/type"), pmu_type);
        self.write_sys(format!("{dir}/cpumask"), cpumask);
        for event in events {
            self.write_sys(format!("{dir}/events/{}", event.name), event.config);
            if let Some(scale) = event.scale {
                self.write_sys(format!("{dir}/events/{}.scale", event.name), scale);
            }
            if let Some(unit) = event.unit {
                self.write_sys(format!("{dir}/events/{}.unit", event.name), unit);
            }
        }
    }

    /// A tracepoint in a tracefs at `kernel/tracing` below the sysfs root, e.g.
    /// `tracepoint("sched/sched_switch", 372)`.
    pub fn tracepoint(&self, event: &str, id: impl Display) {
        self.write_sys(format!("kernel/tracing/events/{event}/id"), id);
    }

    /// A tracepoint's `format` file (and its `id`, taken from the text's `ID:` line when
    /// it has one), e.g. `tracepoint_format("sched/sched_switch", text)` with the text of a
    /// format file captured from a kernel.
    pub fn tracepoint_format(&self, event: &str, text: &str) {
        let path = self.sys_path(format!("kernel/tracing/events/{event}/format"));
        write_attr(&path, text.trim_end());
        if let Some(id) = text.lines().find_map(|l| l.strip_prefix("ID:")) {
            self.tracepoint(event, id.trim());
        }
    }
}

/// Writes `value` and a newline to `path`, creating its directories.
pub fn write_attr(path: &Path, value: impl Display) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture directories");
    }
    std::fs::write(path, format!("{value}\n"))
        .unwrap_or_else(|e| panic!("write fixture file {}: {e}", path.display()));
    path.to_path_buf()
}

/// Held by tests that change live cpuidle files (`settings`) and by tests that compare them
/// with a reader, so that a comparison never sees a change half-way. Only within one test
/// binary: other processes are not held back.
pub fn live_cpuidle_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Write-only sysfs attributes: reading them fails with EACCES even for root, because the
/// kernel gives them no read method. Harmless as long as nothing writes to them.
const WRITE_ONLY_SYSFS_FILES: &[&str] = &["/sys/bus/pci/rescan", "/sys/bus/cpu/uevent"];

/// Makes `path` fail to read with "permission denied", also for root. Without root,
/// `chmod 000` does it. As root (which bypasses file modes) the file is replaced by a
/// symlink to a write-only sysfs attribute. `Err` says why neither trick applies, for an
/// explicit skip.
pub fn make_unreadable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o000))
        .map_err(|e| format!("chmod 000 {}: {e}", path.display()))?;
    if std::fs::read(path).is_err() {
        return Ok(());
    }
    for target in WRITE_ONLY_SYSFS_FILES {
        let denied = matches!(std::fs::read(target), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied);
        if denied {
            std::fs::remove_file(path).map_err(|e| format!("remove {}: {e}", path.display()))?;
            std::os::unix::fs::symlink(target, path)
                .map_err(|e| format!("symlink {}: {e}", path.display()))?;
            return Ok(());
        }
    }
    Err(format!(
        "running as root, where chmod 000 does not stop reads, and none of {WRITE_ONLY_SYSFS_FILES:?} is a write-only sysfs file here"
    ))
}

/// Power of a [`FakeMeter`] and the energy it had accumulated when the power last changed.
struct MeterState {
    watts: f64,
    joules_at_change: f64,
    changed_at: Instant,
}

impl MeterState {
    fn joules_now(&self, now: Instant) -> f64 {
        self.joules_at_change + self.watts * now.duration_since(self.changed_at).as_secs_f64()
    }
}

/// A meter state at `watts` from now.
fn constant_power(watts: f64) -> Arc<Mutex<MeterState>> {
    Arc::new(Mutex::new(MeterState {
        watts,
        joules_at_change: 0.0,
        changed_at: Instant::now(),
    }))
}

/// The energy of `state` so far, as a function for the writer thread.
fn joules_of(state: Arc<Mutex<MeterState>>) -> impl Fn() -> f64 + Send + 'static {
    move || {
        state
            .lock()
            .expect("meter state")
            .joules_now(Instant::now())
    }
}

/// The writer of a fake meter's files: `files` in `dir` after `joules`, at `watts`.
fn meter_writer(
    dir: PathBuf,
    files: MeterFiles,
    power: Arc<Mutex<MeterState>>,
) -> impl Fn(f64) + Send + 'static {
    move |joules: f64| {
        let watts = power.lock().expect("meter state").watts;
        // Whole µJ and µW, as the files hold them.
        let (used_uj, uw) = ((joules.max(0.0) * 1e6) as u64, (watts * 1e6).round() as u64);
        files
            .write(&dir, used_uj, uw)
            .unwrap_or_else(|e| panic!("fake meter writes {}: {e}", dir.display()));
    }
}

/// A thread that advances an `energy_uj` file at a known power, as a RAPL counter would
/// (or drains a fixture battery: [`FakeMeter::battery_by_energy`],
/// [`FakeMeter::battery_by_charge`]):
/// every ~1 ms it writes `(joules since start × 1e6) mod max_energy_range_uj`, as
/// [`MeterFiles`] writes every meter file (the mock executor's too). Stops on drop.
///
/// Like a real counter it must be read at least once per wrap period
/// (`max_energy_range_uj / 1e6 / watts` seconds); unlike one, it also loses a wrap when
/// a loaded machine starves its thread for that long, so choose a range that wraps no
/// faster than every ~0.1 s.
pub struct FakeMeter {
    state: Arc<Mutex<MeterState>>,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl FakeMeter {
    /// Starts at 0 µJ (written before this returns) and `watts`.
    pub fn start(energy_uj_path: impl Into<PathBuf>, watts: f64, max_energy_range_uj: u64) -> Self {
        let state = constant_power(watts);
        let source = joules_of(state.clone());
        Self::spawn(energy_uj_path.into(), max_energy_range_uj, state, source)
    }

    /// A meter whose cumulative energy is `joules()` itself, evaluated at every write: the
    /// exact integral of a power that depends on something outside the test (the machine's
    /// real load, say), with no sampling lag. `set_watts` and `joules` on this meter refer
    /// to an unused constant-power state; read the oracle from the function instead.
    pub fn following(
        energy_uj_path: impl Into<PathBuf>,
        max_energy_range_uj: u64,
        joules: impl Fn() -> f64 + Send + 'static,
    ) -> Self {
        let unused = Arc::new(Mutex::new(MeterState {
            watts: 0.0,
            joules_at_change: 0.0,
            changed_at: Instant::now(),
        }));
        Self::spawn(energy_uj_path.into(), max_energy_range_uj, unused, joules)
    }

    fn spawn(
        path: PathBuf,
        max_energy_range_uj: u64,
        state: Arc<Mutex<MeterState>>,
        joules: impl Fn() -> f64 + Send + 'static,
    ) -> Self {
        let dir = path.parent().expect("energy_uj is in a zone").to_path_buf();
        assert_eq!(path, dir.join("energy_uj"), "a fake meter writes energy_uj");
        let files = MeterFiles::Rapl {
            start_uj: 0,
            range_uj: max_energy_range_uj,
        };
        let write = meter_writer(dir, files, state.clone());
        Self::spawn_writer(state, joules, write)
    }

    /// Writes `write(joules())` now and then every ~1 ms from a thread, until dropped.
    fn spawn_writer(
        state: Arc<Mutex<MeterState>>,
        joules: impl Fn() -> f64 + Send + 'static,
        write: impl Fn(f64) + Send + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        write(0.0);
        let thread = {
            let (stop, writes) = (stop.clone(), writes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    write(joules());
                    writes.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        FakeMeter {
            state,
            stop,
            writes,
            thread: Some(thread),
        }
    }

    /// A discharging battery in `dir` (written by [`FixtureTree::battery`] with status
    /// `Discharging` and `energy_full`), as an ACPI battery reports one: every ~1 ms
    /// `energy_now` (µWh) is `start_uwh` less the energy since start at the meter's power,
    /// `power_now` (µW) is that power, and `capacity` the whole percent of
    /// `energy_full_uwh` left. Stops at empty, as a battery does.
    pub fn battery_by_energy(dir: &Path, watts: f64, start_uwh: u64, energy_full_uwh: u64) -> Self {
        let files = MeterFiles::BatteryByEnergy {
            start_uwh,
            power_now: true,
            capacity_of_uwh: Some(energy_full_uwh),
        };
        Self::battery(dir, files, watts)
    }

    /// A discharging battery that reports charge, not energy (many smart batteries):
    /// `charge_now` (µAh) falls from `start_uah` at the meter's power over a constant
    /// `voltage_now` of `voltage_uv`, `capacity` follows as the whole percent of
    /// `charge_full_uah`; no `power_now`. The tree's spec writes `voltage_now` and
    /// `charge_full`.
    pub fn battery_by_charge(
        dir: &Path,
        watts: f64,
        voltage_uv: u64,
        start_uah: u64,
        charge_full_uah: u64,
    ) -> Self {
        let files = MeterFiles::BatteryByCharge {
            start_uah,
            voltage_uv,
            capacity_of_uah: Some(charge_full_uah),
        };
        Self::battery(dir, files, watts)
    }

    fn battery(dir: &Path, files: MeterFiles, watts: f64) -> Self {
        let state = constant_power(watts);
        let write = meter_writer(dir.to_path_buf(), files, state.clone());
        Self::spawn_writer(state.clone(), joules_of(state), write)
    }

    /// Changes the power from now on.
    pub fn set_watts(&self, watts: f64) {
        let mut state = self.state.lock().expect("meter state");
        let now = Instant::now();
        state.joules_at_change = state.joules_now(now);
        state.changed_at = now;
        state.watts = watts;
    }

    /// The true energy since start (not wrapped): the oracle for tests.
    pub fn joules(&self) -> f64 {
        self.state
            .lock()
            .expect("meter state")
            .joules_now(Instant::now())
    }

    /// How many values the thread has written so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Waits until the thread has written a new value, so that a read right after returns
    /// a fresh one (twice after a change: the first write may have begun before it). On a
    /// loaded machine the thread can be starved for long; the wait is as long as it takes,
    /// and only a thread that writes nothing for 60 s is a failure, so that a hung writer
    /// fails the test instead of hanging it.
    pub fn wait_for_write(&self) {
        let before = self.writes();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.writes() == before {
            assert!(
                Instant::now() < deadline,
                "the fake meter wrote nothing for 60 s"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Drop for FakeMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs;

    #[test]
    fn fake_meter_advances_and_wraps() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, 1_000_000);
        let path = zone.join("energy_uj");
        let meter = FakeMeter::start(&path, 20.0, 1_000_000);
        std::thread::sleep(Duration::from_millis(120));
        // Freeze the power so that the file's value is exact, then let it be written.
        meter.set_watts(0.0);
        let truth = meter.joules();
        meter.wait_for_write();
        meter.wait_for_write();
        let raw = sysfs::read_u64(&path).unwrap();
        // 20 W for at least 0.12 s is 2.4 J or more: the 1 J counter has wrapped twice.
        assert!(truth >= 2.4, "{truth}");
        assert_eq!(raw, (truth * 1e6) as u64 % 1_000_000);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(meter.joules(), truth);
        // Power resumes from the frozen total.
        meter.set_watts(100.0);
        std::thread::sleep(Duration::from_millis(10));
        assert!(meter.joules() >= truth + 1.0);
    }

    #[test]
    fn following_meter_writes_its_function_wrapped() {
        let tree = FixtureTree::new();
        let path = tree
            .rapl_zone(0, "package-0", 0, 1_000_000)
            .join("energy_uj");
        let joules = Arc::new(Mutex::new(0.25));
        let meter = {
            let joules = joules.clone();
            FakeMeter::following(&path, 1_000_000, move || *joules.lock().unwrap())
        };
        meter.wait_for_write();
        assert_eq!(sysfs::read_u64(&path).unwrap(), 250_000);
        *joules.lock().unwrap() = 3.5;
        meter.wait_for_write();
        meter.wait_for_write();
        // 3.5 J on a 1 J counter: wrapped three times.
        assert_eq!(sysfs::read_u64(&path).unwrap(), 500_000);
    }

    #[test]
    fn fake_batteries_discharge_at_their_power() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            status: "Discharging".into(),
            energy_full_uwh: Some(10_000_000),
            ..Default::default()
        };
        let dir = tree.battery("BAT0", &spec);
        // 36 W from 5 Wh of 10: 10 mWh (0.1%) per second.
        let meter = FakeMeter::battery_by_energy(&dir, 36.0, 5_000_000, 10_000_000);
        std::thread::sleep(Duration::from_millis(50));
        meter.set_watts(0.0);
        let truth = meter.joules();
        meter.wait_for_write();
        meter.wait_for_write();
        // The files hold whole µJ delivered, rounded to the µWh (3 600 µJ), as
        // energy::files says.
        let used_uj = (truth * 1e6) as u64;
        let now = sysfs::read_u64(dir.join("energy_now")).unwrap();
        assert_eq!(now, 5_000_000 - (used_uj + 1_800) / 3_600);
        assert_eq!(sysfs::read_u64(dir.join("power_now")).unwrap(), 0);
        assert_eq!(sysfs::read_u64(dir.join("capacity")).unwrap(), 49);

        let spec = BatterySpec {
            status: "Discharging".into(),
            charge_full_uah: Some(4_000_000),
            voltage_now_uv: Some(12_000_000),
            ..Default::default()
        };
        let dir = tree.battery("BAT1", &spec);
        let meter = FakeMeter::battery_by_charge(&dir, 12.0, 12_000_000, 2_000_000, 4_000_000);
        std::thread::sleep(Duration::from_millis(50));
        meter.set_watts(0.0);
        let truth = meter.joules();
        meter.wait_for_write();
        meter.wait_for_write();
        // 1 µAh at 12 V is 43.2 mJ: the whole µJ delivered over 43 200, rounded.
        let used_uj = (truth * 1e6) as u64;
        let now = sysfs::read_u64(dir.join("charge_now")).unwrap();
        assert_eq!(now, 2_000_000 - (used_uj + 21_600) / 43_200);
        assert!(truth >= 0.6, "{truth} J in 50 ms at 12 W");
        assert_eq!(sysfs::read_u64(dir.join("capacity")).unwrap(), 49);
        assert!(!dir.join("power_now").exists());
    }

    #[test]
    fn unreadable_file_is_denied() {
        let tree = FixtureTree::new();
        let path = tree.write_sys("class/powercap/intel-rapl:0/energy_uj", 5);
        match make_unreadable(&path) {
            Ok(()) => {
                let err = std::fs::read(&path).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
            }
            Err(reason) => crate::skip_test!("{reason}"),
        }
    }
}
