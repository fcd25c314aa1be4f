use super::*;
use crate::sched::event::{
    Event, EventKind, InterruptKind, Name, StackId, SwitchedOut, Tid, IDLE_TID,
};

fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
    Event { time_ns, cpu, kind }
}

fn encode(events: &[Event]) -> Vec<u8> {
    let mut enc = ChunkEncoder::new();
    for e in events {
        enc.push(e);
    }
    let expected_len = enc.encoded_bytes();
    let bytes = enc.finish();
    assert_eq!(bytes.len(), expected_len, "encoded_bytes is exact");
    assert!(enc.is_empty() && enc.first_ns().is_none(), "finish resets");
    bytes
}

#[test]
fn contexts_round_trip_and_cost_a_byte_only_when_they_change() {
    let events: Vec<Event> = (0..6)
        .map(|i| ev(100 + i, 0, EventKind::IdleExit))
        .collect();
    let contexts = [Some(7), Some(7), None, Some(0), Some(9), Some(9)];
    let mut enc = ChunkEncoder::new();
    for (e, c) in events.iter().zip(contexts) {
        enc.push_in_context(e, c);
    }
    let with = enc.finish();
    let plain = encode(&events);
    let (out, ctx): (Vec<Event>, Vec<Option<Tid>>) = stream(&with).unwrap().into_iter().unzip();
    assert_eq!(out, events);
    assert_eq!(ctx, contexts);
    // Four changes (7, None, 0, 9): one varint each; tids 7, 0 and 9 interned once (the
    // table's count stays one byte). The tag bits are free.
    assert_eq!(with.len(), plain.len() + 4 + 3);
    // A plain decode skips the contexts; a plain chunk decodes to unknown contexts.
    let mut out2 = Vec::new();
    decode_chunk(&with, &mut out2).unwrap();
    assert_eq!(out2, events);
    let ctx3: Vec<Option<Tid>> = stream(&plain)
        .unwrap()
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    assert_eq!(ctx3, vec![None; 6]);
}

/// A chunk through [`decode_chunk_in_context`], events paired with their contexts'
/// threads, folded stacks unfolded again: the records as they were encoded.
fn stream(bytes: &[u8]) -> Result<Vec<(Event, Option<Tid>)>, CodecError> {
    let (mut events, mut contexts) = (Vec::new(), Vec::new());
    decode_chunk_in_context(bytes, &mut events, &mut contexts)?;
    assert_eq!(events.len(), contexts.len());
    Ok(unfold(&events, &contexts))
}

/// The widest event a decoding window can meet: a migration (three payload varints)
/// with a CPU and a context, every varint padded to eight bytes (a crafted chunk; the
/// encoder writes the shortest form), then its stack record with a padded id, early
/// in a chunk (read from a window). It decodes as the checked reader reads it, the
/// stack folded in, and a ninth padding byte sends it to the checked reader.
#[test]
fn the_widest_event_a_window_holds_reads_as_the_checked_reader_reads_it() {
    let padded = |v: u8, len: usize| {
        let mut b = vec![0x80u8; len];
        b[0] |= v;
        b[len - 1] = 0;
        b
    };
    for len in [8, 9] {
        let mut body = Vec::new();
        for v in [CODEC_VERSION as u64, 12, 1_000, 1, 7, 0] {
            put_varint(&mut body, v); // version, count, base, 1 tid (7), no strings
        }
        body.push(MIGRATE | FLAG_CPU | FLAG_CONTEXT);
        for v in [5, 1, 1, 0, 2, 3] {
            body.extend(padded(v, len)); // time +5, cpu 1, context tids[0], tid 0, 2 → 3
        }
        body.extend([STACK, 0]);
        body.extend(padded(4, len));
        for _ in 0..10 {
            body.extend([IDLE_EXIT, 1]);
        }
        let crc = crc32(&body);
        body.extend(crc.to_le_bytes());
        let (mut events, mut contexts) = (Vec::new(), Vec::new());
        decode_chunk_in_context(&body, &mut events, &mut contexts).unwrap();
        let migrate = EventKind::Migrate {
            tid: 7,
            from: 2,
            to: 3,
        };
        assert_eq!(events[0], ev(1_005, 1, migrate), "{len}-byte varints");
        assert_eq!(contexts[0], EventContext::new(Some(7), Some(4)));
        assert_eq!(events.len(), 11);
        let mut plain = Vec::new();
        decode_chunk(&body, &mut plain).unwrap();
        let records: Vec<Event> = unfold(&events, &contexts)
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        assert_eq!(records, plain);
    }
}

