//! The data set `ubershuffle serve` serves, as its flags name it: a file of records of one size,
//! records laid end to end in one file with an index of their offsets, or a folder of one record
//! a file (sorted as the Python package's `ubershuffle.sources.as_source` sorts them). Only the
//! sizes are read here; the engine reads a record when a delivery first sends it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ubershuffle_codes::RecordIndex;
use ubershuffle_plane::reader::{BlobReader, FileReader, RecordReader};

use crate::cli::ServeArgs;

/// The records' index and their reader.
pub fn open(args: &ServeArgs) -> anyhow::Result<(RecordIndex, Box<dyn RecordReader>)> {
    match (&args.records, args.record_size, &args.index, &args.records_dir) {
        (Some(path), Some(width), None, None) => fixed(path, width),
        (Some(path), None, Some(index), None) => blob(path, index),
        (None, None, None, Some(dir)) => folder(dir),
        (Some(_), None, None, None) => bail!("--records needs --record-size B or --index FILE"),
        _ => bail!(
            "give the records as --records FILE (with --record-size or --index) or as --records-dir DIR"
        ),
    }
}

fn size_of(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len())
}

fn reader(path: &Path, index: RecordIndex) -> anyhow::Result<(RecordIndex, Box<dyn RecordReader>)> {
    let blob = BlobReader::open(path.to_path_buf(), index.clone()).map_err(anyhow::Error::msg)?;
    Ok((index, Box::new(blob)))
}

/// Records of `width` bytes each (record `i` at byte `i * width`).
fn fixed(path: &Path, width: u64) -> anyhow::Result<(RecordIndex, Box<dyn RecordReader>)> {
    if width == 0 {
        bail!("--record-size must be at least 1 byte");
    }
    let len = size_of(path)?;
    if len == 0 || len % width != 0 {
        bail!("{}: {len} bytes is not a positive multiple of the record size {width}", path.display());
    }
    let index = RecordIndex::from_sizes(std::iter::repeat_n(width, (len / width) as usize))?;
    reader(path, index)
}

/// Records at the offsets of the index file `index_path` (see the command's help).
fn blob(path: &Path, index_path: &Path) -> anyhow::Result<(RecordIndex, Box<dyn RecordReader>)> {
    let shown = index_path.display();
    let bytes = std::fs::read(index_path).with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() < 16 || bytes.len() % 8 != 0 {
        bail!("{shown}: {} bytes is not records + 1 little-endian u64 offsets", bytes.len());
    }
    let offsets: Vec<u64> =
        bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[1] < w[0]) {
        bail!("{shown}: the offsets must start at 0 and never decrease");
    }
    let (len, end) = (size_of(path)?, offsets[offsets.len() - 1]);
    if len != end {
        bail!("{}: {len} bytes, but its index ends at {end}", path.display());
    }
    let index = RecordIndex::from_sizes(offsets.windows(2).map(|w| w[1] - w[0]))?;
    reader(path, index)
}

/// Every regular file under `dir` (names starting with '.' skipped), sorted by path.
fn folder(dir: &Path) -> anyhow::Result<(RecordIndex, Box<dyn RecordReader>)> {
    let mut paths = Vec::new();
    walk(dir, &mut paths)?;
    if paths.is_empty() {
        bail!("{}: the folder holds no file", dir.display());
    }
    // As Python sorts them: by the relative path as a string ("a-b/x" before "a/b").
    paths.sort_by_cached_key(|p| p.strip_prefix(dir).unwrap_or(p).to_string_lossy().into_owned());
    let sizes = paths.iter().map(|p| size_of(p)).collect::<anyhow::Result<Vec<u64>>>()?;
    let index = RecordIndex::from_sizes(sizes)?;
    let files = FileReader::new(paths, index.clone()).map_err(anyhow::Error::msg)?;
    Ok((index, Box::new(files)))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read the folder {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read the folder {}", dir.display()))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().with_context(|| format!("cannot read {}", path.display()))?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            // A link to a file is a record; a link to a folder is not followed (os.walk's way).
            out.push(path);
        }
    }
    Ok(())
}
