//! Writing a file so that nothing half-written or foreign is ever left at its path: the bytes
//! go to a temporary file in the target's folder, created exclusively (`O_CREAT | O_EXCL`, so
//! a symlink or file planted at the temporary name is never followed nor reused), synced, then
//! renamed over the target (a rename replaces a symlink at the target, never follows it). A
//! private file (a checkpoint) is created readable and writable by its owner only (mode 0600
//! on unix) before any byte is in it. Every writer of checkpoints, summaries and result files
//! goes through [`write_atomic`].

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Who may read a file written by [`write_atomic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Its owner only (mode 0600 on unix): checkpoints, which hold the model and the data's
    /// assignment.
    Private,
    /// As the process's umask allows: results and summaries meant to be shared.
    Public,
}

/// Temporary names tried before giving up (each taken one costs a try: planted or in use).
const TEMPORARY_NAMES: u32 = 16;

/// Writes `bytes` to `path` atomically with `access` (see the module's documentation). The
/// error names the path. On failure the file at `path`, if any, is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    write_through_temporary(path, bytes, access)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

/// [`write_atomic`] of a file anyone the umask allows may read (results, summaries, plans).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, bytes, Access::Public)
}

/// The `k`-th temporary name for `path`: hidden, in the same folder (so the rename stays on one
/// file system), and distinct per process.
fn temporary_path(path: &Path, k: u32) -> std::io::Result<PathBuf> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name =
        path.file_name().ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "not a file path"))?;
    Ok(dir.join(format!(".{}.{}.{k}.tmp", name.to_string_lossy(), std::process::id())))
}

/// Creates a new file at `path`, failing if anything (a symlink included) is there.
fn create_exclusive(path: &Path, access: Access) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if access == Access::Private {
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    }
    #[cfg(not(unix))]
    let _ = access;
    options.open(path)
}

fn write_through_temporary(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    let mut taken = None;
    for k in 0..TEMPORARY_NAMES {
        let tmp = temporary_path(path, k)?;
        match create_exclusive(&tmp, access) {
            Ok(file) => {
                taken = Some((tmp, file));
                break;
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    let Some((tmp, mut file)) = taken else {
        let detail = format!("{TEMPORARY_NAMES} temporary names beside it are taken");
        return Err(std::io::Error::new(ErrorKind::AlreadyExists, detail));
    };
    let result =
        file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ubershuffle-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_symlink_planted_at_the_target_or_the_temporary_name_is_not_followed() {
        let dir = folder("symlinks");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let target = dir.join("checkpoint.json");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&victim, &target).unwrap();
            std::os::unix::fs::symlink(&victim, temporary_path(&target, 0).unwrap()).unwrap();
        }
        write_atomic(&target, b"new", Access::Private).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&target).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_intact() {
        let dir = folder("failed");
        let target = dir.join("summary.json");
        write_atomically(&target, b"old").unwrap();
        // Every temporary name taken: the write cannot start, and says so naming the path.
        for k in 0..TEMPORARY_NAMES {
            std::fs::create_dir(temporary_path(&target, k).unwrap()).unwrap();
        }
        let e = write_atomically(&target, b"new").unwrap_err();
        assert!(e.to_string().contains("summary.json"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn private_files_are_created_for_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = folder("mode");
        let target = dir.join("checkpoint.json");
        write_atomic(&target, b"{}", Access::Private).unwrap();
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