/// A stack record right after its event (same time, CPU and context) is folded into
/// it; one at a chunk's start, a second one, one at another time, CPU or context stays
/// a record of its own. Unfolded, the records are the ones encoded.
#[test]
fn stacks_fold_into_the_event_they_were_recorded_with() {
    let stack = |t, cpu, id| ev(t, cpu, EventKind::Stack { id });
    let records = [
        (stack(100, 0, 9), Some(5)),
        (ev(200, 0, EventKind::IdleExit), Some(5)),
        (stack(200, 0, 1), Some(5)),
        (stack(200, 0, 2), Some(5)),
        (ev(300, 0, EventKind::IdleExit), Some(5)),
        (stack(301, 0, 3), Some(5)),
        (ev(400, 0, EventKind::IdleExit), Some(5)),
        (stack(400, 1, 4), Some(5)),
        (ev(500, 1, EventKind::IdleExit), Some(5)),
        (stack(500, 1, 6), Some(7)),
        (ev(600, 1, EventKind::IdleExit), None),
        (stack(600, 1, 8), None),
    ];
    let mut enc = ChunkEncoder::new();
    for (e, c) in &records {
        enc.push_in_context(e, *c);
    }
    let bytes = enc.finish();
    let (mut events, mut contexts) = (Vec::new(), Vec::new());
    decode_chunk_in_context(&bytes, &mut events, &mut contexts).unwrap();
    let stacks: Vec<(u64, Option<StackId>)> = events
        .iter()
        .zip(&contexts)
        .map(|(e, c)| (e.time_ns, c.stack()))
        .collect();
    assert_eq!(
        stacks,
        [
            (100, None),
            (200, Some(1)),
            (200, None),
            (300, None),
            (301, None),
            (400, None),
            (400, None),
            (500, None),
            (500, None),
            (600, Some(8)),
        ]
    );
    assert_eq!(unfold(&events, &contexts), records);
}

/// Bytes that pass the checksum but do not parse (a foreign encoder): an error, with
/// the events before them kept, so a reader delivers what came before the damage.
#[test]
fn a_parse_error_keeps_the_events_before_it() {
    let events = every_kind(1_000, 1);
    let good = encode(&events);
    let body = &good[..good.len() - 4];
    // The same chunk announcing one event more, which is a tag the format lacks.
    let mut r = Reader { data: body, pos: 0 };
    r.varint().unwrap();
    let count = r.varint().unwrap();
    let mut bytes = Vec::new();
    put_varint(&mut bytes, CODEC_VERSION as u64);
    put_varint(&mut bytes, count + 1);
    bytes.extend_from_slice(&body[r.pos..]);
    bytes.extend_from_slice(&[0x1F, 0]);
    bytes.extend_from_slice(&crc32(&bytes).to_le_bytes());
    let (mut out, mut contexts) = (Vec::new(), Vec::new());
    let err = decode_chunk_in_context(&bytes, &mut out, &mut contexts).unwrap_err();
    assert!(matches!(err, CodecError::Tag { tag: 0x1F, .. }), "{err}");
    assert_eq!(out.len(), contexts.len());
    let unfolded: Vec<Event> = unfold(&out, &contexts)
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    assert_eq!(unfolded, events);
}

#[test]
fn the_decoder_in_context_reads_what_the_chunk_decoder_reads() {
    let events: Vec<Event> = (0..3)
        .flat_map(|i| every_kind(1_000 + i * 1_000_000, i as u32))
        .collect();
    let bytes = encode(&events);
    let streamed: Vec<Event> = stream(&bytes)
        .unwrap()
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    assert_eq!(streamed, events);
    // Damage is found before the first event (the checksum), or at the end (bytes
    // after the last event, which a checksum computed over them does not catch).
    let mut damaged = bytes.clone();
    damaged[5] ^= 0x40;
    assert!(matches!(stream(&damaged), Err(CodecError::Checksum { .. })));
    let mut trailing = bytes[..bytes.len() - 4].to_vec();
    trailing.push(0);
    trailing.extend_from_slice(&crc32(&trailing).to_le_bytes());
    assert!(matches!(
        stream(&trailing),
        Err(CodecError::Trailing { count: 1, .. })
    ));
    assert!(matches!(
        decode_chunk(&trailing, &mut Vec::new()),
        Err(CodecError::Trailing { count: 1, .. })
    ));
}

