//! The data plane's records read from files, as `ubershuffle serve` takes them: a file of
//! records of one size ([`fixed_records`]), records laid end to end in one file with an index
//! of their offsets ([`blob_records`]), or a folder of one record a file ([`folder_records`],
//! sorted as the Python package's `ubershuffle.sources.as_source` sorts them). Everything is
//! read into memory, within the memory cap ([`ubershuffle_core::limits`]).
//!
//! The index format (the one of a Python `RecordStore`'s `index.u64` and of
//! `RecordSource.from_blob`'s offsets): `records + 1` little-endian u64 offsets, the first 0,
//! never decreasing, the last the blob's size; record `i` is bytes `offsets[i]..offsets[i + 1]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ubershuffle_codes::{CodecError, RecordIndex, Records, UnevenRecords};
use ubershuffle_core::limits::{LimitError, Limits};

use crate::run_data::SizedRecords;

/// Why records cannot be read from files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordFilesError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The records do not fit their description.
    #[error("{path}: {reason}")]
    Layout {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong, in one line.
        reason: String,
    },
    /// The records would pass the memory cap.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// More records or bytes than the codec takes.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordFilesError + '_ {
    move |source| RecordFilesError::Io { path: path.to_path_buf(), source }
}

fn layout(path: &Path, reason: impl Into<String>) -> RecordFilesError {
    RecordFilesError::Layout { path: path.to_path_buf(), reason: reason.into() }
}

/// Reads `path` whole, after checking its size against the memory cap.
fn read_within(path: &Path, limits: &Limits) -> Result<Vec<u8>, RecordFilesError> {
    let len = std::fs::metadata(path).map_err(io(path))?.len();
    limits.check_memory(&format!("the records file {}", path.display()), len)?;
    std::fs::read(path).map_err(io(path))
}

/// The records of `path`, `width` bytes each (record `i` at byte `i * width`).
pub fn fixed_records(path: &Path, width: usize, limits: &Limits) -> Result<Records, RecordFilesError> {
    if width == 0 {
        return Err(layout(path, "records need at least one byte"));
    }
    let bytes = read_within(path, limits)?;
    if bytes.is_empty() || bytes.len() % width != 0 {
        let len = bytes.len();
        return Err(layout(
            path,
            format!("{len} bytes is not a positive multiple of the record size {width}"),
        ));
    }
    Ok(Records::from_bytes(width, bytes)?)
}

/// The records laid end to end in `blob`, at the offsets of the index file `index` (see the
/// module's docs for its format).
pub fn blob_records(blob: &Path, index: &Path, limits: &Limits) -> Result<SizedRecords, RecordFilesError> {
    let raw = read_within(index, limits)?;
    if raw.len() % 8 != 0 || raw.len() < 16 {
        return Err(layout(index, "an index holds records + 1 little-endian u64 offsets (at least two)"));
    }
    let offsets: Vec<u64> = raw
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    if offsets[0] != 0 {
        return Err(layout(index, format!("the first offset is {}, not 0", offsets[0])));
    }
    if let Some(k) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(layout(
            index,
            format!("offset {} ({}) is below offset {k} ({})", k + 1, offsets[k + 1], offsets[k]),
        ));
    }
    let bytes = read_within(blob, limits)?;
    let end = offsets[offsets.len() - 1];
    if end != bytes.len() as u64 {
        return Err(layout(blob, format!("{} bytes, but its index ends at {end}", bytes.len())));
    }
    let index = RecordIndex::from_sizes(offsets.windows(2).map(|w| w[1] - w[0]))?;
    sized(UnevenRecords::new(index, bytes)?)
}

/// The records of the folder `dir`, one a file: every regular file under it (recursively,
/// following no link to a folder), names starting with `.` skipped, sorted by their path
/// relative to `dir` (components joined by `/`, compared byte by byte).
pub fn folder_records(dir: &Path, limits: &Limits) -> Result<SizedRecords, RecordFilesError> {
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    if files.is_empty() {
        return Err(layout(dir, "the folder holds no file"));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sizes = Vec::with_capacity(files.len());
    for (_, path) in &files {
        sizes.push(std::fs::metadata(path).map_err(io(path))?.len());
    }
    let total = sizes.iter().fold(0u64, |sum, &s| sum.saturating_add(s));
    limits.check_memory(&format!("the records of {}", dir.display()), total)?;
    let index = RecordIndex::from_sizes(sizes)?;
    let mut bytes = Vec::with_capacity(total as usize);
    for (id, (_, path)) in files.iter().enumerate() {
        let record = std::fs::read(path).map_err(io(path))?;
        if Some(record.len() as u64) != index.size(id as u32) {
            return Err(layout(path, "the file changed size while it was read"));
        }
        bytes.extend_from_slice(&record);
    }
    sized(UnevenRecords::new(index, bytes)?)
}

/// Every regular file under `folder` (see [`folder_records`]), with its path relative to
/// `root` as bytes.
fn walk(root: &Path, folder: &Path, files: &mut Vec<(Vec<u8>, PathBuf)>) -> Result<(), RecordFilesError> {
    for entry in std::fs::read_dir(folder).map_err(io(folder))? {
        let entry = entry.map_err(io(folder))?;
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() {
            walk(root, &path, files)?;
        } else if path.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let key = relative.iter().map(|c| c.as_encoded_bytes()).collect::<Vec<_>>().join(&b'/');
            files.push((key, path));
        }
    }
    Ok(())
}

