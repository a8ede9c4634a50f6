//! The sending direction of a sealed link: a frame's plain bytes cut into chunks, each copied
//! once into the outgoing buffer and sealed there in place.

use std::io::{self, Write};

use super::{LEN_PREFIX, LinkKeys, MAX_CHUNK_PLAIN, SealError, TAG_LEN};
use crate::frame::HEADER_LEN;

/// Sealed chunks a writer gathers before it hands them to the socket in one write (about
/// 256 KiB): fewer system calls and wake-ups of the reading side than one write per chunk.
const CHUNKS_PER_WRITE: usize = 4;

/// Bytes of the outgoing buffer a link keeps between frames (about one chunk): a master with a
/// thousand links does not hold [`CHUNKS_PER_WRITE`] chunks for each of them while idle.
const RETAINED: usize = MAX_CHUNK_PLAIN + TAG_LEN + LEN_PREFIX;

/// One link's sending direction: its keys, the next sequence number, a reused buffer.
#[derive(Debug)]
pub struct Sealing {
    keys: LinkKeys,
    next: u64,
    /// Sealed chunks not yet written, at most [`CHUNKS_PER_WRITE`].
    out: Vec<u8>,
}

impl Sealing {
    /// Sends under `keys`, from sequence number 0.
    pub fn new(keys: LinkKeys) -> Sealing {
        Sealing { keys, next: 0, out: Vec::new() }
    }

    /// Seals the frame of `header` and the payload `parts` onto `w`, in chunks of
    /// [`MAX_CHUNK_PLAIN`] plain bytes (the last one shorter), and flushes `w`.
    pub(super) fn write_frame<W: Write>(
        &mut self,
        mut w: W,
        header: &[u8; HEADER_LEN],
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.push(header);
        all.extend_from_slice(parts);
        let mut left: usize = all.iter().map(|p| p.len()).sum();
        let (mut part, mut offset, mut chunks) = (0, 0, 0);
        self.out.clear();
        while left > 0 {
            let take = left.min(MAX_CHUNK_PLAIN);
            left -= take;
            let at = self.out.len();
            self.out.extend_from_slice(&((take + TAG_LEN) as u16).to_be_bytes());
            let mut need = take;
            while let Some(p) = all.get(part).filter(|_| need > 0) {
                let n = need.min(p.len() - offset);
                self.out.extend_from_slice(&p[offset..offset + n]);
                (need, offset) = (need - n, offset + n);
                if offset == p.len() {
                    (part, offset) = (part + 1, 0);
                }
            }
            self.seal_from(at + LEN_PREFIX)?;
            chunks += 1;
            if chunks == CHUNKS_PER_WRITE || left == 0 {
                w.write_all(&self.out)?;
                self.out.clear();
                chunks = 0;
            }
        }
        self.out.shrink_to(RETAINED);
        w.flush()
    }

    /// Seals the plain bytes of `out` from `from` on, in place, as the next chunk, and appends
    /// its tag.
    fn seal_from(&mut self, from: usize) -> io::Result<()> {
        let seq = self.next;
        self.next = seq.checked_add(1).ok_or(SealError::Exhausted)?;
        let tag = self.keys.send().seal_in_place(seq, &mut self.out[from..]);
        let tag = tag.ok_or_else(|| io::Error::other("the cipher refused a chunk"))?;
        self.out.extend_from_slice(&tag);
        Ok(())
    }

    /// One chunk of exactly `plain`, with its prefix: for tests that cut frames their own way.
    #[cfg(test)]
    pub(super) fn chunk(&mut self, plain: &[u8]) -> Vec<u8> {
        self.out.clear();
        self.out.extend_from_slice(&((plain.len() + TAG_LEN) as u16).to_be_bytes());
        self.out.extend_from_slice(plain);
        self.seal_from(LEN_PREFIX).expect("a chunk seals");
        std::mem::take(&mut self.out)
    }
}