fn round_trip(events: &[Event]) -> Vec<u8> {
    let bytes = encode(events);
    let mut out = vec![ev(1, 1, EventKind::IdleExit)];
    decode_chunk(&bytes, &mut out).unwrap();
    assert_eq!(out[0], ev(1, 1, EventKind::IdleExit), "decode appends");
    assert_eq!(&out[1..], events);
    bytes
}

fn every_kind(t: u64, cpu: u32) -> Vec<Event> {
    use EventKind::*;
    use InterruptKind::*;
    let kinds = vec![
        Switch {
            prev: 7,
            how: SwitchedOut::Preempted,
            next: 8,
        },
        Switch {
            prev: 8,
            how: SwitchedOut::Blocked,
            next: IDLE_TID,
        },
        Switch {
            prev: 9,
            how: SwitchedOut::Exited,
            next: 7,
        },
        Wakeup {
            tid: 8,
            target_cpu: cpu,
            new_thread: false,
        },
        Wakeup {
            tid: 10,
            target_cpu: cpu ^ 1,
            new_thread: true,
        },
        Migrate {
            tid: 8,
            from: 0,
            to: 3,
        },
        Fork {
            parent: 7,
            child: 10,
        },
        Exec {
            tid: 10,
            comm: "make".into(),
        },
        Exit { tid: 9 },
        IdleEnter { state: 2 },
        IdleExit,
        InterruptEnter(Timer {
            timer: 0,
            function: 0,
        }),
        InterruptEnter(Timer {
            timer: 0xffff_c900_056d_3be0,
            function: 0xffff_ffff_8142_d089,
        }),
        TimerArm {
            timer: 0xffff_c900_056d_3be0,
            function: 0xffff_ffff_8142_d089,
        },
        Stack { id: 0 },
        CpuSample {
            tid: 8,
            period_ns: 1_001_234,
        },
        Stack { id: 70_000 },
        InterruptEnter(Irq("virtio0-input.0".into())),
        InterruptEnter(SoftIrq("NET_RX".into())),
        InterruptEnter(Ipi),
        InterruptExit,
        Frequency { khz: 2_400_000 },
        Runtime {
            tid: 8,
            ns: 1_234_567,
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| ev(t + i as u64 * 1000, cpu, k))
        .collect()
}

/// The example of docs/FORMAT.md, byte by byte.
#[test]
fn documented_example_bytes() {
    let events = [
        ev(
            1_000,
            2,
            EventKind::Wakeup {
                tid: 500,
                target_cpu: 2,
                new_thread: false,
            },
        ),
        ev(
            2_500,
            2,
            EventKind::Switch {
                prev: IDLE_TID,
                how: SwitchedOut::Blocked,
                next: 500,
            },
        ),
    ];
    let bytes = round_trip(&events);
    let body = [
        0x02, 0x02, 0xe8, 0x07, 0x02, 0xf4, 0x03, 0x00, 0x00, // header, tids, strings
        0x63, 0x00, 0x02, 0x00, // wake-up
        0x01, 0xdc, 0x0b, 0x01, 0x00, // switch
    ];
    assert_eq!(&bytes[..body.len()], &body);
    assert_eq!(&bytes[body.len()..], &crc32(&body).to_le_bytes());
    assert_eq!(bytes.len(), body.len() + 4);
}

#[test]
fn crc32_is_the_standard_one() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"a"), 0xE8B7_BE43);
    // The sliced loop agrees with the bytewise definition at every alignment/length.
    let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
    for len in 0..data.len() {
        let mut c = !0u32;
        for &b in &data[..len] {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        assert_eq!(crc32(&data[..len]), !c, "length {len}");
    }
}

