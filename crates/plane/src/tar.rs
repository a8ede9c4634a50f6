//! Tar archives (WebDataset shards) indexed from their headers alone: where each member's
//! bytes are, without reading them.
//!
//! [`TarWalker`] is the parser without IO: it says which offset it needs next
//! ([`TarWalker::want`]), takes whatever bytes a caller read there ([`TarWalker::feed`]: a
//! ranged GET of an object, a `pread` of a file), parses every header that lies within them,
//! and skips each member's data by its size, so a shard of large members costs a few hundred
//! bytes a member to index. [`scan_file`] drives it over a local file.
//!
//! What it reads is what Python's `tarfile` (WebDataset's reader) reads: ustar and GNU headers,
//! the ustar name prefix, GNU long names (`L`), pax extended headers (`x`: `path` and `size`),
//! sizes in octal or base-256. Every header's checksum is checked (the unsigned or the signed
//! sum, as `tarfile` accepts), every member's data must lie inside the archive, and the archive
//! must end with its end-of-archive block: a truncated or corrupt shard is an error naming the
//! offset, never a shorter index.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A tar block: headers and the padding of data are multiples of it.
pub const BLOCK: u64 = 512;

/// Bytes [`scan_file`] reads at a header at least: a header and the small members after it
/// (labels, captions) come in one read.
pub const SCAN_WINDOW: u64 = 4096;

/// `n` rounded up to whole blocks.
pub fn padded(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// What is wrong with an archive (the caller names the shard).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TarError {
    /// A header's checksum is not the sum of its bytes.
    #[error("the tar header at offset {offset} is corrupt (checksum {stored}, its bytes sum to {computed})")]
    Checksum {
        /// The header's offset in the archive.
        offset: u64,
        /// The checksum the header holds (0 when the field is not a number).
        stored: u64,
        /// The sum of the header's bytes.
        computed: u64,
    },
    /// A header field that cannot be read.
    #[error("the tar header at offset {offset} is corrupt ({what})")]
    Header {
        /// The header's offset in the archive.
        offset: u64,
        /// Which field, and why.
        what: String,
    },
    /// The archive ends before a member's data or before its end-of-archive block.
    #[error("truncated at offset {offset}: {what}")]
    Truncated {
        /// Where the missing bytes begin.
        offset: u64,
        /// What is missing.
        what: String,
    },
    /// A member of a kind whose data layout is not plain (GNU sparse files).
    #[error("the tar member at offset {offset} is a sparse file, which is not read")]
    Sparse {
        /// The member's header's offset.
        offset: u64,
    },
    /// Bytes fed at an offset the walker did not ask for.
    #[error("bytes fed at offset {at}, the walker needs offset {next}")]
    Misfed {
        /// Where the bytes were from.
        at: u64,
        /// Where the walker needed them.
        next: u64,
    },
}

/// A regular file of an archive: its name (as `tarfile` gives it), where its headers begin
/// (an extended header's, if any) and where its data is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarMember {
    /// The member's path in the archive.
    pub name: String,
    /// The offset of its first header (a pax or long-name header when it has one).
    pub header: u64,
    /// The offset of its data.
    pub offset: u64,
    /// Its data's size in bytes.
    pub size: u64,
}

impl TarMember {
    /// Where the member's padded data ends (the next header's offset).
    pub fn end(&self) -> u64 {
        self.offset + padded(self.size)
    }
}

/// What extended headers said about the member that follows them.
#[derive(Debug, Default)]
struct Pending {
    first_header: Option<u64>,
    long_name: Option<String>,
    pax_path: Option<String>,
    pax_size: Option<u64>,
}

/// The header parser without IO (see the module's docs).
#[derive(Debug)]
pub struct TarWalker {
    size: u64,
    next: u64,
    ended: bool,
    fragment: bool,
    pending: Pending,
    members: Vec<TarMember>,
    fed: u64,
}

/// The text of a NUL-terminated field.
fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// A numeric field: octal digits (spaces and NULs around them), or base-256 (GNU, for sizes of
/// 8 GiB and more).
fn number(field: &[u8], offset: u64, name: &str) -> Result<u64, TarError> {
    let bad = |what: String| TarError::Header { offset, what };
    if let Some((&first, rest)) = field.split_first()
        && (first == 0x80 || first == 0xff)
    {
        if first == 0xff || rest.len() > 8 && rest[..rest.len() - 8].iter().any(|&b| b != 0) {
            return Err(bad(format!("its {name} is negative or too large")));
        }
        return Ok(rest.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b)));
    }
    let digits = text(field);
    let digits = digits.trim_matches(|c: char| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(digits, 8).map_err(|_| bad(format!("its {name} {digits:?} is not an octal number")))
}

