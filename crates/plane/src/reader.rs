//! [`RecordReader`]: a data set the engine reads itself, on its source thread, without the
//! caller's interpreter: the records of a delivery go from the source into the rank's record
//! store and no Python thread waits on a disk or a network for them. The readers here cover
//! the local layouts (a file per record, [`FileReader`]; records end to end in one file, with
//! an index of offsets, [`BlobReader`]; records at byte ranges of shard files, [`ShardReader`]:
//! WebDataset tars, MDS shards, LitData chunks); a reader of another layout (shards, an object store)
//! implements the trait the same way and plugs into the same place: a caller's
//! [`crate::driver::Hooks::read`] hands its reads to it.
//!
//! What a reader must do: read exactly the records asked for, in the order given (sorted, so
//! that neighbours in a file or a shard share a read), check each record's size against the
//! data set's index (a source that changed since the index was made is a one-line error naming
//! the record, never wrong bytes), and put each whole into the store.

use std::fs::File;
use std::path::PathBuf;

use ubershuffle_codes::RecordIndex;

use crate::store::{SharedStore, locked};

/// Records read together from a blob at most (one read), in bytes: neighbours in the file are
/// read in one call up to this, then put into the store one by one.
const BLOB_READ_BYTES: u64 = 8 << 20;

/// Bytes between two records of a shard that a read takes rather than split into two reads
/// (tar headers and small members between a sample's chosen members).
const SHARD_GAP_BYTES: u64 = 8 << 10;

/// A data set the engine reads off the caller's interpreter (see the module's docs).
pub trait RecordReader: Send {
    /// What the reader reads, for messages (`"1000 files under /data"`).
    fn describe(&self) -> String;

    /// Reads the records `ids` (sorted, distinct) into `store`; returns the bytes read from
    /// the source. Errors are one line naming the record and the file or object.
    fn read_into(&mut self, ids: &[u32], store: &SharedStore) -> Result<u64, String>;
}

/// Checks that `got` bytes were read for record `id` whose index size is `want`.
fn check_size(id: u32, got: u64, want: u64, at: &str) -> Result<(), String> {
    if got != want {
        return Err(format!("record {id} ({at}) has {got} bytes now, {want} when the source was made"));
    }
    Ok(())
}

/// A data set of one file per record.
#[derive(Debug)]
pub struct FileReader {
    paths: Vec<PathBuf>,
    index: RecordIndex,
}

impl FileReader {
    /// The records in `paths` (record `i` is file `i`), of the sizes `index` says.
    pub fn new(paths: Vec<PathBuf>, index: RecordIndex) -> Result<FileReader, String> {
        if paths.len() != index.len() {
            return Err(format!("{} files for an index of {} records", paths.len(), index.len()));
        }
        Ok(FileReader { paths, index })
    }
}

impl RecordReader for FileReader {
    fn describe(&self) -> String {
        format!("{} files", self.paths.len())
    }

    fn read_into(&mut self, ids: &[u32], store: &SharedStore) -> Result<u64, String> {
        let mut total = 0;
        let mut buf = Vec::new();
        for &id in ids {
            let path = self.paths.get(id as usize).ok_or_else(|| format!("no record {id}"))?;
            let want = self.index.size(id).unwrap_or(0);
            buf.clear();
            let read = File::open(path).and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut buf));
            read.map_err(|e| format!("record {id} ({}): {e}", path.display()))?;
            check_size(id, buf.len() as u64, want, &path.display().to_string())?;
            locked(store).put(id, &buf).map_err(|e| e.to_string())?;
            total += want;
        }
        Ok(total)
    }
}

/// A data set of records laid end to end in one file, at the index's offsets.
#[derive(Debug)]
pub struct BlobReader {
    path: PathBuf,
    file: File,
    index: RecordIndex,
}

