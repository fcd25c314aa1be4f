//! Tracepoint `format` files (`<tracefs>/events/<system>/<name>/format`) and decoding of the
//! raw payloads they describe. Fields are found by name, never by a hard-coded offset, so a
//! kernel that moves a field still decodes. Pure: no I/O, so it can be fuzzed.
//!
//! A format file looks like this (tab-indented, `common_*` fields first):
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     field:char prev_comm[16];    offset:8;    size:16;    signed:0;
//!     field:__data_loc char[] name;    offset:12;    size:4;    signed:0;
//!
//! print fmt: "…"
//! ```

use std::borrow::Cow;
use std::fmt;

/// How a field's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer or pointer of 1, 2, 4 or 8 bytes (native endian).
    Int,
    /// A fixed `char` array such as `char prev_comm[16]`: a NUL-padded string.
    CharArray,
    /// Any other fixed-size field (arrays of non-char, odd sizes): raw bytes.
    Bytes,
    /// `__data_loc`: a u32 whose low 16 bits are the offset of the data from the start of
    /// the payload and whose high 16 bits are its length (strings include their NUL).
    DataLoc,
    /// `__rel_loc`: like [`FieldKind::DataLoc`], but the offset counts from the end of
    /// this field.
    RelLoc,
}

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as declared, without the name and array suffix (`char`, `pid_t`,
    /// `__data_loc char[]` keeps `char[]`), for display only.
    pub c_type: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

/// A parsed format file. `system` is not in the file: it is the directory above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    /// The tracepoint id, used as `perf_event_attr.config` and found in `common_type`.
    pub id: u64,
    pub fields: Vec<Field>,
}

/// A format file that does not parse; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FormatError {}

impl EventFormat {
    /// Parses the text of a format file of an event in `system`.
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let err = |message: String| FormatError {
                line: index + 1,
                message,
            };
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                let value = rest.trim();
                id = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| err(format!("ID is not a number: {value:?}")))?,
                );
            } else if line.starts_with("field:") {
                fields.push(parse_field(line).map_err(err)?);
            } else if line.starts_with("print fmt:") {
                // The rest is the printk format, which decoding does not need.
                break;
            } else if !(line.is_empty() || line == "format:") {
                return Err(err(format!("unexpected line {line:?}")));
            }
        }
        let missing = |what: &str| FormatError {
            line: text.lines().count().max(1),
            message: format!("no {what} line"),
        };
        let format = EventFormat {
            system: system.to_string(),
            name: name.ok_or_else(|| missing("name:"))?,
            id: id.ok_or_else(|| missing("ID:"))?,
            fields,
        };
        if format.fields.is_empty() {
            return Err(missing("field:"));
        }
        Ok(format)
    }

    /// `system/name`, as events are named in tracefs and by the collector.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.system, self.name)
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A view of `raw` (a `PERF_SAMPLE_RAW` payload of this event) with typed accessors.
    pub fn decode<'a>(&'a self, raw: &'a [u8]) -> Decoded<'a> {
        Decoded { format: self, raw }
    }
}