/// Checks a header's checksum (the unsigned or the signed sum of its bytes, the checksum
/// field counted as spaces).
fn check_sum(header: &[u8], offset: u64) -> Result<(), TarError> {
    let stored = number(&header[148..156], offset, "checksum").unwrap_or(u64::MAX);
    let mut unsigned = 0u64;
    let mut signed = 0i64;
    for (i, &b) in header.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    if stored == unsigned || i64::try_from(stored).ok() == Some(signed) {
        return Ok(());
    }
    Err(TarError::Checksum {
        offset,
        stored: if stored == u64::MAX { 0 } else { stored },
        computed: unsigned,
    })
}

/// The `path` and `size` of a pax extended header's records (`"<len> <key>=<value>\n"`).
fn pax_records(data: &[u8], offset: u64) -> Result<(Option<String>, Option<u64>), TarError> {
    let bad = |what: &str| TarError::Header { offset, what: format!("its pax record {what}") };
    let (mut path, mut size) = (None, None);
    let mut at = 0;
    while at < data.len() {
        if data[at] == 0 {
            break; // padding after the records
        }
        let space = data[at..].iter().position(|&b| b == b' ').ok_or_else(|| bad("has no length"))?;
        let len: usize = std::str::from_utf8(&data[at..at + space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("length is not a number"))?;
        if len <= space + 1 || at + len > data.len() || data[at + len - 1] != b'\n' {
            return Err(bad("length is wrong"));
        }
        let record = &data[at + space + 1..at + len - 1];
        let eq = record.iter().position(|&b| b == b'=').ok_or_else(|| bad("has no '='"))?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => path = Some(String::from_utf8_lossy(value).into_owned()),
            b"size" => {
                let v = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
                size = Some(v.ok_or_else(|| bad("size is not a number"))?);
            }
            _ => {}
        }
        at += len;
    }
    Ok((path, size))
}

impl TarWalker {
    /// A walker of an archive of `size` bytes, which must end with an end-of-archive block.
    pub fn new(size: u64) -> TarWalker {
        TarWalker {
            size,
            next: 0,
            ended: false,
            fragment: false,
            pending: Pending::default(),
            members: Vec::new(),
            fed: 0,
        }
    }

    /// A walker of `size` bytes of members cut out of an archive (a WebDataset sample as a
    /// record is): they end at `size`, with or without an end-of-archive block.
    pub fn fragment(size: u64) -> TarWalker {
        TarWalker { fragment: true, ..TarWalker::new(size) }
    }

    /// The offset the walker needs bytes at next and how many it needs there at least (a
    /// header, or an extended header and its data); `None` once it has walked the whole
    /// archive, or the archive ends before that many bytes ([`TarWalker::finish`] says so).
    pub fn want(&self) -> Option<(u64, u64)> {
        if self.ended || self.next + BLOCK > self.size {
            return None;
        }
        Some((self.next, BLOCK))
    }

    /// Bytes of the archive fed so far.
    pub fn fed(&self) -> u64 {
        self.fed
    }