#[test]
fn every_variant_round_trips() {
    let events = every_kind(1_000_000_000, 1);
    // The test covers every code the format defines (stacks twice: a small and a
    // multi-byte id).
    assert_eq!(events.len(), LAST_CODE as usize + 2);
    round_trip(&events);
    round_trip(&every_kind(0, 0));
}

#[test]
fn empty_chunk_round_trips() {
    let bytes = round_trip(&[]);
    let mut out = Vec::new();
    decode_chunk(&bytes, &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn edge_values_round_trip() {
    use EventKind::*;
    let long = "x".repeat(100_000) + "é漢";
    let events = vec![
        ev(
            0,
            u32::MAX,
            Switch {
                prev: u32::MAX,
                how: SwitchedOut::Blocked,
                next: 0,
            },
        ),
        ev(
            u64::MAX - 1,
            0,
            Wakeup {
                tid: u32::MAX,
                target_cpu: u32::MAX,
                new_thread: true,
            },
        ),
        ev(
            u64::MAX,
            u32::MAX,
            Migrate {
                tid: 0,
                from: u32::MAX,
                to: u32::MAX,
            },
        ),
        ev(
            u64::MAX,
            u32::MAX,
            Exec {
                tid: u32::MAX,
                comm: Name::new(""),
            },
        ),
        ev(
            u64::MAX,
            7,
            Exec {
                tid: 1,
                comm: Name::new(&long),
            },
        ),
        ev(
            u64::MAX,
            7,
            InterruptEnter(InterruptKind::Irq(Name::new(&long))),
        ),
        ev(
            u64::MAX,
            7,
            InterruptEnter(InterruptKind::SoftIrq(Name::new(""))),
        ),
        ev(u64::MAX, 7, Frequency { khz: u64::MAX }),
        ev(u64::MAX, 7, IdleEnter { state: u32::MAX }),
    ];
    round_trip(&events);
    // A chunk starting at u64::MAX.
    round_trip(&[ev(u64::MAX, 3, IdleExit), ev(u64::MAX, 3, IdleExit)]);
}

#[test]
#[cfg(not(debug_assertions))]
fn out_of_order_times_still_round_trip_in_release() {
    round_trip(&[
        ev(10, 0, EventKind::IdleExit),
        ev(5, 0, EventKind::IdleExit),
    ]);
}

/// xorshift64: deterministic pseudo-random numbers for the property tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_stream(rng: &mut Rng, n: usize) -> Vec<Event> {
    let mut t = rng.next() >> 4;
    let names = [
        "timer",
        "eth0",
        "",
        "NET_RX",
        "RCU",
        "a-much-longer-name-1234",
    ];
    (0..n)
        .map(|_| {
            // Mostly small steps, sometimes large ones, sometimes none.
            t += match rng.below(10) {
                0 => 0,
                1 => rng.below(1 << 40),
                _ => rng.below(50_000),
            };
            let cpu = if rng.below(20) == 0 {
                rng.next() as u32
            } else {
                rng.below(4) as u32
            };
            let tid = |rng: &mut Rng| {
                if rng.below(30) == 0 {
                    rng.next() as u32
                } else {
                    rng.below(300) as u32
                }
            };
            let name = |rng: &mut Rng| names[rng.below(names.len() as u64) as usize].to_string();
            let kind = match rng.below(18) {
                0 => EventKind::Switch {
                    prev: tid(rng),
                    how: SwitchedOut::Preempted,
                    next: tid(rng),
                },
                1 => EventKind::Switch {
                    prev: tid(rng),
                    how: SwitchedOut::Blocked,
                    next: tid(rng),
                },
                2 => EventKind::Switch {
                    prev: tid(rng),
                    how: SwitchedOut::Exited,
                    next: tid(rng),
                },
                3 | 4 => EventKind::Wakeup {
                    tid: tid(rng),
                    target_cpu: if rng.below(2) == 0 {
                        cpu
                    } else {
                        rng.below(8) as u32
                    },
                    new_thread: rng.below(2) == 0,
                },
                5 => EventKind::Migrate {
                    tid: tid(rng),
                    from: rng.below(8) as u32,
                    to: rng.next() as u32,
                },
                6 => EventKind::Fork {
                    parent: tid(rng),
                    child: tid(rng),
                },
                7 => EventKind::Exec {
                    tid: tid(rng),
                    comm: name(rng).into(),
                },
                8 => EventKind::Exit { tid: tid(rng) },
                9 => EventKind::IdleEnter {
                    state: rng.below(5) as u32,
                },
                10 => EventKind::IdleExit,
                11 => EventKind::InterruptEnter(InterruptKind::Timer {
                    timer: 0,
                    function: 0,
                }),
                12 => EventKind::InterruptEnter(InterruptKind::Irq(name(rng).into())),
                13 => EventKind::InterruptEnter(InterruptKind::SoftIrq(name(rng).into())),
                14 => EventKind::InterruptEnter(InterruptKind::Ipi),
                15 => EventKind::InterruptExit,
                16 => EventKind::Runtime {
                    tid: tid(rng),
                    ns: rng.next(),
                },
                _ => EventKind::Frequency { khz: rng.next() },
            };
            ev(t, cpu, kind)
        })
        .collect()
}

#[test]
fn random_streams_round_trip_and_encoder_is_reusable() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut enc = ChunkEncoder::new();
    for round in 0..200 {
        let n = rng.below(if round % 10 == 0 { 5000 } else { 200 }) as usize;
        let events = random_stream(&mut rng, n);
        for e in &events {
            enc.push(e);
        }
        assert_eq!(enc.len(), n);
        assert_eq!(enc.first_ns(), events.first().map(|e| e.time_ns));
        assert_eq!(enc.last_ns(), events.last().map(|e| e.time_ns));
        let predicted = enc.encoded_bytes();
        let bytes = enc.finish();
        assert_eq!(bytes.len(), predicted);
        let mut out = Vec::new();
        decode_chunk(&bytes, &mut out).unwrap();
        assert_eq!(out, events, "round {round}");
    }
}