impl BlobReader {
    /// The records of the file `path` at the offsets of `index` (whose end must be the
    /// file's size).
    pub fn open(path: PathBuf, index: RecordIndex) -> Result<BlobReader, String> {
        let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let size = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?.len();
        if size != index.total_bytes() {
            return Err(format!(
                "{} has {size} bytes, its offsets end at {}",
                path.display(),
                index.total_bytes()
            ));
        }
        Ok(BlobReader { path, file, index })
    }
}

impl RecordReader for BlobReader {
    fn describe(&self) -> String {
        format!("{} records of {}", self.index.len(), self.path.display())
    }

    fn read_into(&mut self, ids: &[u32], store: &SharedStore) -> Result<u64, String> {
        use std::os::unix::fs::FileExt;
        let mut total = 0;
        let mut buf = Vec::new();
        let mut at = 0;
        while at < ids.len() {
            // A run of records next to each other in the file, up to the read's size.
            let first = self.index.range(ids[at]).ok_or_else(|| format!("no record {}", ids[at]))?;
            let mut end = at + 1;
            let mut to = first.end;
            while let Some(&next) = ids.get(end) {
                match self.index.range(next) {
                    Some(r) if r.start == to && r.end - first.start <= BLOB_READ_BYTES => {
                        to = r.end;
                        end += 1;
                    }
                    _ => break,
                }
            }
            buf.resize((to - first.start) as usize, 0);
            self.file.read_exact_at(&mut buf, first.start).map_err(|e| {
                format!("records {}..={} ({}): {e}", ids[at], ids[end - 1], self.path.display())
            })?;
            let mut store = locked(store);
            for &id in &ids[at..end] {
                let range = self.index.range(id).ok_or_else(|| format!("no record {id}"))?;
                let piece = &buf[(range.start - first.start) as usize..(range.end - first.start) as usize];
                store.put(id, piece).map_err(|e| e.to_string())?;
            }
            total += to - first.start;
            at = end;
        }
        Ok(total)
    }
}

/// Where one record of a [`ShardReader`] is: a byte range of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    /// The shard's index in the reader's list of shards.
    pub shard: u32,
    /// The record's first byte in the shard.
    pub start: u64,
}

/// A data set of records at byte ranges of shard files (a WebDataset tar's members, an MDS
/// shard's samples, a LitData chunk's items): records of one shard are read together, in runs
/// of neighbours up to 8 MiB that skip at most 8 KiB between two records (one `pread` each),
/// from one open file at a time.
#[derive(Debug)]
pub struct ShardReader {
    paths: Vec<PathBuf>,
    shard_sizes: Vec<u64>,
    ranges: Vec<ShardRange>,
    index: RecordIndex,
    open: Option<(u32, File)>,
}

impl ShardReader {
    /// Records whose sizes `index` says, record `i` at `ranges[i]`, in the shards `paths`
    /// whose sizes were `shard_sizes` when the index was made. Every range must lie inside its
    /// shard.
    pub fn new(
        paths: Vec<PathBuf>,
        shard_sizes: Vec<u64>,
        ranges: Vec<ShardRange>,
        index: RecordIndex,
    ) -> Result<ShardReader, String> {
        if paths.len() != shard_sizes.len() {
            return Err(format!("{} shards and {} shard sizes", paths.len(), shard_sizes.len()));
        }
        if ranges.len() != index.len() {
            return Err(format!("{} ranges for an index of {} records", ranges.len(), index.len()));
        }
        for (id, r) in ranges.iter().enumerate() {
            let size = index.size(id as u32).unwrap_or(0);
            let fits = shard_sizes
                .get(r.shard as usize)
                .is_some_and(|&s| r.start.checked_add(size).is_some_and(|e| e <= s));
            if !fits {
                return Err(format!(
                    "record {id} lies outside shard {} (or there is no such shard)",
                    r.shard
                ));
            }
        }
        Ok(ShardReader { paths, shard_sizes, ranges, index, open: None })
    }

