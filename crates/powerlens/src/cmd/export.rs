//! `powerlens export REC --format …`: a recording as a file for the timeline viewers
//! developers already use (Perfetto, the Firefox Profiler) or as the raw event stream for
//! scripts (JSON Lines, CSV). One pass over the recording's events; the output is written
//! to `FILE.tmp` and renamed over `FILE` only when complete.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use powerlens_core::sched::event::Event;
use powerlens_core::sched::event::StackId;
use powerlens_core::stacks::ResolvedStacks;
use powerlens_report::export::events::{EventWriter, Flavour};
use powerlens_report::export::firefox::{FirefoxWriter, StackFrames};
use powerlens_report::export::perfetto::PerfettoWriter;
use powerlens_report::export::{self, Counter, Counts, EnergySample, ThreadInfo};
use powerlens_store::recording::RecordingReader;
use powerlens_sys::symbolize::KERNEL_MODULE;

use crate::args::GlobalArgs;
use crate::progress;
use powerlens_record::interrupt;
use powerlens_record::{meta, replay, sampler, symbols, MODE_REDUCED};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens export run.rec --format perfetto -o run.pftrace    # ui.perfetto.dev
  powerlens export run.rec --format firefox -o run.json        # profiler.firefox.com
  powerlens export run.rec --format json -o - | jq 'select(.event == \"wakeup\")'
  powerlens export run.rec --format csv -o events.csv

Formats (docs/EXPORT.md):
  perfetto  native Perfetto protobuf trace: per-CPU sched_switch, sched_wakeup(_new),
            sched_migrate_task, cpu_idle, cpu_frequency and process fork/exec/exit events
            (Perfetto draws CPU, thread-state, idle and frequency tracks from them), the
            process tree, and power/energy counter tracks when a meter was sampled.
  firefox   Firefox Profiler processed profile (JSON): a track per thread with running,
            runnable and blocked interval markers and wake-up markers naming the waker,
            power/energy counters when a meter was sampled. No CPU samples (no stacks yet).
  json      JSON Lines: one object per event, in time order, thread names resolved.
  csv       the same, one row per event under a header.

The file is written to FILE.tmp and renamed to FILE when complete: an interrupted or failed
export leaves the previous FILE untouched and no partial file behind.")]
pub struct ExportArgs {
    /// The recording, as written by `powerlens record`.
    #[arg(value_name = "REC", default_value = "powerlens.rec")]
    pub recording: PathBuf,

    /// What to write.
    #[arg(long, short = 'f', value_enum)]
    pub format: Format,

    /// Output file ("-" for stdout) [default: REC with the format's extension:
    /// .pftrace, .firefox.json, .events.json, .events.csv].
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Native Perfetto trace (protobuf), for ui.perfetto.dev and trace_processor.
    Perfetto,
    /// Firefox Profiler profile (JSON), for profiler.firefox.com.
    Firefox,
    /// JSON Lines, one object per event.
    Json,
    /// CSV, one row per event.
    Csv,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Perfetto => "pftrace",
            Format::Firefox => "firefox.json",
            Format::Json => "events.json",
            Format::Csv => "events.csv",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "Perfetto trace",
            Format::Firefox => "Firefox Profiler profile",
            Format::Json => "JSON Lines",
            Format::Csv => "CSV",
        }
    }
}

/// What every writer does with the stream.
trait Sink {
    fn event(&mut self, e: &Event) -> std::io::Result<()>;
    /// Writes what is still buffered; returns the per-CPU counts of the events seen.
    fn finish(self: Box<Self>) -> std::io::Result<Counts>;
}

impl<W: Write> Sink for PerfettoWriter<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        PerfettoWriter::event(self, e)
    }
    fn finish(self: Box<Self>) -> std::io::Result<Counts> {
        Ok(PerfettoWriter::finish(*self)?.1)
    }
}

impl<W: Write> Sink for EventWriter<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        EventWriter::event(self, e)
    }
    fn finish(self: Box<Self>) -> std::io::Result<Counts> {
        Ok(EventWriter::finish(*self)?.1)
    }
}

/// The Firefox profile is built in memory and written at the end.
struct FirefoxSink {
    writer: FirefoxWriter,
    out: Box<dyn Write>,
    end_ns: u64,
}

impl Sink for FirefoxSink {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        self.writer.event(e);
        Ok(())
    }
    fn finish(self: Box<Self>) -> std::io::Result<Counts> {
        let this = *self;
        let mut out = this.out;
        let (counts, markers) = this.writer.finish(this.end_ns, &mut out)?;
        out.flush()?;
        eprintln!(
            "markers: {} running, {} runnable, {} blocked intervals, {} wake-ups; {} CPU samples ({} with call stacks)",
            markers.running,
            markers.runnable,
            markers.blocked,
            markers.wakeups,
            markers.samples,
            markers.samples_with_stacks
        );
        Ok(counts)
    }
}