/// Parses `field:<decl>;\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field(line: &str) -> Result<Field, String> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts
        .next()
        .and_then(|p| p.strip_prefix("field:"))
        .map(str::trim)
        .ok_or("no field declaration")?;
    let mut number = |key: &str| -> Result<usize, String> {
        let part = parts.next().unwrap_or("");
        let value = part
            .strip_prefix(key)
            .and_then(|p| p.strip_prefix(':'))
            .ok_or_else(|| format!("expected {key}:N, found {part:?}"))?;
        value
            .trim()
            .parse()
            .map_err(|_| format!("{key} is not a number: {value:?}"))
    };
    let offset = number("offset")?;
    let size = number("size")?;
    let signed = number("signed")? != 0;

    let (dynamic, decl) = if let Some(rest) = decl.strip_prefix("__data_loc ") {
        (Some(FieldKind::DataLoc), rest.trim())
    } else if let Some(rest) = decl.strip_prefix("__rel_loc ") {
        (Some(FieldKind::RelLoc), rest.trim())
    } else {
        (None, decl)
    };
    // The name is the last identifier; a fixed array has `[N]` after it.
    let (decl, array) = match decl.strip_suffix(']') {
        Some(head) => match head.rfind('[') {
            Some(open) => (&head[..open], true),
            None => return Err(format!("unbalanced ']' in {decl:?}")),
        },
        None => (decl, false),
    };
    // After the last character that cannot be in a C identifier; that character may take
    // several bytes in a damaged file (fuzzing found a slice inside one).
    let name_start = decl
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &decl[name_start..];
    let c_type = decl[..name_start].trim().to_string();
    // A declaration is `<type> <name>`; one word alone is a type without a name.
    if name.is_empty() || c_type.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no field name in {decl:?}"));
    }
    let kind = match dynamic {
        Some(kind) if size != 4 => {
            return Err(format!(
                "{name}: a {kind:?} field must have size 4, not {size}"
            ))
        }
        Some(kind) => kind,
        None if array && matches!(c_type.as_str(), "char" | "unsigned char") => {
            FieldKind::CharArray
        }
        None if !array && matches!(size, 1 | 2 | 4 | 8) => FieldKind::Int,
        None => FieldKind::Bytes,
    };
    offset
        .checked_add(size)
        .ok_or_else(|| format!("{name}: offset + size overflows"))?;
    Ok(Field {
        name: name.to_string(),
        c_type,
        offset,
        size,
        signed,
        kind,
    })
}

impl Field {
    /// The field's own bytes in `raw` (for dynamic fields: the 4-byte locator).
    fn slot<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        raw.get(self.offset..self.offset + self.size)
    }

    /// The value zero-extended (`Int` fields only; a signed field's bits as they are).
    pub fn u64(&self, raw: &[u8]) -> Option<u64> {
        if self.kind != FieldKind::Int {
            return None;
        }
        let b = self.slot(raw)?;
        Some(match b.len() {
            1 => b[0] as u64,
            2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
            4 => u32::from_ne_bytes(b.try_into().ok()?) as u64,
            _ => u64::from_ne_bytes(b.try_into().ok()?),
        })
    }

    /// The value sign-extended when the field is signed, zero-extended otherwise.
    pub fn i64(&self, raw: &[u8]) -> Option<i64> {
        let v = self.u64(raw)?;
        let bits = 8 * self.size as u32;
        Some(if self.signed && bits < 64 {
            // Shift the sign bit to the top, then back with an arithmetic shift.
            ((v << (64 - bits)) as i64) >> (64 - bits)
        } else {
            v as i64
        })
    }

    /// The bytes of an array or dynamic field (a dynamic field's data, not its locator).
    pub fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        match self.kind {
            FieldKind::Int => None,
            FieldKind::CharArray | FieldKind::Bytes => self.slot(raw),
            FieldKind::DataLoc | FieldKind::RelLoc => {
                let loc = u32::from_ne_bytes(self.slot(raw)?.try_into().ok()?);
                let mut start = (loc & 0xffff) as usize;
                if self.kind == FieldKind::RelLoc {
                    start += self.offset + self.size;
                }
                raw.get(start..start + (loc >> 16) as usize)
            }
        }
    }

    /// A string field (char array or dynamic) up to its first NUL; invalid UTF-8 is
    /// replaced rather than refused, since comm names are arbitrary bytes.
    pub fn str<'a>(&self, raw: &'a [u8]) -> Option<Cow<'a, str>> {
        let bytes = self.bytes(raw)?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(String::from_utf8_lossy(&bytes[..end]))
    }
}

/// A raw payload seen through its format. Accessors return `None` when the field does not
/// exist, has another kind, or lies outside the payload (a truncated record).
#[derive(Debug, Clone, Copy)]
pub struct Decoded<'a> {
    pub format: &'a EventFormat,
    pub raw: &'a [u8],
}

