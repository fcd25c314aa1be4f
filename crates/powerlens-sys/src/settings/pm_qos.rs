//! `pm_qos=LATENCY`: a CPU wake-latency limit. Writing a latency (a binary s32 in µs) to
//! `/dev/cpu_dma_latency` adds a request that lasts while the file stays open; the kernel
//! keeps only idle states whose exit latency is within the smallest request. It drops the
//! request when the descriptor closes, also when the process dies, so it needs no journal.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::error::SettingsError;
use super::select::select;
use super::Setting;
use crate::SysError;

/// The PM QoS device of the CPU latency limit.
pub const PM_QOS_DEVICE: &str = "/dev/cpu_dma_latency";

/// The aggregate the device reads while no request limits it
/// (`PM_QOS_CPU_LATENCY_DEFAULT_VALUE`, 2000 s).
pub const NO_LIMIT_US: i32 = 2_000_000_000;

/// The `pm_qos=` setting's text and latency, once the device is known to exist.
pub(crate) fn plan(
    settings: &[Setting],
    device: &Path,
) -> Result<Option<(String, u32)>, SettingsError> {
    let Some((label, us)) = select(settings, |s| match s {
        Setting::PmQosUs(us) => Some(*us),
        _ => None,
    }) else {
        return Ok(None);
    };
    if !device.exists() {
        return Err(SettingsError::Unsupported {
            setting: label,
            reason: format!("{} does not exist", device.display()),
            fix: "a kernel with CPU latency QoS (CONFIG_CPU_IDLE) and devtmpfs mounted on /dev"
                .to_string(),
        });
    }
    Ok(Some((label, us)))
}

/// A CPU wake-latency request, held until this is dropped.
#[derive(Debug)]
pub struct PmQosRequest {
    /// Kept open: closing it is what ends the request. Opened close-on-exec (Rust's
    /// default), so measured commands do not inherit and prolong it.
    _device: File,
    latency_us: u32,
    path: PathBuf,
}

impl PmQosRequest {
    /// Opens `device` and writes the request.
    pub fn hold(setting: &str, device: &Path, latency_us: u32) -> Result<Self, SettingsError> {
        let write_error = |source| SettingsError::Write {
            setting: setting.to_string(),
            path: device.to_path_buf(),
            value: format!("{latency_us} (binary s32, µs)"),
            source,
        };
        let value = i32::try_from(latency_us).map_err(|_| {
            write_error(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "more than i32::MAX µs",
            ))
        })?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(device)
            .map_err(write_error)?;
        // Exactly four bytes: the kernel reads a 4-byte write as a binary s32 (any other
        // length as a hex string).
        file.write_all(&value.to_ne_bytes()).map_err(write_error)?;
        Ok(PmQosRequest {
            _device: file,
            latency_us,
            path: device.to_path_buf(),
        })
    }

    pub fn latency_us(&self) -> u32 {
        self.latency_us
    }

    pub fn device(&self) -> &Path {
        &self.path
    }
}

/// The limit in force now (the smallest request), in µs; [`NO_LIMIT_US`] when none limits
/// it. Reading opens the device, which adds a request of "no limit" for the moment: that
/// never lowers the aggregate.
pub fn read_limit_us(device: &Path) -> Result<i32, SysError> {
    let mut bytes = [0u8; 4];
    File::open(device)
        .and_then(|mut file| file.read_exact(&mut bytes))
        .map_err(|e| SysError::from_io(device, e, crate::sysfs::ROOT_FIX))?;
    Ok(i32::from_ne_bytes(bytes))
}