/// Writes `content` to `path` through `FILE.tmp`, renamed when complete: a failure leaves
/// nothing behind. Used by every `--html FILE`.
pub(crate) fn write_whole(path: &Path, content: &[u8]) -> anyhow::Result<()> {
    let (target, mut out) = Target::open(path)?;
    if let Err(e) = out.write_all(content).and_then(|_| out.flush()) {
        drop(out);
        target.abandon();
        return Err(e).with_context(|| {
            format!("writing {} failed; nothing was left behind", path.display())
        });
    }
    drop(out);
    target.commit()
}

/// Where the export goes: `FILE.tmp`, renamed to `FILE` at the end, or stdout.
pub(crate) enum Target {
    File { tmp: PathBuf, path: PathBuf },
    Stdout,
}

impl Target {
    pub(crate) fn open(path: &Path) -> anyhow::Result<(Self, Box<dyn Write>)> {
        if path == Path::new("-") {
            return Ok((Target::Stdout, Box::new(std::io::stdout().lock())));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        // A FILE.tmp left by a killed run is removed (unlink never follows a link), and the
        // new one is created exclusively: a symbolic link planted there in between makes
        // the creation fail rather than send the output (command lines) elsewhere.
        if tmp.symlink_metadata().is_ok() {
            let _ = std::fs::remove_file(&tmp);
        }
        let file = File::options().write(true).create_new(true).open(&tmp).with_context(|| {
            format!(
                "cannot write the export to {} (creating {} failed; check that the directory exists and is writable, or choose another file)",
                path.display(),
                tmp.display()
            )
        })?;
        Ok((
            Target::File {
                tmp,
                path: path.to_path_buf(),
            },
            Box::new(BufWriter::with_capacity(1 << 20, file)),
        ))
    }

    /// Moves the finished file into place.
    pub(crate) fn commit(self) -> anyhow::Result<()> {
        if let Target::File { tmp, path } = self {
            if let Err(e) = std::fs::rename(&tmp, &path) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e).with_context(|| {
                    format!(
                        "cannot write the export to {}: renaming {} onto it failed",
                        path.display(),
                        tmp.display()
                    )
                });
            }
        }
        Ok(())
    }

    /// Removes the partial file after a failure.
    pub(crate) fn abandon(self) {
        if let Target::File { tmp, .. } = self {
            let _ = std::fs::remove_file(tmp);
        }
    }

    fn describe(&self) -> String {
        match self {
            Target::File { path, .. } => path.display().to_string(),
            Target::Stdout => "stdout".to_string(),
        }
    }
}

