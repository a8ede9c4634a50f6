//! Room on a store's file system: a store's sparse file takes pages only when a record is
//! written, and a write through the mapping into a page the file system cannot give (a full
//! tmpfs, a full disk) kills the process with SIGBUS. So every record's pages are reserved
//! (`fallocate`) before its bytes are written, and a store can check its file system's free
//! space up front; both failures are [`NoSpace`], one line that says what to do.

use std::fs::File;

use rustix::fs::FallocateFlags;
use rustix::io::Errno;

/// Pages are reserved and released whole.
pub const PAGE: u64 = 4096;

/// A store's file system has no room for what it must hold.
#[derive(Debug, thiserror::Error)]
#[error("{dir}: {wanted} bytes of records do not fit: its file system has {free} bytes free; {hint}")]
pub struct NoSpace {
    /// The store's folder.
    pub dir: String,
    /// The bytes wanted.
    pub wanted: u64,
    /// The file system's free space.
    pub free: u64,
    /// What to do about it.
    pub hint: &'static str,
}

/// What a store's owner can do when its file system is full.
pub fn hint(temporary: bool) -> &'static str {
    if temporary {
        "store_dir= keeps the store on disk instead of in shared memory"
    } else {
        "give store_dir= a folder on a file system with room"
    }
}

/// The bytes free for an unprivileged user on `file`'s file system (0 when it cannot say).
pub fn free_bytes(file: &File) -> u64 {
    rustix::fs::fstatvfs(file).map(|s| s.f_bavail.saturating_mul(s.f_frsize)).unwrap_or(0)
}

/// The bytes `file` takes on its file system (its allocated blocks).
pub fn allocated_bytes(file: &File) -> u64 {
    rustix::fs::fstat(file).map(|s| (s.st_blocks as u64).saturating_mul(512)).unwrap_or(0)
}

/// Why a reservation failed.
#[derive(Debug)]
pub enum ReserveError {
    /// The file system is full.
    Full,
    /// Another failure of the call.
    Os(std::io::Error),
}

/// Reserves the whole pages of `file` that cover `start..end` (its length unchanged), so that
/// writes there through a mapping cannot fail. A file system that cannot reserve
/// (`EOPNOTSUPP`: some network and FUSE file systems) is left as it is: there a full file
/// system can still end a write with SIGBUS.
pub fn reserve(file: &File, start: u64, end: u64) -> Result<(), ReserveError> {
    if end <= start {
        return Ok(());
    }
    let from = start - start % PAGE;
    let to = end.div_ceil(PAGE) * PAGE;
    match rustix::fs::fallocate(file, FallocateFlags::KEEP_SIZE, from, to - from) {
        Ok(()) => Ok(()),
        Err(Errno::NOSPC) | Err(Errno::DQUOT) => Err(ReserveError::Full),
        Err(Errno::OPNOTSUPP) | Err(Errno::NOSYS) => Ok(()),
        Err(e) => Err(ReserveError::Os(e.into())),
    }
}
