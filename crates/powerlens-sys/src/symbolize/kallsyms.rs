//! The kernel's symbol table from `/proc/kallsyms`, for kernel stack frames.
//!
//! Parsed here rather than through blazesym's kernel source because the file must come
//! from the procfs root (fixtures), because blazesym would also go looking for a vmlinux
//! image, and because the "all addresses are zero" case (kptr_restrict) has to surface as
//! an explanation with a fix, not as frames that silently resolve to nothing.

use std::path::Path;

use crate::SysError;

/// Text symbols of the running kernel and its modules, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct KernelSymbols {
    /// (address, index into `names`), sorted by address, one entry per address.
    starts: Vec<(u64, u32)>,
    names: Vec<Box<str>>,
}

/// Why kernel frames cannot be named, with the fix.
pub fn hidden_addresses_reason(path: &Path) -> String {
    format!(
        "{} lists every address as 0 (kernel.kptr_restrict hides them from this user); \
         run powerlens as root or set `sysctl kernel.kptr_restrict=0`",
        path.display()
    )
}

impl KernelSymbols {
    /// Reads and parses a kallsyms file. An `Unavailable` error when the file exists but
    /// hides every address.
    pub fn read(path: &Path) -> Result<Self, SysError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SysError::from_io(path, e, "run powerlens as root"))?;
        let table = KernelSymbols::parse(&text);
        if table.is_empty() && !text.trim().is_empty() {
            return Err(SysError::Unavailable {
                what: "kernel symbols".into(),
                reason: hidden_addresses_reason(path),
                fix: None,
            });
        }
        Ok(table)
    }

    /// Parses the text of a kallsyms file (`ADDR TYPE NAME [\t[MODULE]]` per line), keeping
    /// code symbols with a non-zero address. Functions of loadable modules are named
    /// `name [module]`, as perf shows them, so that equal names in two modules stay apart.
    pub fn parse(text: &str) -> Self {
        let mut entries: Vec<(u64, Box<str>)> = Vec::new();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            // Only code: a stack frame never points into data, and data symbols between
            // functions would otherwise steal the addresses of the functions before them.
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let name = match fields.next() {
                Some(module) => format!("{name} {module}").into_boxed_str(),
                None => name.into(),
            };
            entries.push((addr, name));
        }
        // Stable: of several names at one address (aliases) the first listed wins.
        entries.sort_by_key(|(addr, _)| *addr);
        entries.dedup_by_key(|(addr, _)| *addr);
        let mut table = KernelSymbols::default();
        for (addr, name) in entries {
            table.starts.push((addr, table.names.len() as u32));
            table.names.push(name);
        }
        table
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// The start address of the kernel function `name` in the kallsyms file at `path`,
    /// found in one pass over its lines, without the table: a recorder that needs one
    /// address at its start does not parse and sort the kernel's ~100,000 symbols for it.
    pub fn address_in(path: &Path, name: &str) -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            let (addr, kind, found) = (fields.next()?, fields.next()?, fields.next()?);
            let code = matches!(kind, "t" | "T" | "w" | "W");
            // A module's function of the same name is not the kernel's.
            if found != name || !code || fields.next().is_some() {
                return None;
            }
            u64::from_str_radix(addr, 16).ok().filter(|a| *a != 0)
        })
    }

    /// The start address of the function `name` (a kernel symbol, not a module's).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.starts
            .iter()
            .find(|(_, i)| &*self.names[*i as usize] == name)
            .map(|(addr, _)| *addr)
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The symbol at or before `addr`: its name and start address. None below the first
    /// symbol. kallsyms has no sizes, so an address past the last function still goes to
    /// it, as perf does.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let after = self.starts.partition_point(|(start, _)| *start <= addr);
        let (start, index) = *self.starts.get(after.checked_sub(1)?)?;
        Some((&self.names[index as usize], start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_of_a_name() {
        let t = KernelSymbols::parse(
            "ffffffff81442220 t perf_swevent_hrtimer\nffffffff81000000 T _stext\n",
        );
        assert_eq!(
            t.address_of("perf_swevent_hrtimer"),
            Some(0xffffffff81442220)
        );
        assert_eq!(t.address_of("nonesuch"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kallsyms");
        std::fs::write(
            &path,
            "ffffffff81442220 d perf_swevent_hrtimer\n\
             ffffffffc0001000 t perf_swevent_hrtimer\t[kvm]\n\
             0000000000000000 t perf_swevent_hrtimer\n\
             ffffffff81442220 t perf_swevent_hrtimer\n",
        )
        .unwrap();
        // Data, a module's function and a hidden address are not it.
        assert_eq!(
            KernelSymbols::address_in(&path, "perf_swevent_hrtimer"),
            Some(0xffffffff81442220)
        );
        assert_eq!(KernelSymbols::address_in(&path, "nonesuch"), None);
    }

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81001000 t helper
ffffffff81002000 D some_data
ffffffff81003000 T schedule
ffffffffc0a01000 t nft_do_chain\t[nf_tables]
0000000000000000 A fixed_percpu_data
garbage
";

    #[test]
    fn nearest_preceding_code_symbol() {
        let t = KernelSymbols::parse(TEXT);
        assert_eq!(
            t.len(),
            4,
            "aliases, data, zero addresses and garbage are dropped"
        );
        assert_eq!(t.lookup(0xffffffff80ffffff), None);
        assert_eq!(
            t.lookup(0xffffffff81000000),
            Some(("_stext", 0xffffffff81000000))
        );
        assert_eq!(
            t.lookup(0xffffffff81001fff),
            Some(("helper", 0xffffffff81001000))
        );
        // The data symbol at 0x2000 does not take over the end of `helper`.
        assert_eq!(
            t.lookup(0xffffffff81002010),
            Some(("helper", 0xffffffff81001000))
        );
        assert_eq!(
            t.lookup(0xffffffff81003005),
            Some(("schedule", 0xffffffff81003000))
        );
        assert_eq!(
            t.lookup(0xffffffffc0a01234),
            Some(("nft_do_chain [nf_tables]", 0xffffffffc0a01000))
        );
    }

    #[test]
    fn all_zero_addresses_are_reported_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kallsyms");
        std::fs::write(
            &path,
            "0000000000000000 T _stext\n0000000000000000 T schedule\n",
        )
        .unwrap();
        let err = KernelSymbols::read(&path).unwrap_err().to_string();
        assert!(err.contains("kptr_restrict=0"), "{err}");
        assert!(err.contains("root"), "{err}");
    }

    #[test]
    fn missing_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = KernelSymbols::read(&dir.path().join("kallsyms")).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
