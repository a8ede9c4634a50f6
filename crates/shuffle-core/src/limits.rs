//! Bounds on what a request may make a process allocate, checked before it allocates.
//!
//! Two caps, both stated here and both raisable from the environment:
//! - **input files** (instance JSON, run configs, checkpoints): at most
//!   [`DEFAULT_MAX_INPUT_BYTES`] (256 MiB), or `UBERSHUFFLE_MAX_INPUT_BYTES`. [`read_capped`]
//!   stops reading at the cap, so `/dev/zero` or a huge file costs no more than the cap.
//! - **memory a request plans for** (a generated instance, the instance of a shuffle matrix, a
//!   run's data): at most [`DEFAULT_MAX_MEMORY_BYTES`] (4 GiB) as estimated up front, or
//!   `UBERSHUFFLE_MAX_MEMORY_BYTES`. Past it the request is a one-line error instead of an
//!   allocation failure.
//!
//! Both variables take a number of bytes with an optional binary suffix: `512M`, `8G`, `1T`.
//!
//! ```
//! use ubershuffle_core::limits::{Limits, instance_bytes};
//! let limits = Limits::default();
//! assert!(limits.check_memory("--points 4294967295", instance_bytes(2, 4_294_967_295, 4_294_967_295)).is_err());
//! assert!(limits.check_memory("--points 1000", instance_bytes(2, 1000, 600)).is_ok());
//! ```

use std::io::Read;
use std::path::Path;

/// This process's peak resident memory so far (`VmHWM` of `/proc/self/status`), in bytes;
/// `None` where the system does not say (not Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The default cap on an input file: 256 MiB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 256 << 20;
/// The default cap on the memory one request plans for: 4 GiB.
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 4 << 30;
/// The environment variable that raises (or lowers) the input cap.
pub const MAX_INPUT_ENV: &str = "UBERSHUFFLE_MAX_INPUT_BYTES";
/// The environment variable that raises (or lowers) the memory cap.
pub const MAX_MEMORY_ENV: &str = "UBERSHUFFLE_MAX_MEMORY_BYTES";

/// Why a request was refused before it allocated.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// A file is larger than the input cap.
    #[error("{path} is larger than the input cap of {} (set {MAX_INPUT_ENV} to raise it)", bytes_text(*.cap))]
    InputTooLarge {
        /// The file.
        path: String,
        /// The cap in bytes.
        cap: u64,
    },
    /// A request would need more memory than the cap.
    #[error(
        "{what} would need about {} of memory, over the cap of {} (set {MAX_MEMORY_ENV} to raise it)",
        bytes_text(*.need), bytes_text(*.cap)
    )]
    TooMuchMemory {
        /// The request, e.g. `--points 4294967295`.
        what: String,
        /// The estimate in bytes.
        need: u64,
        /// The cap in bytes.
        cap: u64,
    },
    /// A cap in the environment is not a size.
    #[error("{var}={value} is not a size in bytes (e.g. 536870912, 512M, 8G)")]
    BadSetting {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
}

/// The caps in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest input file, in bytes.
    pub max_input_bytes: u64,
    /// The most memory one request may plan for, in bytes.
    pub max_memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_input_bytes: DEFAULT_MAX_INPUT_BYTES, max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES }
    }
}

impl Limits {
    /// The defaults, overridden by [`MAX_INPUT_ENV`] and [`MAX_MEMORY_ENV`] when set.
    pub fn from_env() -> Result<Limits, LimitError> {
        let read = |var: &'static str, default: u64| match std::env::var(var) {
            Ok(value) => parse_size(&value).ok_or(LimitError::BadSetting { var, value }),
            Err(_) => Ok(default),
        };
        Ok(Limits {
            max_input_bytes: read(MAX_INPUT_ENV, DEFAULT_MAX_INPUT_BYTES)?,
            max_memory_bytes: read(MAX_MEMORY_ENV, DEFAULT_MAX_MEMORY_BYTES)?,
        })
    }

    /// Refuses `what` when its estimate `need` exceeds the memory cap.
    pub fn check_memory(&self, what: &str, need: u64) -> Result<(), LimitError> {
        if need > self.max_memory_bytes {
            return Err(LimitError::TooMuchMemory {
                what: what.to_string(),
                need,
                cap: self.max_memory_bytes,
            });
        }
        Ok(())
    }

    /// Reads a whole file of at most [`Limits::max_input_bytes`].
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, LimitError> {
        read_capped(path, self.max_input_bytes)
    }

    /// Reads a whole UTF-8 file of at most [`Limits::max_input_bytes`].
    pub fn read_text(&self, path: &Path) -> Result<String, LimitError> {
        let bytes = self.read(path)?;
        String::from_utf8(bytes).map_err(|_| LimitError::Io {
            path: path.display().to_string(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        })
    }
}

/// Reads a whole file, refusing it once it passes `cap` bytes; never holds more than
/// `cap + 1` bytes, whatever the file (a device, a pipe, a growing file).
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, LimitError> {
    let io = |error| LimitError::Io { path: path.display().to_string(), error };
    let file = std::fs::File::open(path).map_err(io)?;
    let too_large = || LimitError::InputTooLarge { path: path.display().to_string(), cap };
    if file.metadata().is_ok_and(|m| m.is_file() && m.len() > cap) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Bytes an instance of `workers` caches of `cache` points over `points` points takes, with its
/// generation: the caches, the assignment, the owner table and the generator's scratch.
pub fn instance_bytes(workers: usize, points: usize, cache: usize) -> u64 {
    let (n, q, s) = (workers as u64, points as u64, cache as u64);
    n.saturating_mul(s).saturating_add(q.saturating_mul(3)).saturating_mul(4).saturating_add(q)
}

/// `"512M"`, `"8G"`, `"1T"`, `"4096"` (binary multiples) as bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        (i, 't' | 'T') => (&t[..i], 40),
        _ => (t, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// `bytes` as `"17.0 GiB"` (or `"512 bytes"`).
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if unit == "bytes" { format!("{bytes} bytes") } else { format!("{value:.1} {unit}") }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("8g"), Some(8 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999T"), None);
        assert_eq!(bytes_text(512), "512 bytes");
        assert_eq!(bytes_text(17 << 30), "17.0 GiB");
    }

    #[test]
    fn reads_stop_at_the_cap() {
        let dir = std::env::temp_dir().join(format!("ubershuffle-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_capped(&file, 10).unwrap().len(), 10);
        let e = read_capped(&file, 9).unwrap_err().to_string();
        assert!(e.contains("larger than the input cap of 9 bytes") && e.contains(MAX_INPUT_ENV), "{e}");
        #[cfg(unix)]
        {
            let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
            assert!(matches!(e, LimitError::InputTooLarge { .. }), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memory_estimates_refuse_the_absurd() {
        let l = Limits::default();
        let e = l.check_memory("--points 4294967295", instance_bytes(3, 4_294_967_295, 1)).unwrap_err();
        assert!(e.to_string().contains("over the cap of 4.0 GiB"), "{e}");
        assert!(l.check_memory("q", instance_bytes(20, 100_000, 40_000)).is_ok());
        assert_eq!(instance_bytes(usize::MAX, usize::MAX, usize::MAX), u64::MAX);
    }
}
