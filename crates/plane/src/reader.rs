//! [`RecordReader`]: a data set the engine reads itself, on its source thread, without the
//! caller's interpreter: the records of a delivery go from the source into the rank's record
//! store and no Python thread waits on a disk or a network for them. The readers here cover
//! the local layouts (a file per record, [`FileReader`]; records end to end in one file, with
//! an index of offsets, [`BlobReader`]); a reader of another layout (shards, an object store)
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