    /// Parses every header within `bytes`, read at offset `at` (which must be the offset
    /// [`TarWalker::want`] named); the walker then wants the offset after them.
    pub fn feed(&mut self, at: u64, bytes: &[u8]) -> Result<(), TarError> {
        if at != self.next {
            return Err(TarError::Misfed { at, next: self.next });
        }
        self.fed += bytes.len() as u64;
        let end = at + bytes.len() as u64;
        while !self.ended && self.next + BLOCK <= end.min(self.size) {
            let offset = self.next;
            let from = (offset - at) as usize;
            let header = &bytes[from..from + BLOCK as usize];
            if header.iter().all(|&b| b == 0) {
                self.ended = true;
                break;
            }
            check_sum(header, offset)?;
            let kind = header[156];
            let header_size = number(&header[124..136], offset, "size")?;
            let data = offset + BLOCK;
            match kind {
                b'x' | b'L' | b'K' | b'g' => {
                    // An extended header: its data says something about the next member.
                    let stop = data.checked_add(header_size).filter(|&s| s <= self.size);
                    let stop = stop.ok_or_else(|| TarError::Truncated {
                        offset: self.size,
                        what: format!("an extended header needs {header_size} bytes from offset {data}"),
                    })?;
                    if stop > end {
                        return self.need_more(offset);
                    }
                    let body = &bytes[(data - at) as usize..(stop - at) as usize];
                    self.pending.first_header.get_or_insert(offset);
                    match kind {
                        b'x' => {
                            let (path, size) = pax_records(body, offset)?;
                            self.pending.pax_path = path.or(self.pending.pax_path.take());
                            self.pending.pax_size = size.or(self.pending.pax_size);
                        }
                        b'L' => self.pending.long_name = Some(text(body)),
                        _ => {} // a long link name, a global header: nothing a member's bytes need
                    }
                    self.next = data + padded(header_size);
                }
                b'S' => return Err(TarError::Sparse { offset }),
                _ => {
                    let pending = std::mem::take(&mut self.pending);
                    let size = pending.pax_size.unwrap_or(header_size);
                    let stop = data.checked_add(size).filter(|&s| s <= self.size);
                    let name = pending.pax_path.or(pending.long_name).unwrap_or_else(|| {
                        let name = text(&header[..100]);
                        let prefix = text(&header[345..500]);
                        let posix = &header[257..263] == b"ustar\0";
                        if posix && !prefix.is_empty() { format!("{prefix}/{name}") } else { name }
                    });
                    let Some(stop) = stop else {
                        return Err(TarError::Truncated {
                            offset: self.size,
                            what: format!("member {name:?} needs {size} bytes from offset {data}"),
                        });
                    };
                    // Regular files ('0', '\0', contiguous '7'); a '\0' named like a folder is one.
                    let regular = matches!(kind, b'0' | b'7') || kind == 0 && !name.ends_with('/');
                    if regular {
                        let header = pending.first_header.unwrap_or(offset);
                        self.members.push(TarMember { name, header, offset: data, size });
                    }
                    self.next = data
                        .checked_add(padded(stop - data))
                        .ok_or_else(|| TarError::Header { offset, what: "its size is too large".into() })?;
                }
            }
        }
        Ok(())
    }

    /// Not an error: the extended header at `offset` and its data need more bytes than were
    /// fed; the walker wants them from `offset` again.
    fn need_more(&mut self, offset: u64) -> Result<(), TarError> {
        self.next = offset;
        Ok(())
    }

    /// How many bytes the walker needs at [`TarWalker::want`]'s offset to make progress: a
    /// header, or an extended header and its data.
    pub fn need(&self, bytes_at_next: &[u8]) -> u64 {
        if bytes_at_next.len() < BLOCK as usize {
            return BLOCK;
        }
        let header = &bytes_at_next[..BLOCK as usize];
        match (header[156], number(&header[124..136], self.next, "size")) {
            (b'x' | b'L' | b'K' | b'g', Ok(size)) => BLOCK + padded(size),
            _ => BLOCK,
        }
    }

    /// The archive's regular files, in order, once it has been walked to its end; an error
    /// when it ends early (no end-of-archive block, a partial header, extended headers with no
    /// member after them).
    pub fn finish(self) -> Result<Vec<TarMember>, TarError> {
        if !self.ended {
            let ends_clean = self.next == self.size && self.pending.first_header.is_none();
            if self.fragment && ends_clean {
                return Ok(self.members);
            }
            let what = if self.next < self.size {
                format!("a header needs {BLOCK} bytes, the archive ends at {}", self.size)
            } else if self.pending.first_header.is_some() {
                "extended headers with no member after them".to_string()
            } else {
                "the archive ends without its end-of-archive block".to_string()
            };
            return Err(TarError::Truncated { offset: self.next.min(self.size), what });
        }
        Ok(self.members)
    }
}

/// Walks `bytes`, a whole archive (or, with `fragment`, members cut out of one) held in
/// memory.
pub fn scan_bytes(bytes: &[u8], fragment: bool) -> Result<Vec<TarMember>, TarError> {
    let size = bytes.len() as u64;
    let mut walker = if fragment { TarWalker::fragment(size) } else { TarWalker::new(size) };
    while let Some((at, _)) = walker.want() {
        let before = walker.next;
        walker.feed(at, &bytes[at as usize..])?;
        if walker.next == before && !walker.ended {
            break; // cannot happen with the whole archive fed; guards the loop
        }
    }
    walker.finish()
}

