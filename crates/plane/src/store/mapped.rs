//! [`MappedStore`]: a rank's records in files of a folder, mapped into memory. Record `i`
//! lives at its place in the data set laid end to end (`records.bin`, a sparse file: only the
//! records held take space), `held.u8` has a byte per record (1: every byte of it is there),
//! and `index.u64` the offsets the store was made for. Every process that maps the files sees
//! the same bytes (DataLoader workers read the current records, never a copy taken at fork),
//! and a folder kept across a restart keeps its records.
//!
//! A record's pages are reserved on the file system before its bytes are written ([`space`]),
//! so a full file system is an error ([`StoreError::NoSpace`]), never SIGBUS. A temporary store
//! ([`MappedStore::open_temporary`], Linux) removes its files and folder as soon as they are
//! open and mapped: the file system frees them when the last process that maps them ends,
//! however it ends (SIGKILL included); other processes open them through
//! `/proc/<pid>/fd/<fd>` of the owner ([`MappedStore::fds`]).

#![allow(unsafe_code)] // mapping a file is unsafe in Rust's model: see `map`'s SAFETY comment

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{Ordering, fence};

use memmap2::MmapMut;
use ubershuffle_codes::{CodecError, RecordIndex, RecordSource, RecordWriter};

use super::space::{self, NoSpace, PAGE, ReserveError};

/// The files of a store.
const INDEX_FILE: &str = "index.u64";
const RECORDS_FILE: &str = "records.bin";
const HELD_FILE: &str = "held.u8";

/// Why a store cannot be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file of the store could not be made, read or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The folder holds a store of another data set.
    #[error(
        "{dir} holds a store of another data set ({records} records, {bytes} bytes, against {expected_records} records, {expected_bytes} bytes): remove it or choose another folder"
    )]
    OtherData {
        /// The folder.
        dir: String,
        /// Its records.
        records: usize,
        /// Its bytes.
        bytes: u64,
        /// The data set's records.
        expected_records: usize,
        /// The data set's bytes.
        expected_bytes: u64,
    },
    /// A record's bytes do not fit its place.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The store's file system has no room for its records.
    #[error(transparent)]
    NoSpace(#[from] NoSpace),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.display().to_string(), source }
}

/// A rank's record store (see the module's docs).
#[derive(Debug)]
pub struct MappedStore {
    dir: PathBuf,
    index: RecordIndex,
    index_file: File,
    records: File,
    held_file: File,
    data: Option<MmapMut>,
    held: MmapMut,
    /// Per record: its pages are reserved (held records, and records being written).
    reserved: Vec<bool>,
    temporary: bool,
    unlinked: bool,
}

/// Maps `file` (of `len` bytes) shared and writable.
fn map(file: &File, path: &Path) -> Result<MmapMut, StoreError> {
    // SAFETY: the file is one of a store's, in a folder the store made or was given for it
    // alone; its length is fixed at creation and never shrinks while mapped. Other processes
    // only read it (DataLoader workers) or open it again after this one ended (a restart), so
    // the bytes behind the slices this mapping hands out change only through this mapping.
    unsafe { MmapMut::map_mut(file) }.map_err(io(path))
}

impl MappedStore {
    /// Opens the store in `dir` for the records of `index`, making the folder and its files
    /// when they are missing; records a folder already holds are kept. A folder made for
    /// another data set is an error (nothing in it is changed).
    pub fn open(dir: &Path, index: RecordIndex) -> Result<Self, StoreError> {
        MappedStore::open_in(dir, index, false, None)
    }

    /// Opens the store in `dir` as [`MappedStore::open`] does, first checking (when `expect`
    /// is given) that its file system has room for `expect` bytes of records beside what the
    /// store already takes: else [`StoreError::NoSpace`], nothing mapped.
    pub fn open_expecting(dir: &Path, index: RecordIndex, expect: Option<u64>) -> Result<Self, StoreError> {
        MappedStore::open_in(dir, index, false, expect)
    }

