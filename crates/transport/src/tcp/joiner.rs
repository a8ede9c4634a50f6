//! [`Joiner`]: a worker the master admitted during setup, watched without blocking until the
//! cluster starts: did it leave, and which welcome has it reported its links for?
//!
//! Between its admission and the start a joined worker sends nothing but header-only linking
//! and ready frames (tagged with the welcome's generation: it took the welcome, it linked up),
//! so the master reads at most one frame header's bytes per worker (in one sealed chunk on a
//! sealed link): anything else is a protocol violation and drops it.

use std::io::{ErrorKind, Read};

use super::admission::Admitted;
use super::conn::Conn;
use crate::frame::{Frame, FrameKind, HEADER_LEN};
use crate::seal::{LEN_PREFIX, TAG_LEN};

/// Bytes of a sealed header-only frame: one chunk.
const SEALED_HEADER: usize = LEN_PREFIX + HEADER_LEN + TAG_LEN;

/// A joined worker, until the cluster starts.
#[derive(Debug)]
pub(crate) struct Joiner {
    /// Its connection and what it said when it joined.
    pub(crate) admitted: Admitted,
    /// The rank of the last welcome it was sent, if any.
    pub(crate) rank: Option<usize>,
    /// The bytes of the frame being read (at most a header).
    buf: Vec<u8>,
    /// The generation of the last ready frame it sent.
    ready: Option<u32>,
    /// Whether it said it took a welcome.
    took_a_welcome: bool,
}

impl Joiner {
    /// A worker just admitted.
    pub(crate) fn new(admitted: Admitted) -> Joiner {
        Joiner {
            admitted,
            rank: None,
            buf: Vec::with_capacity(SEALED_HEADER),
            ready: None,
            took_a_welcome: false,
        }
    }

    /// Names it in messages: where it came from, and its rank once welcomed.
    pub(crate) fn describe(&self) -> String {
        match self.rank {
            Some(rank) => format!("the worker from {} (rank {rank})", self.admitted.from),
            None => format!("the worker from {}", self.admitted.from),
        }
    }

    /// Whether it reported its links for the welcome of `generation`.
    pub(crate) fn ready_for(&self, generation: u32) -> bool {
        self.ready == Some(generation)
    }

    /// Whether it ever said it took a welcome (one that did not within the timeout of its
    /// first is frozen or cut off; one that did may be held up by a frozen peer).
    pub(crate) fn answered(&self) -> bool {
        self.took_a_welcome || self.ready.is_some()
    }

    /// Reads what it sent, without blocking: `Err` with what it did when it closed, failed or
    /// sent anything but a ready frame.
    pub(crate) fn poll(&mut self) -> Result<(), String> {
        let stream = &self.admitted.conn.stream;
        stream.set_nonblocking(true).map_err(|e| format!("its connection failed ({e})"))?;
        let result = self.read_available();
        let _ = self.admitted.conn.stream.set_nonblocking(false);
        result
    }

    /// The header bytes of the frame just read whole (opened, if sealed).
    fn header(&mut self) -> Result<Vec<u8>, String> {
        let Some(opening) = self.admitted.conn.opening() else { return Ok(self.buf.clone()) };
        let len = u16::from_be_bytes([self.buf[0], self.buf[1]]) as usize;
        if len != HEADER_LEN + TAG_LEN {
            return Err(format!("sent a sealed chunk of {len} bytes out of turn"));
        }
        let plain = opening.open(&self.buf[LEN_PREFIX..]).map_err(|e| format!("sent a bad frame ({e})"))?;
        Ok(plain.to_vec())
    }

    fn read_available(&mut self) -> Result<(), String> {
        let whole = if self.admitted.conn.seal.is_some() { SEALED_HEADER } else { HEADER_LEN };
        loop {
            let mut chunk = [0u8; SEALED_HEADER];
            let want = whole - self.buf.len();
            match (&self.admitted.conn.stream).read(&mut chunk[..want]) {
                Ok(0) => return Err("closed its connection".into()),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("its connection failed ({e})")),
            }
            if self.buf.len() == whole {
                let header = self.header()?;
                let frame = Frame::decode(&header, 0).map_err(|e| format!("sent a bad frame ({e})"))?;
                self.buf.clear();
                match frame.0.kind {
                    FrameKind::Ready if self.rank.is_some() => self.ready = Some(frame.0.tag),
                    FrameKind::Linking if self.rank.is_some() => self.took_a_welcome = true,
                    other => return Err(format!("sent a {other:?} frame out of turn")),
                }
            }
        }
    }

    /// Gives up its connection (the cluster starts with it).
    pub(crate) fn into_conn(self) -> Conn {
        self.admitted.conn
    }
}