/// The members of the tar file `path`, from its headers alone (reads of [`SCAN_WINDOW`] bytes
/// at each header, by `pread`), and the bytes read. Errors are one line naming the file.
pub fn scan_file(path: &Path) -> Result<(Vec<TarMember>, u64), String> {
    let at_file = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| at_file(&e))?;
    let size = file.metadata().map_err(|e| at_file(&e))?.len();
    let mut walker = TarWalker::new(size);
    let mut buf = Vec::new();
    let mut window = SCAN_WINDOW;
    while let Some((at, least)) = walker.want() {
        let len = window.max(least).min(size - at);
        buf.resize(len as usize, 0);
        file.read_exact_at(&mut buf, at).map_err(|e| at_file(&e))?;
        walker.feed(at, &buf).map_err(|e| at_file(&e))?;
        if walker.next == at && !walker.ended {
            // An extended header whose data is longer than the window: read it whole.
            let need = walker.need(&buf);
            if need <= len {
                return Err(at_file(&TarError::Truncated { offset: at, what: "a header's data".into() }));
            }
            window = need;
        } else {
            window = SCAN_WINDOW;
        }
    }
    let fed = walker.fed();
    walker.finish().map(|m| (m, fed)).map_err(|e| at_file(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ustar header for `name` of `size` bytes of type `kind`, with its checksum.
    fn header(name: &str, size: u64, kind: u8) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = kind;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        seal(&mut h);
        h
    }

    fn seal(h: &mut [u8]) {
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }

    fn member(out: &mut Vec<u8>, name: &str, data: &[u8]) {
        out.extend(header(name, data.len() as u64, b'0'));
        out.extend(data);
        out.resize(padded(out.len() as u64) as usize, 0);
    }

    fn end(out: &mut Vec<u8>) {
        out.extend([0u8; 1024]);
    }

    fn archive() -> Vec<u8> {
        let mut t = Vec::new();
        member(&mut t, "a/000.jpg", &[7u8; 1000]);
        member(&mut t, "a/000.cls", b"3");
        member(&mut t, "a/001.jpg", &[]);
        member(&mut t, "a/001.cls", b"12");
        end(&mut t);
        t
    }

    #[test]
    fn members_are_found_from_headers_and_their_bytes_are_where_the_index_says() {
        let t = archive();
        let m = scan_bytes(&t, false).unwrap();
        let names: Vec<_> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a/000.jpg", "a/000.cls", "a/001.jpg", "a/001.cls"]);
        assert_eq!((m[0].header, m[0].offset, m[0].size), (0, 512, 1000));
        assert_eq!(&t[m[1].offset as usize..][..1], b"3");
        assert_eq!(&t[m[3].offset as usize..][..2], b"12");
        assert_eq!(m[2].size, 0);
        assert_eq!(m[1].header, m[0].end());
    }

    #[test]
    fn a_file_is_scanned_by_windows_without_reading_large_members() {
        let mut t = Vec::new();
        member(&mut t, "x.jpg", &vec![1u8; 100_000]);
        member(&mut t, "x.cls", b"1");
        member(&mut t, "y.jpg", &vec![2u8; 100_000]);
        member(&mut t, "y.cls", b"2");
        end(&mut t);
        let dir = std::env::temp_dir().join(format!("ubershuffle-tar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("shard.tar");
        std::fs::write(&path, &t).unwrap();
        let (m, read) = scan_file(&path).unwrap();
        assert_eq!(m, scan_bytes(&t, false).unwrap());
        // Two windows at the large members' headers and one at the second's (which holds the
        // label and the end block), far less than the archive.
        assert!(read <= 3 * SCAN_WINDOW && read < t.len() as u64 / 10, "{read} of {}", t.len());
        // Truncated inside a member's data: named, with the offset.
        std::fs::write(&path, &t[..50_000]).unwrap();
        let e = scan_file(&path).unwrap_err();
        assert!(
            e.ends_with(
                "shard.tar: truncated at offset 50000: member \"x.jpg\" needs 100000 bytes from offset 512"
            ),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_header_is_named_by_its_offset() {
        let mut t = archive();
        let second = 512 + 1024; // a/000.cls's header
        t[second + 3] ^= 0x20;
        let e = scan_bytes(&t, false).unwrap_err();
        assert!(matches!(e, TarError::Checksum { offset, .. } if offset == second as u64), "{e}");
        assert!(e.to_string().contains("offset 1536 is corrupt"), "{e}");
        // A size that is not octal, with a right checksum, is corrupt too.
        let mut t = archive();
        t[124..135].copy_from_slice(b"0000000009x");
        seal(&mut t[..512]);
        assert!(matches!(scan_bytes(&t, false), Err(TarError::Header { offset: 0, .. })));
    }

    #[test]
    fn an_archive_cut_anywhere_is_an_error_never_a_shorter_index() {
        let t = archive();
        let whole = scan_bytes(&t, false).unwrap();
        for cut in 0..t.len() - 512 {
            // Cut at a member's end (no end block), in a header, in data or in padding.
            if let Ok(m) = scan_bytes(&t[..cut], false) {
                panic!("cut at {cut}: {} of {} members and no error", m.len(), whole.len());
            }
        }
        // Members cut out whole (a sample) walk as a fragment.
        let frag = &t[whole[0].header as usize..whole[1].end() as usize];
        let m = scan_bytes(frag, true).unwrap();
        assert_eq!(m.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["a/000.jpg", "a/000.cls"]);
    }

    #[test]
    fn long_names_pax_paths_and_the_ustar_prefix_are_read_as_tarfile_reads_them() {
        let mut t = Vec::new();
        let long = format!("{}/sample.jpg", "d".repeat(120));
        // GNU long name.
        t.extend(header("././@LongLink", long.len() as u64 + 1, b'L'));
        t.extend(long.as_bytes());
        t.push(0);
        t.resize(padded(t.len() as u64) as usize, 0);
        member(&mut t, "truncated-name", b"abc");
        // pax path and size.
        let path = "p\u{e9}/k.txt";
        let rec = format!(" path={path}\n");
        let rec = format!("{}{rec}", rec.len() + 2);
        let size_rec = "10 size=4\n";
        let body = format!("{rec}{size_rec}");
        let pax_at = t.len() as u64;
        t.extend(header("PaxHeader", body.len() as u64, b'x'));
        t.extend(body.as_bytes());
        t.resize(padded(t.len() as u64) as usize, 0);
        t.extend(header("ignored", 999, b'0')); // the pax size wins
        t.extend(b"wxyz");
        t.resize(padded(t.len() as u64) as usize, 0);
        // ustar prefix.
        let mut h = header("name.bin", 1, b'0');
        h[345..351].copy_from_slice(b"prefix");
        seal(&mut h);
        t.extend(h);
        t.push(9);
        t.resize(padded(t.len() as u64) as usize, 0);
        // A folder and a symbolic link are not members.
        t.extend(header("dir/", 0, b'5'));
        t.extend(header("link", 0, b'2'));
        end(&mut t);
        let m = scan_bytes(&t, false).unwrap();
        let names: Vec<_> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [long.as_str(), path, "prefix/name.bin"]);
        assert_eq!((m[0].header, m[0].size), (0, 3));
        assert_eq!((m[1].header, m[1].size), (pax_at, 4));
        assert_eq!(&t[m[1].offset as usize..][..4], b"wxyz");
    }

    #[test]
    fn any_header_byte_changed_is_an_error_or_a_clean_index_never_a_panic() {
        let t = archive();
        for at in (0..t.len()).filter(|at| at % 512 < 500 || at % 512 == 156) {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = t.clone();
                bad[at] ^= flip;
                // Resealed too, so the checks after the checksum's see it.
                let header = at / 512 * 512;
                let mut sealed = bad.clone();
                seal(&mut sealed[header..header + 512]);
                for archive in [&bad, &sealed] {
                    if let Ok(m) = scan_bytes(archive, false) {
                        for m in &m {
                            assert!(m.offset + m.size <= archive.len() as u64);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn base_256_sizes_are_read() {
        let mut field = [0u8; 12];
        field[0] = 0x80;
        field[11] = 5;
        field[10] = 1;
        assert_eq!(number(&field, 0, "size").unwrap(), 261);
        field[0] = 0xff;
        assert!(number(&field, 0, "size").is_err());
    }

    #[test]
    fn bytes_fed_elsewhere_are_refused() {
        let mut w = TarWalker::new(4096);
        assert_eq!(w.feed(512, &[0; 512]), Err(TarError::Misfed { at: 512, next: 0 }));
    }
}