    fn open_in(
        dir: &Path,
        index: RecordIndex,
        temporary: bool,
        expect: Option<u64>,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let index_path = dir.join(INDEX_FILE);
        let records_path = dir.join(RECORDS_FILE);
        let held_path = dir.join(HELD_FILE);
        let existing = match std::fs::read(&index_path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&index_path)(e)),
        };
        let wanted = offsets_bytes(&index);
        let reuse = match existing {
            Some(bytes) if bytes == wanted => true,
            Some(bytes) => {
                let offsets: Vec<u64> = bytes
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect();
                return Err(StoreError::OtherData {
                    dir: dir.display().to_string(),
                    records: offsets.len().saturating_sub(1),
                    bytes: offsets.last().copied().unwrap_or(0),
                    expected_records: index.len(),
                    expected_bytes: index.total_bytes(),
                });
            }
            None => false,
        };
        let open = |path: &Path, len: u64| -> Result<File, StoreError> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(!reuse)
                .open(path)
                .map_err(io(path))?;
            if file.metadata().map_err(io(path))?.len() != len {
                file.set_len(len).map_err(io(path))?;
            }
            Ok(file)
        };
        let records = open(&records_path, index.total_bytes())?;
        if let Some(expect) = expect {
            let free = space::free_bytes(&records);
            if expect.saturating_sub(space::allocated_bytes(&records)) > free {
                let hint = space::hint(temporary);
                return Err(NoSpace { dir: dir.display().to_string(), wanted: expect, free, hint }.into());
            }
        }
        let held_file = open(&held_path, index.len().max(1) as u64)?;
        if !reuse {
            // The index goes last: a folder without it is remade from scratch next time.
            let tmp = dir.join(format!("{INDEX_FILE}.tmp"));
            let mut f = File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(&wanted).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
            std::fs::rename(&tmp, &index_path).map_err(io(&index_path))?;
        }
        let index_file = File::open(&index_path).map_err(io(&index_path))?;
        let data = (index.total_bytes() > 0).then(|| map(&records, &records_path)).transpose()?;
        // The flags are written through the mapping too: their pages first.
        let flags = index.len().max(1) as u64;
        space::reserve(&held_file, 0, flags).map_err(|e| match e {
            ReserveError::Full => StoreError::from(NoSpace {
                dir: dir.display().to_string(),
                wanted: flags,
                free: space::free_bytes(&held_file),
                hint: space::hint(temporary),
            }),
            ReserveError::Os(source) => io(&held_path)(source),
        })?;
        let held = map(&held_file, &held_path)?;
        let reserved = (0..index.len()).map(|i| held[i] == 1).collect();
        Ok(MappedStore {
            dir: dir.to_path_buf(),
            index,
            index_file,
            records,
            held_file,
            data,
            held,
            reserved,
            temporary,
            unlinked: false,
        })
    }

    /// Makes a temporary store in the new folder `dir` (see [`MappedStore::open_expecting`]) and, on
    /// Linux, removes its files and the folder at once: they live on, unnamed, while a process
    /// maps them or holds them open, and the file system frees them when the last one ends,
    /// however it ends. Elsewhere the folder stays until its owner removes it.
    pub fn open_temporary(dir: &Path, index: RecordIndex, expect: Option<u64>) -> Result<Self, StoreError> {
        let mut store = MappedStore::open_in(dir, index, true, expect);
        if cfg!(target_os = "linux") {
            let removed = std::fs::remove_dir_all(dir).map_err(io(dir));
            store = store.and_then(|s| removed.map(|()| MappedStore { unlinked: true, ..s }));
        }
        store
    }

    /// Whether the store's files and folder were removed once mapped (a temporary store on
    /// Linux).
    pub fn is_unlinked(&self) -> bool {
        self.unlinked
    }

    /// The open files' descriptors: the index, the records and the flags, in that order (for
    /// `/proc/<pid>/fd/<fd>` when the files have no name).
    pub fn fds(&self) -> [i32; 3] {
        use std::os::fd::AsRawFd;
        [self.index_file.as_raw_fd(), self.records.as_raw_fd(), self.held_file.as_raw_fd()]
    }

    /// Reserves the pages of record `id` (see [`space::reserve`]), once until it is evicted.
    pub fn reserve(&mut self, id: u32) -> Result<(), StoreError> {
        if self.reserved.get(id as usize).copied().unwrap_or(true) {
            return Ok(());
        }
        if let Some(range) = self.index.range(id) {
            let path = self.dir.join(RECORDS_FILE);
            space::reserve(&self.records, range.start, range.end)
                .map_err(|e| self.reserve_error(e, range.end - range.start, &path))?;
            // Map the pages now, in one call, rather than fault them in one at a time as the
            // record's bytes arrive; best effort (older kernels lack the advice).
            #[cfg(target_os = "linux")]
            if let Some(data) = &self.data {
                let len = (range.end - range.start) as usize;
                if len > 0 {
                    let _ = data.advise_range(memmap2::Advice::PopulateWrite, range.start as usize, len);
                }
            }
        }
        self.reserved[id as usize] = true;
        Ok(())
    }

    /// Reserves the pages of the records `ids`.
    pub fn reserve_all(&mut self, ids: &[u32]) -> Result<(), StoreError> {
        ids.iter().try_for_each(|&id| self.reserve(id))
    }

    fn no_space(&self, wanted: u64, free: u64) -> NoSpace {
        NoSpace { dir: self.dir.display().to_string(), wanted, free, hint: space::hint(self.temporary) }
    }

    fn reserve_error(&self, e: ReserveError, wanted: u64, path: &Path) -> StoreError {
        match e {
            ReserveError::Full => self.no_space(wanted, space::free_bytes(&self.records)).into(),
            ReserveError::Os(source) => StoreError::Io { path: path.display().to_string(), source },
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data set's index.
    pub fn index(&self) -> &RecordIndex {
        &self.index
    }

    /// Whether record `id` is held whole.
    pub fn is_held(&self, id: u32) -> bool {
        (id as usize) < self.index.len() && self.held[id as usize] == 1
    }

    /// The records held, sorted.
    pub fn held_ids(&self) -> Vec<u32> {
        (0..self.index.len() as u32).filter(|&id| self.held[id as usize] == 1).collect()
    }

    /// The bytes of the records held.
    pub fn held_bytes(&self) -> u64 {
        self.held_ids().iter().filter_map(|&id| self.index.size(id)).sum()
    }

    /// Record `id`'s bytes if held.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        if !self.is_held(id) {
            return None;
        }
        self.place(id)
    }

    /// Stores record `id` whole (its length must be the index's size).
    pub fn put(&mut self, id: u32, bytes: &[u8]) -> Result<(), StoreError> {
        let size =
            self.index.size(id).ok_or(CodecError::PointOutOfRange { point: id, points: self.index.len() })?;
        if bytes.len() as u64 != size {
            return Err(CodecError::WrongSize { point: id, len: bytes.len(), size }.into());
        }
        self.reserve(id)?;
        self.write_at(id, 0, bytes)?;
        self.complete(id)?;
        Ok(())
    }

    /// Drops the records `ids`: they are no longer held, and the pages only they used are
    /// given back to the file system (where it can punch holes: tmpfs, ext4, xfs, btrfs).
    pub fn evict(&mut self, ids: &[u32]) {
        for &id in ids {
            if let Some(flag) = self.held.get_mut(id as usize) {
                *flag = 0;
            }
            if let Some(r) = self.reserved.get_mut(id as usize) {
                *r = false;
            }
        }
        for &id in ids {
            if let Some(range) = self.index.range(id) {
                self.release(range.start, range.end);
            }
        }
    }

    /// Drops every record held but those of `keep` (sorted).
    pub fn retain(&mut self, keep: &[u32]) -> Vec<u32> {
        let gone: Vec<u32> =
            self.held_ids().into_iter().filter(|id| keep.binary_search(id).is_err()).collect();
        self.evict(&gone);
        gone
    }

    /// Writes the mapped bytes to the files (for a folder kept across a restart).
    pub fn flush(&self) -> Result<(), StoreError> {
        if let Some(data) = &self.data {
            data.flush().map_err(io(&self.dir.join(RECORDS_FILE)))?;
        }
        self.held.flush().map_err(io(&self.dir.join(HELD_FILE)))
    }

    /// Gives back the whole pages within `start..end` of `records.bin` that no held record
    /// touches (a page shared with a held neighbour stays).
    fn release(&self, start: u64, end: u64) {
        let mut from = start - start % PAGE;
        let mut to = end.div_ceil(PAGE) * PAGE;
        if from < start && self.page_in_use(from) {
            from += PAGE;
        }
        if to > end && to - PAGE >= from && self.page_in_use(to - PAGE) {
            to -= PAGE;
        }
        let to = to.min(self.index.total_bytes());
        if to <= from {
            return;
        }
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        // A file system that cannot punch holes keeps the bytes: only the space is not
        // given back.
        let _ = rustix::fs::fallocate(&self.records, flags, from, to - from);
    }

    /// Whether a held record, or one being written, has bytes in the page starting at `page`.
    fn page_in_use(&self, page: u64) -> bool {
        let offsets = self.index.offsets();
        // Records whose range meets [page, page + PAGE): the first ending after `page`.
        let first = offsets.partition_point(|&o| o <= page).saturating_sub(1);
        (first..self.index.len())
            .take_while(|&i| offsets[i] < page + PAGE)
            .any(|i| offsets[i + 1] > page && (self.held[i] == 1 || self.reserved[i]))
    }
}

