//! The two kinds of stream a delivery carries: records sent whole ([`RecordStream`], read from
//! the sender's record store and written straight into the receiver's), and bytes made on the
//! way ([`ByteStream`]: a store's encoded packets, a training rank's relay), buffered at both
//! ends until used. Either way the receiver's credit bounds what is in flight.

use ubershuffle_codes::RecordWriter;

use crate::error::PlaneError;
use crate::store::{SharedStore, locked};
use crate::wire::{DATA_HEAD, data_head};

/// A stream fault before the engine names who sent it.
pub(super) enum Fault {
    /// A peer sent what the protocol does not allow.
    Peer(String),
    /// Anything else, already whole.
    Whole(PlaneError),
}

impl Fault {
    /// The error, `peer` the sender of the message at fault.
    pub(super) fn at(self, peer: usize, me: usize, doing: String) -> PlaneError {
        match self {
            Fault::Peer(what) => PlaneError::Protocol { rank: peer, what, me, doing },
            Fault::Whole(e) => e,
        }
    }
}

impl From<PlaneError> for Fault {
    fn from(e: PlaneError) -> Fault {
        Fault::Whole(e)
    }
}

/// Checks that `bytes` at `offset` continue a stream that has `done` bytes and `granted` credit.
pub(super) fn check_data(offset: u64, len: usize, done: u64, granted: u64) -> Result<(), Fault> {
    let end = offset.checked_add(len as u64);
    if offset != done || end.is_none_or(|e| e > granted) {
        return Err(Fault::Peer(format!(
            "bytes {offset}..{} of a stream with {done} received and {granted} granted",
            offset.saturating_add(len as u64)
        )));
    }
    Ok(())
}

/// Checks a credit `upto` for a stream of `total` bytes with `granted` before.
pub(super) fn check_credit(upto: u64, total: u64, granted: u64) -> Result<(), Fault> {
    if upto > total || upto < granted {
        return Err(Fault::Peer(format!(
            "credit up to byte {upto} of a stream of {total} bytes, {granted} granted before"
        )));
    }
    Ok(())
}

/// One direction of one pair's records sent whole: their ids in order, and how far the bytes
/// went.
#[derive(Debug, Default)]
pub(super) struct RecordStream {
    pub(super) ids: Vec<u32>,
    pub(super) total: u64,
    /// Bytes sent, or received.
    pub(super) done: u64,
    /// Bytes the receiver has granted.
    pub(super) granted: u64,
    /// The record the next byte belongs to, and the byte of it.
    at: usize,
    within: u64,
    /// At the sender: its receiver closed, so nothing more goes.
    abandoned: bool,
}

impl RecordStream {
    /// The stream of records `ids` of sizes `size(id)`.
    pub(super) fn new(ids: &[u32], total: u64) -> RecordStream {
        RecordStream { ids: ids.to_vec(), total, ..RecordStream::default() }
    }

    /// Whether every byte went and every record was passed (or the stream was abandoned).
    pub(super) fn is_done(&self) -> bool {
        self.abandoned || (self.done == self.total && self.at == self.ids.len())
    }

    /// At the sender: its receiver closed; nothing more goes (`done` keeps what went).
    pub(super) fn abandon(&mut self) {
        self.abandoned = true;
    }

    /// At the sender: whether every byte went (or the stream was abandoned).
    pub(super) fn is_sent(&self) -> bool {
        self.abandoned || self.done == self.total
    }

    /// Writes `bytes` (the next of the stream) into the records they belong to; returns how
    /// many records became whole. Empty records are whole as the stream passes them.
    pub(super) fn write(&mut self, bytes: &[u8], store: &SharedStore) -> Result<u64, Fault> {
        let mut store = locked(store);
        let mut whole = 0u64;
        let mut rest = bytes;
        while let Some(&id) = self.ids.get(self.at) {
            let size = store.index().size(id).unwrap_or(0);
            let n = (size - self.within).min(rest.len() as u64) as usize;
            if n > 0 {
                store
                    .write_at(id, self.within as usize, &rest[..n])
                    .map_err(|e| PlaneError::Store(e.to_string()))?;
                rest = &rest[n..];
                self.within += n as u64;
            }
            if self.within < size {
                break;
            }
            store.complete(id).map_err(|e| PlaneError::Store(e.to_string()))?;
            whole += 1;
            (self.at, self.within) = (self.at + 1, 0);
        }
        if !rest.is_empty() {
            return Err(Fault::Peer("bytes past its stream's records".into()));
        }
        self.done += bytes.len() as u64;
        Ok(whole)
    }

