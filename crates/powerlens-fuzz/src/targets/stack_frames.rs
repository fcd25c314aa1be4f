//! A call stack's frames as a recording stores them (the `stacks` table's blobs), through
//! the decoder `report` uses. Checks: what decodes encodes back to the same bytes when it
//! was written canonically, and to the same frames always.

use powerlens_core::stacks::{decode_frames, encode_frames, lookups};

pub fn run(input: &[u8]) {
    let Ok(frames) = decode_frames(input) else {
        return;
    };
    let mut bytes = Vec::new();
    encode_frames(&frames, &mut bytes);
    let again = decode_frames(&bytes).expect("encoded frames decode");
    assert_eq!(again, frames, "frames changed in a round trip");
    assert_eq!(lookups(&frames).count(), frames.len());
}