fn scheduler_stream(n: usize) -> Vec<Event> {
    // Switches and same-CPU wake-ups among 50 threads on one CPU, a few µs apart.
    let mut rng = Rng(42);
    let mut t = 10_000_000_000u64;
    let mut running = IDLE_TID;
    let mut events = Vec::with_capacity(n);
    while events.len() < n {
        t += 1_000 + rng.below(20_000);
        let tid = 30_000 + rng.below(50) as u32;
        let kind = if rng.below(2) == 0 {
            EventKind::Wakeup {
                tid,
                target_cpu: 1,
                new_thread: false,
            }
        } else {
            let prev = running;
            running = tid;
            EventKind::Switch {
                prev,
                how: SwitchedOut::Blocked,
                next: tid,
            }
        };
        events.push(ev(t, 1, kind));
    }
    events
}

#[test]
fn typical_scheduler_events_take_at_most_eight_bytes() {
    let events = scheduler_stream(10_000);
    let bytes = round_trip(&events);
    let per_event = bytes.len() as f64 / events.len() as f64;
    assert!(per_event <= 8.0, "{per_event:.2} bytes per event");
    assert!(
        per_event >= 3.0,
        "{per_event:.2}: a test that measures nothing"
    );
}

#[test]
fn every_truncation_is_an_error() {
    let events = every_kind(123_456_789, 2);
    let bytes = encode(&events);
    for len in 0..bytes.len() {
        let mut out = Vec::new();
        assert!(
            decode_chunk(&bytes[..len], &mut out).is_err(),
            "truncated to {len} bytes"
        );
        assert!(out.is_empty());
        // The parser alone, behind a checksum that happens to match.
        let body = &bytes[..len.min(bytes.len() - 4)];
        if body.len() < bytes.len() - 4 {
            assert!(
                decode_unchecked(body, &mut out).is_err(),
                "body cut at {len}"
            );
        }
    }
}