fn sized(records: UnevenRecords) -> Result<SizedRecords, RecordFilesError> {
    let index = records.index().clone();
    Ok(SizedRecords::new(index, Arc::new(records))?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ubs-record-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn bytes_of(records: &SizedRecords) -> Vec<Vec<u8>> {
        (0..records.index().len() as u32)
            .map(|id| {
                let mut out = Vec::new();
                records.append(id, &mut out).unwrap();
                out
            })
            .collect()
    }

    #[test]
    fn a_folder_is_read_in_sorted_relative_paths_and_a_blob_by_its_index() {
        let d = dir("folder");
        std::fs::create_dir_all(d.join("b/c")).unwrap();
        std::fs::create_dir_all(d.join(".hidden")).unwrap();
        for (name, bytes) in
            [("b/c/z", &b"zz"[..]), ("a", b"a"), ("b/a", b""), (".skip", b"no"), (".hidden/x", b"no")]
        {
            std::fs::write(d.join(name), bytes).unwrap();
        }
        let limits = Limits::default();
        let records = folder_records(&d, &limits).unwrap();
        assert_eq!(bytes_of(&records), vec![b"a".to_vec(), b"".to_vec(), b"zz".to_vec()]);
        let e = folder_records(&d.join(".hidden/none"), &limits).unwrap_err().to_string();
        assert!(e.starts_with(&format!("cannot read {}: ", d.join(".hidden/none").display())), "{e}");
        std::fs::create_dir_all(d.join("empty/.dot")).unwrap();
        let e = folder_records(&d.join("empty"), &limits).unwrap_err().to_string();
        assert_eq!(e, format!("{}: the folder holds no file", d.join("empty").display()));

        std::fs::write(d.join("blob"), b"helloworld").unwrap();
        let offsets: Vec<u8> = [0u64, 5, 5, 10].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(d.join("index"), &offsets).unwrap();
        let blob = blob_records(&d.join("blob"), &d.join("index"), &limits).unwrap();
        assert_eq!(bytes_of(&blob), vec![b"hello".to_vec(), b"".to_vec(), b"world".to_vec()]);
        let short: Vec<u8> = [0u64, 5, 9].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(d.join("short"), &short).unwrap();
        let e = blob_records(&d.join("blob"), &d.join("short"), &limits).unwrap_err().to_string();
        assert_eq!(e, format!("{}: 10 bytes, but its index ends at 9", d.join("blob").display()));
        std::fs::write(d.join("odd"), [0u8; 12]).unwrap();
        let e = blob_records(&d.join("blob"), &d.join("odd"), &limits).unwrap_err().to_string();
        assert!(e.ends_with(": an index holds records + 1 little-endian u64 offsets (at least two)"), "{e}");
        let late: Vec<u8> = [3u64, 5, 10].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(d.join("late"), &late).unwrap();
        let e = blob_records(&d.join("blob"), &d.join("late"), &limits).unwrap_err().to_string();
        assert!(e.ends_with(": the first offset is 3, not 0"), "{e}");
        let falling: Vec<u8> = [0u64, 6, 5, 10].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(d.join("falling"), &falling).unwrap();
        let e = blob_records(&d.join("blob"), &d.join("falling"), &limits).unwrap_err().to_string();
        assert!(e.ends_with(": offset 2 (5) is below offset 1 (6)"), "{e}");

        let fixed = fixed_records(&d.join("blob"), 5, &limits).unwrap();
        assert_eq!((fixed.len(), fixed.get(1)), (2, Some(b"world".as_slice())));
        let e = fixed_records(&d.join("blob"), 3, &limits).unwrap_err().to_string();
        assert!(e.ends_with(": 10 bytes is not a positive multiple of the record size 3"), "{e}");
        let tight = Limits { max_memory_bytes: 4, ..Limits::default() };
        assert!(matches!(fixed_records(&d.join("blob"), 5, &tight), Err(RecordFilesError::Limit(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
