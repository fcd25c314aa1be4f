//! The bpf(2) calls made without aya's objects: a window switch on another thread flips
//! the control map and attaches the programs by descriptor (aya's maps and programs are
//! not shared across threads).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `bpf(cmd, attr)`: its return, or the error.
///
/// # Safety
/// `attr` must be a valid `union bpf_attr` prefix for `cmd`, and every pointer in it must
/// point at live memory of the size `cmd` reads or writes there.
unsafe fn bpf<T>(cmd: libc::c_long, attr: &T) -> std::io::Result<libc::c_long> {
    // SAFETY: the caller vouches for `attr`; the size passed is its own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` of a u32 array element.
pub(super) fn update_u32(map: &OwnedFd, index: u32, value: u32) -> std::io::Result<()> {
    // The kernel's `union bpf_attr` for element commands: map_fd, key, value, flags.
    #[repr(C)]
    struct ElemAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    let attr = ElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &index as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    // SAFETY: a bpf_attr prefix for BPF_MAP_UPDATE_ELEM whose key and value point at live
    // u32s, the map's key and value size.
    unsafe { bpf(BPF_MAP_UPDATE_ELEM, &attr) }.map(|_| ())
}

/// `bpf(BPF_RAW_TRACEPOINT_OPEN)` of a `tp_btf` program (its tracepoint was named at
/// load): the link's descriptor, which detaches it when closed.
pub(super) fn raw_tracepoint_open(prog: &OwnedFd) -> std::io::Result<OwnedFd> {
    // The kernel's `union bpf_attr` for BPF_RAW_TRACEPOINT_OPEN: name (NULL: the
    // program's own), prog_fd.
    #[repr(C)]
    struct RawTracepointAttr {
        name: u64,
        prog_fd: u32,
        _pad: u32,
    }
    const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
    let attr = RawTracepointAttr {
        name: 0,
        prog_fd: prog.as_raw_fd() as u32,
        _pad: 0,
    };
    // SAFETY: a bpf_attr prefix for BPF_RAW_TRACEPOINT_OPEN with no pointers (the name is
    // NULL).
    let fd = unsafe { bpf(BPF_RAW_TRACEPOINT_OPEN, &attr) }?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