impl<'a> Decoded<'a> {
    pub fn u64(&self, name: &str) -> Option<u64> {
        self.format.field(name)?.u64(self.raw)
    }

    pub fn i64(&self, name: &str) -> Option<i64> {
        self.format.field(name)?.i64(self.raw)
    }

    pub fn str(&self, name: &str) -> Option<Cow<'a, str>> {
        self.format.field(name)?.str(self.raw)
    }

    pub fn bytes(&self, name: &str) -> Option<&'a [u8]> {
        self.format.field(name)?.bytes(self.raw)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Format files captured from this project's kernel (6.18), as the kernel prints them.
    pub(crate) const SCHED_SWITCH: &str =
        include_str!("../../testdata/tracefs/sched_switch.format");
    const SCHED_WAKEUP: &str = include_str!("../../testdata/tracefs/sched_wakeup.format");
    const CPU_IDLE: &str = include_str!("../../testdata/tracefs/cpu_idle.format");
    const HRTIMER_EXPIRE_ENTRY: &str =
        include_str!("../../testdata/tracefs/hrtimer_expire_entry.format");
    const IRQ_HANDLER_ENTRY: &str = include_str!("../../testdata/tracefs/irq_handler_entry.format");
    const IPI_SEND_CPUMASK: &str = include_str!("../../testdata/tracefs/ipi_send_cpumask.format");
    const SCHED_PROCESS_EXEC: &str =
        include_str!("../../testdata/tracefs/sched_process_exec.format");

    fn put(raw: &mut [u8], offset: usize, bytes: &[u8]) {
        raw[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    #[test]
    fn sched_switch_fields() {
        let f = EventFormat::parse("sched", SCHED_SWITCH).unwrap();
        assert_eq!((f.full_name().as_str(), f.id), ("sched/sched_switch", 372));
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "common_type",
                "common_flags",
                "common_preempt_count",
                "common_pid",
                "prev_comm",
                "prev_pid",
                "prev_prio",
                "prev_state",
                "next_comm",
                "next_pid",
                "next_prio"
            ]
        );
        let comm = f.field("prev_comm").unwrap();
        assert_eq!(
            (comm.kind, comm.offset, comm.size),
            (FieldKind::CharArray, 8, 16)
        );
        assert_eq!(comm.c_type, "char");
        let state = f.field("prev_state").unwrap();
        assert_eq!(
            (state.kind, state.offset, state.size, state.signed),
            (FieldKind::Int, 32, 8, true)
        );
        assert_eq!(f.field("next_pid").unwrap().c_type, "pid_t");
    }

    #[test]
    fn decodes_a_sched_switch_payload() {
        let f = EventFormat::parse("sched", SCHED_SWITCH).unwrap();
        let mut raw = vec![0u8; 68];
        put(&mut raw, 0, &372u16.to_ne_bytes());
        put(&mut raw, 4, &4242i32.to_ne_bytes());
        put(&mut raw, 8, b"sleeper\0garbage!");
        put(&mut raw, 24, &4242i32.to_ne_bytes());
        put(&mut raw, 28, &120i32.to_ne_bytes());
        put(&mut raw, 32, &1i64.to_ne_bytes());
        put(&mut raw, 40, b"swapper/1\0");
        put(&mut raw, 56, &0i32.to_ne_bytes());
        put(&mut raw, 60, &(-1i32).to_ne_bytes());
        let d = f.decode(&raw);
        assert_eq!(d.u64("common_type"), Some(372));
        assert_eq!(d.str("prev_comm").as_deref(), Some("sleeper"));
        assert_eq!(d.str("next_comm").as_deref(), Some("swapper/1"));
        assert_eq!(d.i64("prev_pid"), Some(4242));
        assert_eq!(d.i64("prev_state"), Some(1));
        assert_eq!(d.i64("next_prio"), Some(-1));
        assert_eq!(d.u64("next_prio"), Some(0xffff_ffff), "u64 zero-extends");
        assert_eq!(d.u64("no_such_field"), None);
        assert_eq!(d.u64("prev_comm"), None, "a string is not an integer");
        assert_eq!(d.str("prev_pid"), None, "an integer is not a string");
        // A truncated payload answers None instead of panicking.
        let short = f.decode(&raw[..40]);
        assert_eq!(short.i64("prev_state"), Some(1));
        assert_eq!(short.i64("next_pid"), None);
        assert_eq!(short.str("next_comm"), None);
    }

    #[test]
    fn other_captured_formats() {
        let wakeup = EventFormat::parse("sched", SCHED_WAKEUP).unwrap();
        assert_eq!(wakeup.field("target_cpu").unwrap().offset, 32);
        assert_eq!(wakeup.field("comm").unwrap().kind, FieldKind::CharArray);

        let idle = EventFormat::parse("power", CPU_IDLE).unwrap();
        assert_eq!((idle.name.as_str(), idle.id), ("cpu_idle", 568));
        let mut raw = vec![0u8; 16];
        put(&mut raw, 8, &u32::MAX.to_ne_bytes()); // PWR_EVENT_EXIT is (u32)-1
        put(&mut raw, 12, &1u32.to_ne_bytes());
        let d = idle.decode(&raw);
        assert_eq!(
            (d.u64("state"), d.i64("state")),
            (Some(0xffff_ffff), Some(0xffff_ffff))
        );
        assert_eq!(d.u64("cpu_id"), Some(1));

        let hrtimer = EventFormat::parse("timer", HRTIMER_EXPIRE_ENTRY).unwrap();
        let function = hrtimer.field("function").unwrap();
        assert_eq!(
            (function.c_type.as_str(), function.kind),
            ("void *", FieldKind::Int)
        );
        assert!(hrtimer.field("now").unwrap().signed);
    }

    #[test]
    fn data_loc_string() {
        let f = EventFormat::parse("irq", IRQ_HANDLER_ENTRY).unwrap();
        let name = f.field("name").unwrap();
        assert_eq!(
            (name.kind, name.c_type.as_str()),
            (FieldKind::DataLoc, "char[]")
        );
        let mut raw = vec![0u8; 24];
        put(&mut raw, 8, &11i32.to_ne_bytes());
        // "virtio0\0" is 8 bytes at offset 16.
        put(&mut raw, 12, &((8u32 << 16) | 16).to_ne_bytes());
        put(&mut raw, 16, b"virtio0\0");
        let d = f.decode(&raw);
        assert_eq!(d.i64("irq"), Some(11));
        assert_eq!(d.str("name").as_deref(), Some("virtio0"));
        assert_eq!(d.bytes("name"), Some(&b"virtio0\0"[..]));
        // A locator pointing past the payload is None, not a panic.
        put(&mut raw, 12, &((8u32 << 16) | 20).to_ne_bytes());
        assert_eq!(f.decode(&raw).str("name"), None);

        let exec = EventFormat::parse("sched", SCHED_PROCESS_EXEC).unwrap();
        assert_eq!(exec.field("filename").unwrap().kind, FieldKind::DataLoc);
        let ipi = EventFormat::parse("ipi", IPI_SEND_CPUMASK).unwrap();
        let mask = ipi.field("cpumask").unwrap();
        assert_eq!(
            (mask.kind, mask.c_type.as_str()),
            (FieldKind::DataLoc, "cpumask_t")
        );
    }

    #[test]
    fn rel_loc_counts_from_the_end_of_the_field() {
        let text =
            "name: x\nID: 1\nformat:\n\tfield:__rel_loc char[] s;\toffset:8;\tsize:4;\tsigned:0;\n";
        let f = EventFormat::parse("test", text).unwrap();
        let mut raw = vec![0u8; 16];
        put(&mut raw, 8, &(3u32 << 16).to_ne_bytes());
        put(&mut raw, 12, b"ab\0");
        assert_eq!(f.decode(&raw).str("s").as_deref(), Some("ab"));
    }

    #[test]
    fn fixed_non_char_arrays_are_bytes() {
        let text = "name: x\nID: 1\nformat:\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n";
        let f = EventFormat::parse("test", text).unwrap();
        assert_eq!(f.field("args").unwrap().kind, FieldKind::Bytes);
        assert_eq!(f.field("timestamp").unwrap().kind, FieldKind::Int);
        assert_eq!(
            f.decode(&[0u8; 64]).bytes("args").map(<[u8]>::len),
            Some(48)
        );
    }

    #[test]
    fn malformed_inputs_name_the_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("name: x\nID: seven\n", 2, "ID is not a number"),
            ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:x;\tsize:4;\tsigned:1;\n", 4, "offset is not a number"),
            ("name: x\nID: 1\nformat:\n\tfield:int a;\tsize:4;\tsigned:1;\n", 4, "expected offset:N"),
            ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\n", 4, "expected signed:N"),
            ("name: x\nID: 1\nformat:\n\tfield:int ;\toffset:0;\tsize:4;\tsigned:1;\n", 4, "no field name"),
            ("name: x\nID: 1\nformat:\n\tfield:char a16];\toffset:0;\tsize:16;\tsigned:1;\n", 4, "unbalanced"),
            ("name: x\nID: 1\nformat:\n\tfield:__data_loc char[] s;\toffset:0;\tsize:8;\tsigned:0;\n", 4, "size 4"),
            ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:18446744073709551615;\tsize:4;\tsigned:1;\n", 4, "overflows"),
            ("name: x\nID: 1\nformat:\nfoo bar\n", 4, "unexpected line"),
            ("ID: 1\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n", 3, "no name:"),
            ("name: x\nformat:\n", 2, "no ID:"),
            ("name: x\nID: 1\nformat:\n\nprint fmt: \"\"\n", 5, "no field:"),
            ("", 1, "no name:"),
        ];
        for (text, line, message) in cases {
            let err = EventFormat::parse("test", text).unwrap_err();
            assert_eq!(err.line, *line, "{text:?}: {err}");
            assert!(err.message.contains(message), "{text:?}: {err}");
            assert!(err.to_string().starts_with(&format!("line {line}: ")));
        }
    }

    /// Regression (fuzz/regressions/tracefs_format/non-ascii-before-the-field-name): a
    /// multi-byte character just before a field's name was sliced through.
    #[test]
    fn a_non_ascii_character_before_the_name_is_a_type() {
        let text =
            "name: x\nID: 1\nformat:\n\tfield:int\u{fffd}pid;\toffset:0;\tsize:4;\tsigned:1;\n";
        let f = EventFormat::parse("s", text).unwrap();
        assert_eq!(f.fields[0].name, "pid");
        assert_eq!(f.fields[0].c_type, "int\u{fffd}");
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap stand-in for a fuzz target: every prefix and every one-byte corruption of
        // a real format either parses or errors, and decoding any payload never panics.
        let base = SCHED_SWITCH.as_bytes();
        for cut in 0..base.len() {
            let text = String::from_utf8_lossy(&base[..cut]);
            if let Ok(f) = EventFormat::parse("s", &text) {
                let d = f.decode(&base[..cut.min(64)]);
                for field in &f.fields {
                    let _ = (d.u64(&field.name), d.i64(&field.name), d.str(&field.name));
                }
            }
        }
        for (i, junk) in
            (0..base.len()).zip([b'[', b']', b';', b':', b'\n', b' ', b'9'].iter().cycle())
        {
            let mut bytes = base.to_vec();
            bytes[i] = *junk;
            let _ = EventFormat::parse("s", &String::from_utf8_lossy(&bytes));
        }
    }
}
