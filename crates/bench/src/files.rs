//! Writing files so that a failure never leaves a half-written one behind.

use std::path::Path;

use anyhow::Context;

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename
/// ([`runtime::write_atomically`]), with the path in the error.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    runtime::write_atomically(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