pub fn execute(global: &GlobalArgs, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let (reader, damage) = powerlens_record::open_recording(&args.recording)?;
    if let Some(warning) = damage {
        eprintln!("warning: {warning}");
    }
    let mode = reader.meta(meta::MODE)?;
    if mode.as_ref().and_then(|m| m.as_str()) == Some(MODE_REDUCED) {
        bail!(
            "{} is a reduced recording (per-thread procfs samples, no scheduler events): there is no event stream to export. \
Record with tracepoints (as root, with CAP_PERFMON, or with kernel.perf_event_paranoid <= -1) to export it; `powerlens report` still shows what it has",
            args.recording.display()
        );
    }
    let output = args.output.clone().unwrap_or_else(|| {
        let mut p = args.recording.clone();
        p.set_extension(args.format.extension());
        p
    });
    let threads: Vec<ThreadInfo> = reader
        .threads()?
        .into_iter()
        .map(|r| ThreadInfo {
            tid: r.tid,
            pid: r.pid,
            ppid: r.ppid,
            comm: r.comm,
        })
        .collect();
    let counters = energy_counters(&reader)?;
    let start = reader.meta(meta::START)?.unwrap_or_default();
    let start_ns = start["monotonic_ns"].as_u64().unwrap_or(0);
    let stop_ns = reader
        .meta(meta::STOP)?
        .and_then(|s| s["monotonic_ns"].as_u64())
        .unwrap_or(0);
    let title = product(&reader, &args.recording)?;
    let clock = Clock {
        start_ns,
        start_unix_s: start["unix_s"].as_f64().unwrap_or(0.0),
        stop_ns,
    };
    let cpus = reader.cpus()?;
    // The Firefox profile's call trees need the stacks' names.
    let stacks = if args.format == Format::Firefox {
        symbols::resolve(&reader, &global.roots()?, Default::default())?.map(|r| {
            for warning in &r.warnings {
                eprintln!("warning: {warning}");
            }
            stack_frames(&r.stacks)
        })
    } else {
        None
    };

    // Ctrl-C stops the export and removes the partial file (the previous FILE stays).
    interrupt::install();
    let (target, out) = Target::open(&output)?;
    let written = write(
        &reader,
        args.format,
        out,
        &threads,
        &counters,
        &title,
        clock,
        stacks,
    );
    let counts = match written {
        Ok(c) => c,
        Err(e) => {
            let what = target.describe();
            let left = match target {
                Target::File { .. } => "; nothing was left behind",
                Target::Stdout => "",
            };
            target.abandon();
            if interrupt::interrupted() {
                eprintln!("powerlens: export to {what} interrupted{left}");
                return Ok(ExitCode::from(130));
            }
            return Err(e.context(format!("exporting to {what} failed{left}")));
        }
    };
    let what = target.describe();
    target.commit()?;

    let s = counts.sum();
    let mut summary = format!(
        "wrote {} to {what}: {} events on {} CPUs ({} switches, {} wake-ups, {} idle, {} frequency, {} migrations, {} fork/exec/exit",
        args.format.name(),
        s.total(),
        cpus.len(),
        s.switches,
        s.wakeups,
        s.idle,
        s.frequency,
        s.migrations,
        s.process,
    );
    if args.format != Format::Json && args.format != Format::Csv {
        summary += &format!(
            "; {} interrupt entries/exits not written), {} counter tracks",
            s.interrupts,
            counters.len()
        );
    } else {
        summary += &format!(", {} interrupt entries/exits)", s.interrupts);
    }
    eprintln!("{summary}");
    if s.total() == 0 {
        eprintln!("note: the recording has no events (it stopped before the first flush?)");
    } else if args.format == Format::Perfetto || args.format == Format::Firefox {
        for m in export::missing(
            &counts,
            &cpus,
            counters.len(),
            args.format == Format::Perfetto,
        ) {
            eprintln!("note: {m}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Each stack's frames as the Firefox profile names them, innermost first.
fn stack_frames(stacks: &ResolvedStacks) -> StackFrames {
    (0..stacks.len() as StackId)
        .map(|id| {
            stacks
                .frames(id)
                .iter()
                .zip(stacks.describe(id))
                .map(|(f, text)| (text, stacks.function(*f).module == KERNEL_MODULE))
                .collect()
        })
        .collect()
}

/// One pass over the events into the chosen writer.
#[allow(clippy::too_many_arguments)]
fn write(
    reader: &RecordingReader,
    format: Format,
    out: Box<dyn Write>,
    threads: &[ThreadInfo],
    counters: &[Counter],
    title: &str,
    clock: Clock,
    stacks: Option<StackFrames>,
) -> anyhow::Result<Counts> {
    let mut sink: Box<dyn Sink> = match format {
        Format::Firefox => {
            let mut writer = FirefoxWriter::new(title, threads, clock.start_ns, clock.start_unix_s);
            writer.counters(counters);
            if let Some(stacks) = stacks {
                writer.set_stacks(stacks);
            }
            Box::new(FirefoxSink {
                writer,
                out,
                end_ns: clock.stop_ns,
            })
        }
        Format::Perfetto => {
            let mut w = PerfettoWriter::new(out, threads, clock.start_ns)?;
            for c in counters {
                w.counter(c)?;
            }
            Box::new(w)
        }
        Format::Json => Box::new(EventWriter::new(out, Flavour::JsonLines, threads)?),
        Format::Csv => Box::new(EventWriter::new(out, Flavour::Csv, threads)?),
    };
    let total = reader.event_count()?;
    let bar = progress::bar(total, "exporting");
    let mut failed: Option<std::io::Error> = None;
    // The views draw stacks from their records (a CPU-time sample's stack comes after it).
    let stats = replay::replay(
        reader,
        replay::unfolded(|e, _| {
            if failed.is_none() {
                if let Err(err) = sink.event(e) {
                    failed = Some(err);
                } else if interrupt::interrupted() {
                    failed = Some(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "interrupted",
                    ));
                }
            }
        }),
        |n| bar.set_position(n),
    )?;
    bar.finish_and_clear();
    if let Some(e) = failed {
        return Err(e.into());
    }
    if let Some(warning) = stats.short_read(reader.path()) {
        eprintln!("warning: {warning}");
    }
    if let Some(note) = stats.reordered_note() {
        eprintln!("note: {note}");
    }
    Ok(sink.finish()?)
}

/// The recording's clock: start (monotonic and wall clock) and stop.
#[derive(Debug, Clone, Copy)]
struct Clock {
    start_ns: u64,
    start_unix_s: f64,
    stop_ns: u64,
}

/// A title for the profile: the recorded command, else the recording's file name.
fn product(reader: &RecordingReader, path: &Path) -> anyhow::Result<String> {
    let target = reader.meta(meta::TARGET)?.unwrap_or_default();
    let command: Vec<&str> = target["command"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect();
    Ok(if command.is_empty() {
        format!("powerlens recording {}", path.display())
    } else {
        format!("powerlens record -- {}", command.join(" "))
    })
}

/// Power and energy counters from the recording's energy samples (none without a meter).
pub(crate) fn energy_counters(reader: &RecordingReader) -> anyhow::Result<Vec<Counter>> {
    let mut samples = Vec::new();
    reader.samples(sampler::ENERGY, |t, data| {
        samples.push(EnergySample {
            time_ns: t,
            total_j: data["total_j"].as_f64(),
            domains_j: data["domains_j"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                .collect(),
        });
    })?;
    Ok(export::energy_counters(&samples))
}