    /// The next chunk of at most `chunk` bytes within the credit, as a data message of
    /// `epoch`, read from `store`.
    pub(super) fn next_chunk(
        &mut self,
        epoch: u64,
        chunk: u64,
        store: &SharedStore,
    ) -> Result<Option<Vec<u8>>, PlaneError> {
        self.pass_if_empty();
        let room = self.granted.min(self.total).saturating_sub(self.done);
        if room == 0 || self.abandoned {
            return Ok(None);
        }
        let len = room.min(chunk);
        let mut bytes = crate::buffers::take(DATA_HEAD + len as usize);
        data_head(&mut bytes, epoch, self.done);
        let store = locked(store);
        let mut left = len;
        while left > 0 {
            let id = *self
                .ids
                .get(self.at)
                .ok_or_else(|| PlaneError::Internal("a stream past its records".into()))?;
            let record = store.get(id).ok_or_else(|| {
                PlaneError::Internal(format!("record {id} is not held here: it cannot be sent"))
            })?;
            let from = self.within as usize;
            let n = (record.len() - from).min(left as usize);
            bytes.extend_from_slice(&record[from..from + n]);
            (left, self.within) = (left - n as u64, self.within + n as u64);
            if self.within == record.len() as u64 {
                (self.at, self.within) = (self.at + 1, 0);
            }
        }
        // Empty records after the last byte belong to this chunk too.
        while self.ids.get(self.at).is_some_and(|&id| store.index().size(id) == Some(0)) {
            self.at += 1;
        }
        drop(store);
        self.done += len;
        Ok(Some(bytes))
    }

    /// A sender's stream of empty records only: nothing to send, every record passed.
    pub(super) fn pass_if_empty(&mut self) {
        if self.total == 0 {
            self.at = self.ids.len();
        }
    }
}

/// A stream of bytes made on the way (encoded packets, a relay): at the sender, the bytes made
/// and not yet sent; at the receiver, the bytes received and not yet used. The bytes sit in one
/// buffer from `head` on; what was used is dropped from its front once it is most of it.
#[derive(Debug, Default)]
pub(super) struct ByteStream {
    pub(super) total: u64,
    /// Bytes sent, or received.
    pub(super) done: u64,
    /// Bytes the receiver has granted.
    pub(super) granted: u64,
    /// The stream offset of `buf[head]`.
    start: u64,
    head: usize,
    buf: Vec<u8>,
    /// At the sender: its receiver closed, so nothing more is made or goes.
    pub(super) abandoned: bool,
}

impl ByteStream {
    /// A stream of `total` bytes.
    pub(super) fn new(total: u64) -> ByteStream {
        ByteStream { total, ..ByteStream::default() }
    }

    /// Whether every byte went (or the stream was abandoned).
    pub(super) fn is_done(&self) -> bool {
        self.abandoned || self.done == self.total
    }

    /// At the sender: its receiver closed; what is held is dropped and nothing more is made
    /// or goes (`done` keeps what went).
    pub(super) fn abandon(&mut self) {
        self.abandoned = true;
        self.buf = Vec::new();
        self.head = 0;
    }

    /// Bytes held (made and not sent, or received and not used).
    pub(super) fn held(&self) -> u64 {
        (self.buf.len() - self.head) as u64
    }

    /// Forgets the first `n` bytes held, giving their room back when they are most of it.
    fn advance(&mut self, n: usize) {
        self.head += n;
        self.start += n as u64;
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
        } else if self.head > self.buf.len() / 2 {
            self.buf.drain(..self.head);
            self.head = 0;
        }
    }

    /// At the sender: appends bytes made.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if !self.abandoned {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// At the sender: the next chunk of at most `chunk` bytes made and within the credit.
    pub(super) fn next_chunk(&mut self, epoch: u64, chunk: u64) -> Option<Vec<u8>> {
        let room = self.granted.min(self.total).saturating_sub(self.done).min(self.held());
        if room == 0 {
            return None;
        }
        let len = room.min(chunk) as usize;
        let mut bytes = crate::buffers::take(DATA_HEAD + len);
        data_head(&mut bytes, epoch, self.done);
        bytes.extend_from_slice(&self.buf[self.head..self.head + len]);
        self.done += len as u64;
        self.advance(len);
        Some(bytes)
    }

    /// At the receiver: appends the bytes that arrived (checked against the credit).
    pub(super) fn receive(&mut self, offset: u64, bytes: &[u8]) -> Result<(), Fault> {
        check_data(offset, bytes.len(), self.done, self.granted)?;
        self.buf.extend_from_slice(bytes);
        self.done += bytes.len() as u64;
        Ok(())
    }

    /// At the receiver: whether the bytes up to stream offset `end` have arrived.
    pub(super) fn has(&self, end: u64) -> bool {
        self.done >= end
    }

    /// At the receiver: the bytes `from..to` of the stream (arrived, not yet dropped).
    pub(super) fn slice(&self, from: u64, to: u64) -> &[u8] {
        let at = |o: u64| self.head + (o - self.start) as usize;
        &self.buf[at(from)..at(to)]
    }

    /// At the receiver: drops the bytes before stream offset `upto`.
    pub(super) fn drop_before(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.start).min(self.held()) as usize;
        self.advance(n);
    }
}
