//! Byte mutations of corpus inputs, the kinds AFL and libFuzzer apply: bit flips, random
//! and "interesting" bytes and integers (0, -1, boundaries of 8/16/32/64 bits, both byte
//! orders), small additions, deletions, insertions, copies within the input, splices with
//! another input, dictionary tokens, and numbers in text replaced by boundary values. A
//! few are stacked per run. Deterministic for a seed, so a campaign can be repeated.

/// xorshift64*: fast, and the same stream for the same seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const INTERESTING_8: &[u8] = &[0, 1, 0x7F, 0x80, 0xFF, 16, 32, 64, 100];
const INTERESTING_64: &[u64] = &[
    0,
    1,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x1_0000,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    0x1_0000_0000,
    i64::MAX as u64,
    i64::MIN as u64,
    u64::MAX,
    u64::MAX - 1,
];

/// Numbers a text parser may mishandle: signs, boundaries of integer types, floats that
/// are not finite or not plain.
const INTERESTING_TEXT: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "99999999999999999999999",
    "1e308",
    "1e309",
    "-1e308",
    "5e-324",
    "0.000000000000000000001",
    "NaN",
    "inf",
    "-inf",
    "0x10",
    "1.5",
    "1.",
    ".5",
    "+1",
    "",
];

/// Bytes that delimit text formats.
const SEPARATORS: &[&str] = &[
    "\n", "\r\n", ",", " ", "\t", ":", ";", "=", "\0", "#", "[", "]", "{", "}", "\"", "-", "/",
];

/// Mutates inputs for one target.
pub struct Mutator {
    pub rng: Rng,
    dict: Vec<Vec<u8>>,
    max_len: usize,
}

impl Mutator {
    /// `dict`: the target's tokens; `max_len`: inputs are cut to this length.
    pub fn new(seed: u64, dict: &[&str], max_len: usize) -> Mutator {
        Mutator {
            rng: Rng::new(seed),
            dict: dict.iter().map(|t| t.as_bytes().to_vec()).collect(),
            max_len: max_len.max(16),
        }
    }

    /// Replaces `data` by a mutation of it: 1, 2, 4 … 32 stacked changes; `other` is
    /// another corpus input to splice from.
    pub fn mutate(&mut self, data: &mut Vec<u8>, other: &[u8]) {
        let rounds = 1 << self.rng.below(6);
        for _ in 0..rounds {
            self.once(data, other);
        }
        data.truncate(self.max_len);
    }

    fn once(&mut self, data: &mut Vec<u8>, other: &[u8]) {
        let r = &mut self.rng;
        if data.is_empty() {
            let n = 1 + r.below(16);
            data.extend((0..n).map(|_| r.next_u64() as u8));
            return;
        }
        let len = data.len();
        match r.below(16) {
            0 => {
                let at = r.below(len);
                data[at] ^= 1 << r.below(8);
            }
            1 => {
                let at = r.below(len);
                data[at] = r.next_u64() as u8;
            }
            2 => {
                let at = r.below(len);
                data[at] = *r.pick(INTERESTING_8);
            }
            3 => {
                // An interesting integer of 2, 4 or 8 bytes, either byte order.
                let width = [2, 4, 8][r.below(3)];
                if len >= width {
                    let at = r.below(len - width + 1);
                    let v = *r.pick(INTERESTING_64);
                    let bytes = if r.chance(2) {
                        v.to_le_bytes()
                    } else {
                        (v << (64 - 8 * width as u32).min(63)).to_be_bytes()
                    };
                    data[at..at + width].copy_from_slice(&bytes[..width]);
                }
            }
            4 => {
                // A small addition to a byte.
                let at = r.below(len);
                let delta = 1 + r.below(35) as u8;
                data[at] = if r.chance(2) {
                    data[at].wrapping_add(delta)
                } else {
                    data[at].wrapping_sub(delta)
                };
            }
            5 | 6 => {
                // Delete a range: mostly short, sometimes long.
                let max = if r.chance(4) { len } else { len.min(16) };
                let n = 1 + r.below(max);
                let at = r.below(len - n + 1);
                data.drain(at..at + n);
            }
            7 => {
                // Insert random or repeated bytes.
                let n = 1 + r.below(32);
                let at = r.below(len + 1);
                let fill: Vec<u8> = if r.chance(2) {
                    vec![r.next_u64() as u8; n]
                } else {
                    (0..n).map(|_| r.next_u64() as u8).collect()
                };
                data.splice(at..at, fill);
            }
            8 => {
                // Copy a range of the input over another place, or insert it there.
                let n = 1 + r.below(len.min(64));
                let from = r.below(len - n + 1);
                let piece = data[from..from + n].to_vec();
                let to = r.below(len + 1);
                if r.chance(2) {
                    data.splice(to..to, piece);
                } else {
                    let end = (to + n).min(len);
                    data.splice(to..end, piece);
                }
            }
            9 => {
                // Splice with another input: our head, its tail, or a piece of it inserted.
                if !other.is_empty() {
                    let at = r.below(len + 1);
                    if r.chance(2) {
                        let from = r.below(other.len());
                        data.truncate(at);
                        data.extend_from_slice(&other[from..]);
                    } else {
                        let n = 1 + r.below(other.len().min(256));
                        let from = r.below(other.len() - n + 1);
                        data.splice(at..at, other[from..from + n].iter().copied());
                    }
                }
            }
            10 | 11 => {
                // A token: the target's dictionary, or a separator.
                let token: Vec<u8> = if !self.dict.is_empty() && r.chance(2) {
                    r.pick(&self.dict).clone()
                } else {
                    r.pick(SEPARATORS).as_bytes().to_vec()
                };
                let at = r.below(len + 1);
                if r.chance(2) {
                    data.splice(at..at, token);
                } else {
                    let end = (at + token.len()).min(len);
                    data.splice(at..end, token);
                }
            }
            12 | 13 => self.replace_number(data),
            14 => {
                // Truncate.
                let at = r.below(len + 1);
                data.truncate(at);
            }
            _ => {
                // Swap two lines, or duplicate one (text formats are line-based).
                self.line_edit(data);
            }
        }
    }

