//! Interned names (IRQ handlers, softirq vectors, the comms given at exec) so that events
//! carrying them stay `Copy`. Millions of events are decoded, merged and handed between
//! threads per report; with a `String` inside, every copy of an event was a match over
//! its variants and every dropped batch a walk over its events. The distinct names of a
//! recording are few (interrupt names, program names), so each is stored once, for the
//! life of the process: memory grows with distinct names, never with events.
//!
//! A name is one pointer (to the stored `&str`), not a `&str`'s two words: it sits inside
//! every interrupt and exec event, and at eight bytes an [`super::event::Event`] is 40
//! bytes instead of 48, which every copy between decoder, merge and analyses moves.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An interned string: copying it copies a pointer. Compared, hashed and ordered by its
/// text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(&'static &'static str);

impl Name {
    /// The name for `s`, stored the first time it is seen.
    pub fn new(s: &str) -> Name {
        static NAMES: OnceLock<Mutex<HashMap<&'static str, Name>>> = OnceLock::new();
        let mut names = NAMES
            .get_or_init(Default::default)
            .lock()
            // A panic elsewhere while holding the lock leaves the set valid: every
            // insert is a single operation.
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&name) = names.get(s) {
            return name;
        }
        let stored: &'static str = Box::leak(s.to_owned().into_boxed_str());
        let name = Name(Box::leak(Box::new(stored)));
        names.insert(stored, name);
        name
    }

    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::new(&s)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        *self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Name::new(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_stored_name() {
        let a = Name::new("virtio0-input.0");
        let b = Name::from(String::from("virtio0-input.0"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str(), b.as_str()), "stored once");
        assert_ne!(a, Name::new("virtio0-input.1"));
        assert_eq!(&*a, "virtio0-input.0");
        assert_eq!(a, "virtio0-input.0");
    }

    #[test]
    fn names_serialize_as_plain_strings() {
        let n = Name::new("NET_RX");
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, "\"NET_RX\"");
        assert_eq!(serde_json::from_str::<Name>(&json).unwrap(), n);
        assert_eq!(format!("{n} {n:?}"), "NET_RX \"NET_RX\"");
    }
}
