//! The recorder used as a library, the way `agent` and `top` will: record a command
//! through [`powerlens_record::record`], then read it back with [`powerlens_record::replay`].
//! Needs tracing privileges (root, as CI runs); without them the test says so and checks
//! the reduced recording instead.

use std::time::Duration;

use powerlens_core::sched::event::EventKind;
use powerlens_record::meter::MeterOptions;
use powerlens_record::replay::replay;
use powerlens_record::{no_phase, record, tell_nobody, RecordOptions, Target, MODE_REDUCED};
use powerlens_store::recording::RecordingReader;
use powerlens_sys::Roots;

fn options(output: std::path::PathBuf, command: &[&str]) -> RecordOptions {
    RecordOptions {
        output,
        target: Target::Command(command.iter().map(|s| s.to_string()).collect()),
        duration: None,
        sample_interval: Duration::from_millis(100),
        baseline: Duration::ZERO,
        buffer_pages: 64,
        reduced: false,
        show_output: false,
        meter: MeterOptions::default(),
        stacks_hz: Some(999),
        stack_bytes: 512,
        kernel_stacks: false,
        full_stacks: false,
        stack_samples_per_s: Some(10_000),
        in_kernel: true,
        command_env: Vec::new(),
        untraced_runs: 0,
        show_phase: no_phase,
        tell_now: tell_nobody,
    }
}

/// A shell that runs /bin/true three times and exits 3: the summary and the replayed
/// stream agree with what the shell did.
#[test]
fn a_command_recorded_through_the_library_replays_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.rec");
    let opts = options(
        path.clone(),
        &["sh", "-c", "/bin/true; /bin/true; /bin/true; exit 3"],
    );
    let summary = record(&Roots::default(), &opts).expect("recording through the library");
    assert_eq!(summary.path, path);
    let exit = summary.exit.expect("the command's exit status");
    assert_eq!(exit.code, Some(3), "{exit:?}");
    let reader = RecordingReader::open(&path).unwrap();
    if summary.mode == MODE_REDUCED {
        eprintln!("no tracing privileges here: only the reduced recording was checked");
        assert!(summary.threads >= 1);
        return;
    }
    assert_eq!(reader.event_count().unwrap(), summary.events);

    let (mut last, mut forks_by_shell, mut execs_of_true) = (0u64, 0, 0);
    let mut shell = None;
    let stats = replay(
        &reader,
        |e, _context| {
            assert!(e.time_ns >= last, "time order: {} after {last}", e.time_ns);
            last = e.time_ns;
            match e.kind {
                EventKind::Exec { tid, comm } if comm == "sh" => shell = Some(tid),
                EventKind::Fork { parent, .. } if Some(parent) == shell => forks_by_shell += 1,
                EventKind::Exec { comm, .. } if comm == "true" => execs_of_true += 1,
                _ => {}
            }
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(stats.events, summary.events, "every event replayed once");
    assert_eq!(stats.counted, stats.events);
    assert_eq!(stats.short_read(&path), None);
    assert!(shell.is_some(), "the shell's exec was recorded");
    assert_eq!(forks_by_shell, 3, "one fork per command");
    assert_eq!(execs_of_true, 3, "each child ran /bin/true");

    // Every file module is recorded with the build ID binutils reads from it (the oracle),
    // so that a later report can tell a rebuilt or upgraded file from the one recorded.
    let build_ids = reader.module_build_ids().unwrap();
    let files: Vec<(u32, String)> = reader
        .modules()
        .unwrap()
        .into_iter()
        .filter(|(_, path)| path.starts_with('/') && std::path::Path::new(path).exists())
        .collect();
    assert!(
        !files.is_empty(),
        "the shell's and libc's frames name files"
    );
    for (id, path) in files {
        let out = std::process::Command::new("readelf")
            .args(["-n", &path])
            .output()
            .expect("readelf (binutils)");
        let expected = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string));
        assert_eq!(build_ids.get(&id), expected.as_ref(), "{path}");
    }
}

/// What the library has to say at once goes to the caller's `tell_now`, not to stderr: a
/// second recording to the same path moves the first aside to `FILE.old` and says so there.
#[test]
fn an_existing_recording_is_moved_aside_and_the_caller_is_told() {
    static TOLD: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.rec");
    let mut opts = options(path.clone(), &["/bin/true"]);
    opts.reduced = true;
    opts.tell_now = |message| TOLD.lock().unwrap().push(message.to_string());
    record(&Roots::default(), &opts).expect("the first recording");
    assert!(
        TOLD.lock().unwrap().is_empty(),
        "{:?}",
        TOLD.lock().unwrap()
    );
    record(&Roots::default(), &opts).expect("the second recording");
    let old = dir.path().join("again.rec.old");
    assert!(old.exists() && path.exists());
    assert_eq!(
        *TOLD.lock().unwrap(),
        [format!(
            "moved the existing {} to {}",
            path.display(),
            old.display()
        )]
    );
}
