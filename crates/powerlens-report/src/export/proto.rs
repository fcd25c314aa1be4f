//! A minimal protocol-buffers encoder: varints, length-delimited fields and fixed64
//! doubles, the subset the Perfetto trace needs (encoding rules:
//! <https://protobuf.dev/programming-guides/encoding/>). Messages are built bottom-up in
//! plain byte vectors; a nested message is its encoded bytes behind a tag and a length.

/// Wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

/// Appends `v` as a base-128 varint (least significant group first).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes `v` takes as a varint.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_tag(out: &mut Vec<u8>, field: u32, wire: u64) {
    put_varint(out, (u64::from(field) << 3) | wire);
}

/// An unsigned integer, bool or enum field (`uint32`, `uint64`, `bool`, enums).
pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    put_tag(out, field, VARINT);
    put_varint(out, v);
}

/// A `double` field.
pub fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    put_tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `bytes`, `string` or embedded-message field whose encoding is `data`.
pub fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    len_prefix(out, field, data.len());
    out.extend_from_slice(data);
}

/// A `string` field.
pub fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

/// The tag and length of a length-delimited field whose `len` bytes follow.
pub fn len_prefix(out: &mut Vec<u8>, field: u32, len: usize) {
    put_tag(out, field, LEN);
    put_varint(out, len as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_protobuf_documentation() {
        // protobuf.dev's examples: field 1 = 150 is 08 96 01; field 2 = "testing" is
        // 12 07 74 65 73 74 69 6e 67.
        let mut b = Vec::new();
        uint(&mut b, 1, 150);
        assert_eq!(b, [0x08, 0x96, 0x01]);
        b.clear();
        string(&mut b, 2, "testing");
        assert_eq!(b, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        b.clear();
        double(&mut b, 44, 1.5);
        // Field 44, wire type 1: (44 << 3) | 1 = 353 = e1 02.
        assert_eq!(&b[..2], &[0xe1, 0x02]);
        assert_eq!(&b[2..], &1.5f64.to_le_bytes());
    }

    #[test]
    fn varint_len_agrees_with_the_encoder() {
        for v in [0, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(varint_len(v), b.len(), "{v}");
        }
    }
}