impl MappedStore {
    /// Record `id`'s place, held or not.
    fn place(&self, id: u32) -> Option<&[u8]> {
        let range = self.index.range(id)?;
        match &self.data {
            Some(data) => data.get(range.start as usize..range.end as usize),
            None => Some(&[]),
        }
    }
}

impl RecordSource for MappedStore {
    /// The size of a record held.
    fn size(&self, id: u32) -> Option<u64> {
        self.is_held(id).then(|| self.index.size(id)).flatten()
    }

    /// Reads record `id`'s place, held or not: the codec reads only what it knows is there.
    fn xor_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        ubershuffle_codes::xor_piece_of(self.place(id), id, at, dst)
    }

    fn copy_piece_into(&self, id: u32, at: usize, dst: &mut [u8]) -> Result<(), CodecError> {
        ubershuffle_codes::copy_piece_of(self.place(id), id, at, dst)
    }
}

impl RecordWriter for MappedStore {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), CodecError> {
        let range = self
            .index
            .range(id)
            .ok_or(CodecError::PointOutOfRange { point: id, points: self.index.len() })?;
        let size = range.end - range.start;
        let end = (at as u64).checked_add(bytes.len() as u64).filter(|&e| e <= size);
        let Some(end) = end else {
            return Err(CodecError::WrongSize { point: id, len: at.saturating_add(bytes.len()), size });
        };
        // Callers reserve first (`put`, a decoder's set-up); this is the guard against SIGBUS.
        if let Err(e) = self.reserve(id) {
            return Err(CodecError::MalformedPacket { reason: crate::error::one_line(&e) });
        }
        if let Some(data) = &mut self.data {
            data[(range.start + at as u64) as usize..(range.start + end) as usize].copy_from_slice(bytes);
        }
        Ok(())
    }

    fn complete(&mut self, id: u32) -> Result<(), CodecError> {
        let points = self.index.len();
        let flag = self.held.get_mut(id as usize).ok_or(CodecError::PointOutOfRange { point: id, points })?;
        // The bytes before the flag, for readers in other processes.
        fence(Ordering::Release);
        *flag = 1;
        Ok(())
    }
}

