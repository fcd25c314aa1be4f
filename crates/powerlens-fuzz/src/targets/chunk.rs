//! Event chunks, through the decoders `report`, `export` and the replay use. Most mutants
//! of a real chunk fail its CRC at once, so the input is tried twice: as it is (the
//! checksum must reject it or it must decode) and as a body with a correct checksum
//! appended, which takes any bytes into the parser proper. Checks besides "no panic":
//! - the two decoders agree (same events, or both refuse);
//! - a refused chunk leaves `decode_chunk`'s output as it was;
//! - `decode_chunk_in_context` gives one context per event, even when it stops early;
//! - what decodes encodes back to the same events and contexts (the decoder invented
//!   nothing the format cannot say), stacks folded the same way again.

use powerlens_core::codec::{
    decode_chunk, decode_chunk_in_context, unfold, ChunkEncoder, EventContext,
};
use powerlens_core::sched::event::{Event, EventKind};

pub fn run(input: &[u8]) {
    check(input);
    let mut with_crc = input.to_vec();
    with_crc.extend_from_slice(&crc32fast::hash(input).to_le_bytes());
    check(&with_crc);
}

fn check(data: &[u8]) {
    let sentinel = Event {
        time_ns: 7,
        cpu: 7,
        kind: EventKind::IdleExit,
    };
    let mut plain = vec![sentinel];
    let plain_result = decode_chunk(data, &mut plain);
    let mut events = Vec::new();
    let mut contexts = Vec::new();
    let context_result = decode_chunk_in_context(data, &mut events, &mut contexts);
    assert_eq!(
        events.len(),
        contexts.len(),
        "decode_chunk_in_context: one context per event"
    );
    match (&plain_result, &context_result) {
        (Ok(()), Ok(())) => {
            assert_eq!(plain[0], sentinel, "decode_chunk appends");
            let records = unfold(&events, &contexts);
            let unfolded: Vec<Event> = records.iter().map(|(e, _)| *e).collect();
            assert_eq!(&plain[1..], &unfolded[..], "the two decoders disagree");
            round_trip(&records, &events, &contexts);
        }
        (Err(a), Err(b)) => {
            assert_eq!(plain, [sentinel], "a refused chunk left events behind: {a}");
            assert_eq!(a, b, "the two decoders refuse for different reasons");
        }
        (a, b) => {
            panic!("the decoders disagree: decode_chunk {a:?}, decode_chunk_in_context {b:?}")
        }
    }
}

/// Records in time order encode back to the same events and contexts. (The encoder takes
/// events in time order only; a chunk whose deltas wrap is still a valid chunk.)
fn round_trip(records: &[(Event, Option<u32>)], events: &[Event], contexts: &[EventContext]) {
    if records.windows(2).any(|w| w[1].0.time_ns < w[0].0.time_ns) {
        return;
    }
    let mut encoder = ChunkEncoder::new();
    for (e, c) in records {
        encoder.push_in_context(e, *c);
    }
    let bytes = encoder.finish();
    let (mut again, mut again_contexts) = (Vec::new(), Vec::new());
    decode_chunk_in_context(&bytes, &mut again, &mut again_contexts)
        .expect("a chunk the encoder wrote decodes");
    assert_eq!(again, events, "events changed in a round trip");
    assert_eq!(again_contexts, contexts, "contexts changed in a round trip");
}