    /// Replaces a run of ASCII digits (with its sign and fraction) by a boundary value.
    fn replace_number(&mut self, data: &mut Vec<u8>) {
        let r = &mut self.rng;
        let start = r.below(data.len());
        let Some(first) = data[start..].iter().position(u8::is_ascii_digit) else {
            let at = r.below(data.len() + 1);
            data.splice(at..at, r.pick(INTERESTING_TEXT).bytes());
            return;
        };
        let mut from = start + first;
        if from > 0 && (data[from - 1] == b'-' || data[from - 1] == b'+') {
            from -= 1;
        }
        let mut to = start + first;
        while to < data.len() && (data[to].is_ascii_digit() || data[to] == b'.') {
            to += 1;
        }
        let with: Vec<u8> = if r.chance(4) {
            // Off by one from the number that was there.
            let text = String::from_utf8_lossy(&data[from..to]).to_string();
            match text.parse::<i128>() {
                Ok(v) => (v + if r.chance(2) { 1 } else { -1 })
                    .to_string()
                    .into_bytes(),
                Err(_) => r.pick(INTERESTING_TEXT).as_bytes().to_vec(),
            }
        } else {
            r.pick(INTERESTING_TEXT).as_bytes().to_vec()
        };
        data.splice(from..to, with);
    }

    fn line_edit(&mut self, data: &mut Vec<u8>) {
        let r = &mut self.rng;
        let mut lines: Vec<Vec<u8>> = data
            .split_inclusive(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        if lines.len() < 2 {
            return;
        }
        let a = r.below(lines.len());
        let b = r.below(lines.len());
        match r.below(3) {
            0 => lines.swap(a, b),
            1 => {
                let copy = lines[a].clone();
                lines.insert(b, copy);
            }
            _ => {
                lines.remove(a);
            }
        }
        *data = lines.concat();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_inputs_and_respect_the_length_limit() {
        let mut m = Mutator::new(7, &["token"], 64);
        let seed = b"name: sched_switch\nID: 316\n".to_vec();
        let mut changed = 0;
        for _ in 0..1000 {
            let mut d = seed.clone();
            m.mutate(&mut d, b"other input");
            assert!(d.len() <= 64);
            changed += usize::from(d != seed);
        }
        // A mutation can undo itself (a bit flipped twice), but rarely.
        assert!(changed > 950, "{changed}");
    }

    #[test]
    fn the_same_seed_gives_the_same_mutations() {
        let run = |seed| {
            let mut m = Mutator::new(seed, &[], 1024);
            let mut d = b"1,2,3\n4,5,6\n".to_vec();
            for _ in 0..50 {
                m.mutate(&mut d, b"7,8");
            }
            d
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
