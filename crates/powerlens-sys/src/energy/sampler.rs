//! Keeps an energy source's wrap-corrected totals current by reading it in a background
//! thread at least once per safe interval, while the caller takes readings whenever it likes.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Domain, EnergySource};
use crate::SysError;

/// The read interval used when the source cannot wrap or wraps only after a long time:
/// frequent enough for time series, cheap enough to be invisible.
pub const DEFAULT_READ_INTERVAL: Duration = Duration::from_millis(100);

/// Chooses the background read interval from the source's safe interval and the user's
/// request. Returns a warning when the request is longer than is safe against wrap-around.
pub fn choose_read_interval(
    safe: Option<Duration>,
    requested: Option<Duration>,
) -> (Duration, Option<String>) {
    match (requested, safe) {
        (Some(req), Some(safe)) if req > safe => (
            req,
            Some(format!(
                "the energy counter can wrap every {:.3} s at the highest plausible power; a read interval of {:.3} s may miss wraps and under-count energy (use --meter-read-every {}ms or less)",
                safe.as_secs_f64() * 2.0,
                req.as_secs_f64(),
                safe.as_millis().max(1)
            )),
        ),
        (Some(req), _) => (req, None),
        (None, Some(safe)) => (safe.min(DEFAULT_READ_INTERVAL), None),
        (None, None) => (DEFAULT_READ_INTERVAL, None),
    }
}

/// An energy source read in the background every `interval`.
pub struct SampledSource {
    name: String,
    domains: Vec<Domain>,
    interval: Duration,
    source: Arc<Mutex<Box<dyn EnergySource>>>,
    /// The first error the background reader met, reported by the next [`SampledSource::read`].
    background_error: Arc<Mutex<Option<SysError>>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl SampledSource {
    pub fn start(source: Box<dyn EnergySource>, interval: Duration) -> Self {
        let name = source.name().to_string();
        let domains = source.domains().to_vec();
        let source = Arc::new(Mutex::new(source));
        let background_error = Arc::new(Mutex::new(None));
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = {
            let source = Arc::clone(&source);
            let background_error = Arc::clone(&background_error);
            std::thread::Builder::new()
                .name("powerlens-energy".into())
                .spawn(move || {
                    // A timeout means "read again"; a message or a hung-up sender means stop.
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                        let result = read_now(&source);
                        if let Err(e) = result {
                            lock(&background_error).get_or_insert(e);
                        }
                    }
                })
                .expect("spawning the energy sampler thread")
        };
        SampledSource {
            name,
            domains,
            interval,
            source,
            background_error,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn domains(&self) -> &[Domain] {
        &self.domains
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Cumulative joules per domain now.
    pub fn read(&self) -> Result<Vec<f64>, SysError> {
        if let Some(e) = lock(&self.background_error).take() {
            return Err(e);
        }
        read_now(&self.source)
    }
}

/// Reads the source at this instant, taken once the lock is held: the reads of the
/// background thread and of the caller then reach the source in the order of their
/// instants, as a power integral needs.
fn read_now(source: &Mutex<Box<dyn EnergySource>>) -> Result<Vec<f64>, SysError> {
    let mut source = lock(source);
    source.read_joules(Instant::now())
}

impl Drop for SampledSource {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Locks a mutex even if a reader panicked while holding it: the source's state is a set of
/// counters that stay consistent between reads.
fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::WrapAccumulator;
    use crate::energy::DomainKind;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A source over a shared raw counter that wraps at `range` µJ, keeping the last raw
    /// value it read.
    struct Shared {
        raw: Arc<AtomicU64>,
        last_read: Arc<AtomicU64>,
        acc: WrapAccumulator,
        domains: Vec<Domain>,
    }

    impl EnergySource for Shared {
        fn name(&self) -> &str {
            "shared"
        }
        fn domains(&self) -> &[Domain] {
            &self.domains
        }
        fn read_joules(&mut self, _at: Instant) -> Result<Vec<f64>, SysError> {
            let raw = self.raw.load(Ordering::SeqCst);
            self.last_read.store(raw, Ordering::SeqCst);
            Ok(vec![self.acc.update(raw) as f64 / 1e6])
        }
        fn max_read_interval(&self) -> Option<Duration> {
            None
        }
    }

    #[test]
    fn background_reads_catch_every_wrap() {
        let range = 1_000_000; // 1 J
        let raw = Arc::new(AtomicU64::new(0));
        let last_read = Arc::new(AtomicU64::new(0));
        let src = Shared {
            raw: Arc::clone(&raw),
            last_read: Arc::clone(&last_read),
            acc: WrapAccumulator::new(0, range),
            domains: vec![Domain {
                name: "package-0".into(),
                kind: DomainKind::Package,
            }],
        };
        let sampled = SampledSource::start(Box::new(src), Duration::from_millis(2));
        // Advance 0.3 J at a time for 20 steps (6 J, six wraps), never reading ourselves:
        // only the background thread can see the wraps. Each step waits for the thread to
        // have read it (consecutive raw values differ), so that no scheduling of the thread
        // can let the counter pass a whole range between its reads.
        let mut truth = 0u64;
        for _ in 0..20 {
            truth += 300_000;
            raw.store(truth % range, Ordering::SeqCst);
            // A guard against a hang, not a verdict: the thread reads every 2 ms.
            let deadline = Instant::now() + Duration::from_secs(60);
            while last_read.load(Ordering::SeqCst) != truth % range {
                assert!(Instant::now() < deadline, "no background read");
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let joules = sampled.read().unwrap()[0];
        assert!((joules - 6.0).abs() < 1e-9, "{joules}");
    }

    #[test]
    fn interval_choice_and_warning() {
        let safe = Some(Duration::from_millis(10));
        assert_eq!(
            choose_read_interval(safe, None).0,
            Duration::from_millis(10)
        );
        assert_eq!(choose_read_interval(None, None).0, DEFAULT_READ_INTERVAL);
        let (iv, warn) = choose_read_interval(safe, Some(Duration::from_millis(50)));
        assert_eq!(iv, Duration::from_millis(50));
        assert!(warn.unwrap().contains("miss wraps"));
        assert!(choose_read_interval(safe, Some(Duration::from_millis(5)))
            .1
            .is_none());
    }
}