    /// Record `id`'s range: its place and where it ends.
    fn range_of(&self, id: u32) -> Result<(ShardRange, u64), String> {
        let r = *self.ranges.get(id as usize).ok_or_else(|| format!("no record {id}"))?;
        Ok((r, r.start + self.index.size(id).unwrap_or(0)))
    }

    /// The open file of `shard`, checked against the size the index was made with.
    fn file(&mut self, shard: u32) -> Result<&File, String> {
        if self.open.as_ref().is_none_or(|(s, _)| *s != shard) {
            let path = &self.paths[shard as usize];
            let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let size = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?.len();
            let want = self.shard_sizes[shard as usize];
            if size != want {
                return Err(format!(
                    "{} has {size} bytes now, {want} when its index was made",
                    path.display()
                ));
            }
            self.open = Some((shard, file));
        }
        match &self.open {
            Some((_, f)) => Ok(f),
            None => Err("no shard open".into()),
        }
    }
}

impl RecordReader for ShardReader {
    fn describe(&self) -> String {
        format!("{} records in {} shards", self.index.len(), self.paths.len())
    }

    fn read_into(&mut self, ids: &[u32], store: &SharedStore) -> Result<u64, String> {
        use std::os::unix::fs::FileExt;
        let mut total = 0;
        let mut buf = Vec::new();
        let mut at = 0;
        while at < ids.len() {
            // A run of records of one shard, in order, near each other, up to the read's size.
            let (first, mut to) = self.range_of(ids[at])?;
            let mut end = at + 1;
            while let Some(&next) = ids.get(end) {
                let (r, stop) = self.range_of(next)?;
                let near = r.shard == first.shard && r.start >= to && r.start - to <= SHARD_GAP_BYTES;
                if !near || stop - first.start > BLOB_READ_BYTES {
                    break;
                }
                to = stop;
                end += 1;
            }
            buf.resize((to - first.start) as usize, 0);
            let file = self.file(first.shard)?;
            let read = file.read_exact_at(&mut buf, first.start);
            read.map_err(|e| {
                let path = self.paths[first.shard as usize].display();
                format!("records {}..={} ({path} at offset {}): {e}", ids[at], ids[end - 1], first.start)
            })?;
            let mut store = locked(store);
            for &id in &ids[at..end] {
                let (r, stop) = self.range_of(id)?;
                let piece = &buf[(r.start - first.start) as usize..(stop - first.start) as usize];
                store.put(id, piece).map_err(|e| e.to_string())?;
            }
            total += to - first.start;
            at = end;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MappedStore;
    use std::sync::{Arc, Mutex};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ubershuffle-reader-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn record(id: u32, size: u64) -> Vec<u8> {
        (0..size).map(|i| (i as u32).wrapping_mul(31).wrapping_add(id * 7) as u8).collect()
    }

    fn store_of(dir: &std::path::Path, index: &RecordIndex) -> SharedStore {
        Arc::new(Mutex::new(MappedStore::open(&dir.join("store"), index.clone()).unwrap()))
    }

    #[test]
    fn a_blob_is_read_in_runs_and_each_record_lands_whole() {
        let dir = scratch("blob");
        let sizes = vec![10u64, 0, 300, 5, 7000, 1];
        let index = RecordIndex::from_sizes(sizes.clone()).unwrap();
        let blob: Vec<u8> = (0..sizes.len() as u32).flat_map(|i| record(i, sizes[i as usize])).collect();
        std::fs::write(dir.join("blob"), &blob).unwrap();
        let store = store_of(&dir, &index);
        let mut reader = BlobReader::open(dir.join("blob"), index.clone()).unwrap();
        let read = reader.read_into(&[0, 1, 2, 4, 5], &store).unwrap();
        assert_eq!(read, 10 + 300 + 7000 + 1);
        let s = locked(&store);
        for id in [0u32, 1, 2, 4, 5] {
            assert_eq!(s.get(id), Some(&record(id, sizes[id as usize])[..]), "record {id}");
        }
        assert!(s.get(3).is_none());
        drop(s);
        // A blob whose size is not the index's is refused, saying both.
        std::fs::write(dir.join("short"), &blob[..100]).unwrap();
        let e = BlobReader::open(dir.join("short"), index).unwrap_err();
        assert!(e.contains("has 100 bytes") && !e.contains('\n'), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shards_are_read_in_runs_that_skip_small_gaps_and_a_changed_shard_is_named() {
        let dir = scratch("shards");
        // Two shards; records with gaps between them (headers, other members).
        let a: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..20_000u32).map(|i| (i % 13) as u8).collect();
        std::fs::write(dir.join("a"), &a).unwrap();
        std::fs::write(dir.join("b"), &b).unwrap();
        let spec = [(0u32, 0u64, 100u64), (0, 600, 50), (0, 15_000, 10), (1, 512, 1000), (1, 12_000, 5)];
        let index = RecordIndex::from_sizes(spec.iter().map(|s| s.2)).unwrap();
        let ranges = spec.iter().map(|&(shard, start, _)| ShardRange { shard, start }).collect();
        let paths = vec![dir.join("a"), dir.join("b")];
        let mut reader =
            ShardReader::new(paths.clone(), vec![20_000, 20_000], ranges, index.clone()).unwrap();
        let store = store_of(&dir, &index);
        let read = reader.read_into(&[0, 1, 2, 3, 4], &store).unwrap();
        // 0..650 in one read (a gap of 500), 15000..15010 alone (a gap of 14350), 512..1512 and
        // 12000..12005 (a gap of 10488).
        assert_eq!(read, 650 + 10 + 1000 + 5);
        let s = locked(&store);
        for (id, &(shard, start, size)) in spec.iter().enumerate() {
            let data = if shard == 0 { &a } else { &b };
            assert_eq!(s.get(id as u32), Some(&data[start as usize..(start + size) as usize]), "record {id}");
        }
        drop(s);
        // A range outside its shard is refused when the reader is made.
        let bad = vec![ShardRange { shard: 1, start: 19_500 }];
        let one = RecordIndex::from_sizes([1000u64]).unwrap();
        let e = ShardReader::new(paths.clone(), vec![20_000, 20_000], bad, one).unwrap_err();
        assert!(e.contains("record 0 lies outside shard 1"), "{e}");
        // A shard whose size changed since the index is named, and nothing is stored.
        std::fs::write(dir.join("b"), &b[..5000]).unwrap();
        let ranges = spec.iter().map(|&(shard, start, _)| ShardRange { shard, start }).collect();
        let mut reader = ShardReader::new(paths, vec![20_000, 20_000], ranges, index.clone()).unwrap();
        let store = store_of(&dir.join("again"), &index);
        let e = reader.read_into(&[3], &store).unwrap_err();
        assert!(e.contains("has 5000 bytes now, 20000 when its index was made") && !e.contains('\n'), "{e}");
        assert!(locked(&store).get(3).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_changed_since_the_index_is_named_and_not_stored() {
        let dir = scratch("files");
        let sizes = vec![3u64, 4];
        let index = RecordIndex::from_sizes(sizes.clone()).unwrap();
        let paths: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("{i}.bin"))).collect();
        std::fs::write(&paths[0], record(0, 3)).unwrap();
        std::fs::write(&paths[1], record(1, 9)).unwrap();
        let store = store_of(&dir, &index);
        let mut reader = FileReader::new(paths, index).unwrap();
        assert_eq!(reader.read_into(&[0], &store).unwrap(), 3);
        let e = reader.read_into(&[1], &store).unwrap_err();
        assert!(e.contains("record 1") && e.contains("9 bytes now, 4"), "{e}");
        assert!(locked(&store).get(1).is_none(), "no wrong bytes are stored");
        assert_eq!(locked(&store).get(0), Some(&record(0, 3)[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
