//! tracefs `format` files, and raw tracepoint payloads read through them (what the
//! collector does with every perf sample). The input is the format file's text, then a
//! NUL byte, then a payload. Checks: every field of a parsed format reads without panic
//! from any payload, within the payload's bounds; integer fields read as their declared
//! size says.

use powerlens_sys::trace::format::{EventFormat, FieldKind};

pub const DICT: &[&str] = &[
    "name:",
    "ID:",
    "format:",
    "field:",
    "offset:",
    "size:",
    "signed:",
    "print fmt:",
    "__data_loc ",
    "__rel_loc ",
    "char[]",
    "unsigned short common_type",
    "char prev_comm[16]",
    "pid_t",
    "\t",
];

pub fn run(input: &[u8]) {
    let (text, raw) = match input.iter().position(|&b| b == 0) {
        Some(at) => (&input[..at], &input[at + 1..]),
        None => (input, &[][..]),
    };
    let Ok(format) = EventFormat::parse("fuzz", &String::from_utf8_lossy(text)) else {
        return;
    };
    assert!(!format.fields.is_empty(), "a format without fields parsed");
    let decoded = format.decode(raw);
    for field in &format.fields {
        let u = decoded.u64(&field.name);
        let i = decoded.i64(&field.name);
        let s = decoded.str(&field.name);
        let b = decoded.bytes(&field.name);
        // The accessors look fields up by name: a later field of the same name is hidden,
        // so only the first of each name is checked against its own declaration.
        if format.field(&field.name).map(|f| f as *const _) != Some(field as *const _) {
            continue;
        }
        match field.kind {
            FieldKind::Int => {
                assert!(s.is_none() && b.is_none(), "an integer read as bytes");
                assert_eq!(u.is_some(), i.is_some());
                if let Some(u) = u {
                    let bits = 8 * field.size as u32;
                    assert!(
                        bits >= 64 || u >> bits == 0,
                        "{} wider than its size",
                        field.name
                    );
                    assert!(
                        field.offset + field.size <= raw.len(),
                        "read past the payload"
                    );
                }
            }
            _ => {
                assert!(u.is_none() && i.is_none(), "bytes read as an integer");
                if let Some(b) = b {
                    let inside = raw.as_ptr_range();
                    let got = b.as_ptr_range();
                    assert!(
                        b.is_empty() || (inside.start <= got.start && got.end <= inside.end),
                        "bytes outside the payload"
                    );
                }
            }
        }
    }
}