/// The offsets as the index file holds them.
fn offsets_bytes(index: &RecordIndex) -> Vec<u8> {
    index.offsets().iter().flat_map(|o| o.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ubs-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_are_kept_across_opens_and_eviction_gives_pages_back() {
        let d = dir("keep");
        let sizes = [5000u64, 3, 9000, 0, 4096];
        let index = RecordIndex::from_sizes(sizes).unwrap();
        let mut store = MappedStore::open(&d, index.clone()).unwrap();
        let bytes: Vec<Vec<u8>> =
            sizes.iter().map(|&s| (0..s).map(|i| (i % 251) as u8 + 1).collect()).collect();
        for id in [0u32, 2, 3] {
            store.put(id, &bytes[id as usize]).unwrap();
        }
        let e = store.put(1, b"toolong").unwrap_err();
        assert!(matches!(e, StoreError::Codec(CodecError::WrongSize { point: 1, len: 7, size: 3 })), "{e}");
        assert_eq!(store.held_ids(), vec![0, 2, 3]);
        assert_eq!(store.get(2), Some(&bytes[2][..]));
        assert_eq!(store.get(1), None);
        store.flush().unwrap();
        drop(store);
        let mut store = MappedStore::open(&d, index).unwrap();
        assert_eq!(store.get(0), Some(&bytes[0][..]), "kept across a reopen");
        // Record 0 (bytes 0..5000) alone uses page 0; page 1 it shares with record 2
        // (5003..14003), which stays.
        let before = space::allocated_bytes(&store.records);
        assert_eq!(store.retain(&[2]), vec![0, 3]);
        assert_eq!(store.held_ids(), vec![2]);
        assert_eq!(before - space::allocated_bytes(&store.records), PAGE, "record 0's own page goes back");
        assert_eq!(store.get(2), Some(&bytes[2][..]), "a neighbour's eviction keeps shared pages");
        let other = RecordIndex::from_sizes([1u64, 2]).unwrap();
        assert!(matches!(MappedStore::open(&d, other), Err(StoreError::OtherData { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_temporary_store_has_no_name_and_reserves_what_it_writes() {
        let d = dir("temporary");
        let sizes = [10_000u64, 100, 7];
        let index = RecordIndex::from_sizes(sizes).unwrap();
        let mut store = MappedStore::open_temporary(&d, index.clone(), Some(10_107)).unwrap();
        assert_eq!(store.is_unlinked(), cfg!(target_os = "linux"));
        assert_eq!(d.exists(), !cfg!(target_os = "linux"), "the folder is gone once mapped");
        store.put(1, &[7; 100]).unwrap();
        assert!(space::allocated_bytes(&store.records) >= PAGE, "the record's page is reserved");
        store.reserve(0).unwrap();
        assert_eq!(space::allocated_bytes(&store.records), 3 * PAGE, "records 0 and 1: pages 0 to 2");
        // Record 0 is being written (reserved, not held) when record 1, which shares its last
        // page, is evicted: its pages and the bytes written so far stay.
        store.write_at(0, 8_500, &[1; 1000]).unwrap();
        store.evict(&[1]);
        assert_eq!(store.get(1), None);
        assert_eq!(space::allocated_bytes(&store.records), 3 * PAGE);
        store.write_at(0, 9_500, &[2; 500]).unwrap();
        store.complete(0).unwrap();
        let tail = store.get(0).map(|r| &r[8_500..]).unwrap();
        let (ones, twos) = tail.split_at(1000);
        assert_eq!(
            (ones.iter().filter(|&&b| b == 1).count(), twos),
            (1000, &[2u8; 500][..]),
            "the bytes written before the eviction"
        );
        let too_big = MappedStore::open_expecting(&dir("too-big"), index, Some(u64::MAX));
        assert!(matches!(too_big, Err(StoreError::NoSpace(_))));
        let _ = std::fs::remove_dir_all(dir("too-big"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