#[test]
fn damaged_chunks_are_errors_never_panics() {
    let mut rng = Rng(7);
    let events = random_stream(&mut rng, 300);
    let bytes = encode(&events);
    let mut out = Vec::new();
    let mut caught_by_crc = 0;
    let mut parser_errors = 0;
    for i in 0..20_000 {
        let mut m = bytes.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(m.len() as u64) as usize;
            match rng.below(4) {
                0 => m[at] ^= 1 << rng.below(8),
                1 => m[at] = rng.next() as u8,
                2 => m[at] = 0xFF,
                _ => {
                    m.insert(at, rng.next() as u8);
                }
            }
        }
        if m == bytes {
            continue;
        }
        out.clear();
        if decode_chunk(&m, &mut out).is_err() {
            caught_by_crc += 1;
            assert!(out.is_empty(), "mutation {i}: nothing appended on error");
        }
        // Re-seal the damaged bytes with a valid checksum: the parser must cope alone.
        let n = m.len() - 4;
        let crc = crc32(&m[..n]).to_le_bytes();
        m[n..].copy_from_slice(&crc);
        out.clear();
        match decode_chunk(&m, &mut out) {
            Err(_) => parser_errors += 1,
            Ok(()) => assert!(out.len() <= m.len() / 2),
        }
    }
    assert!(caught_by_crc > 19_000, "{caught_by_crc}");
    assert!(parser_errors > 1_000, "{parser_errors}");
}

#[test]
fn huge_counts_do_not_allocate() {
    let mut data = Vec::new();
    put_varint(&mut data, CODEC_VERSION as u64);
    put_varint(&mut data, u64::MAX);
    put_varint(&mut data, 0);
    put_varint(&mut data, 0);
    put_varint(&mut data, 0);
    let crc = crc32(&data);
    data.extend_from_slice(&crc.to_le_bytes());
    let err = decode_chunk(&data, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(err, CodecError::Count { what: "event", .. }),
        "{err}"
    );

    let mut data = Vec::new();
    put_varint(&mut data, CODEC_VERSION as u64);
    put_varint(&mut data, 0);
    put_varint(&mut data, 0);
    put_varint(&mut data, 0);
    put_varint(&mut data, 1);
    put_varint(&mut data, u64::MAX); // a string "as long as memory"
    let err = decode_unchecked(&data, &mut Vec::new()).unwrap_err();
    assert!(matches!(err, CodecError::Truncated { .. }), "{err}");
}

#[test]
fn newer_version_is_refused() {
    let mut data = Vec::new();
    put_varint(&mut data, CODEC_VERSION as u64 + 1);
    let err = decode_unchecked(&data, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err,
        CodecError::Version {
            found: CODEC_VERSION + 1,
            supported: CODEC_VERSION
        }
    );
    assert!(err.to_string().contains("upgrade powerlens"));
}

/// Recordings written before stacks (chunk version 1) still decode; a version-1 chunk
/// cannot hold the codes version 2 added.
#[test]
fn version_one_chunks_decode_without_the_new_codes() {
    let as_version_one = |events: &[Event]| {
        let mut enc = ChunkEncoder::new();
        for e in events {
            enc.push(e);
        }
        let mut bytes = enc.finish();
        bytes.truncate(bytes.len() - 4);
        assert_eq!(bytes[0], CODEC_VERSION as u8);
        bytes[0] = 1;
        decode_unchecked(&bytes, &mut Vec::new())
    };
    let old: Vec<Event> = every_kind(5_000, 1)
        .into_iter()
        .filter(|e| {
            !matches!(
                e.kind,
                EventKind::Stack { .. }
                    | EventKind::CpuSample { .. }
                    | EventKind::TimerArm { .. }
                    | EventKind::InterruptEnter(InterruptKind::Timer { timer: 1.., .. })
            )
        })
        .collect();
    assert_eq!(as_version_one(&old), Ok(()));
    let stack = [ev(5_000, 0, EventKind::Stack { id: 3 })];
    assert!(matches!(
        as_version_one(&stack),
        Err(CodecError::Tag { tag: STACK, .. })
    ));
}

#[test]
fn overlong_varints_are_errors() {
    let mut r = Reader {
        data: &[0xFF; 11],
        pos: 0,
    };
    assert!(matches!(
        r.varint().map_err(|e| *e),
        Err(CodecError::Varint { at: 0 })
    ));
    let mut max = Vec::new();
    put_varint(&mut max, u64::MAX);
    assert_eq!(max.len(), 10);
    let mut r = Reader { data: &max, pos: 0 };
    assert_eq!(r.varint(), Ok(u64::MAX));
    for v in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
        let mut b = Vec::new();
        put_varint(&mut b, v);
        assert_eq!(b.len(), varint_len(v), "{v}");
    }
}
