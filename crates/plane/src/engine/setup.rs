//! The start-up agreement: every rank's [`Hello`] checked against this rank's (the protocol's
//! version, the plane's size, every setting, the data set's index, whether every record store
//! could be made), then, when two ranks or more read sources, a digest of a sample of the
//! records' bytes compared. The first difference is one line, on every rank, before anything
//! moves.

use ubershuffle_codes::RecordIndex;

use crate::error::PlaneError;
use crate::wire::{Hello, IndexPrint, Message, VERSION};

use super::EngineConfig;

/// Records whose bytes every rank that reads a source hashes at start (the caller chooses
/// them by the seed, the same on every rank).
pub const CONTENT_SAMPLE: usize = 256;

/// Where the agreement stands after an event.
pub(super) enum Step {
    /// Waiting for peers.
    Waiting,
    /// This rank must compute its content digest now.
    NeedContent,
    /// Every rank agreed (said once).
    Agreed,
}

/// The agreement at one rank.
pub(super) struct Setup {
    me: usize,
    plane: String,
    print: Option<IndexPrint>,
    /// Whether this rank waits for the store's index to make its record store.
    waiting_store: bool,
    hellos: Vec<Option<Hello>>,
    contents: Vec<Option<u64>>,
    asked_content: bool,
    done: bool,
}

/// What a data set's index looks like.
fn print_of(index: &RecordIndex) -> IndexPrint {
    IndexPrint { records: index.len() as u64, bytes: index.total_bytes(), digest: index_digest(index) }
}

/// A 64-bit FNV-1a digest of the offsets: equal offsets, equal digests on every rank.
pub fn index_digest(index: &RecordIndex) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for o in index.offsets() {
        for b in o.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

impl Setup {
    /// The agreement of `cfg`'s rank, whose data set's index is `index` (`None`: a store-mode
    /// training rank without a source, which waits for the store's).
    pub(super) fn new(cfg: &EngineConfig, index: Option<&RecordIndex>) -> Setup {
        let print = index.map(print_of);
        let mut hellos = vec![None; cfg.world];
        hellos[cfg.rank] = Some(Setup::hello_of(cfg, print));
        Setup {
            me: cfg.rank,
            plane: cfg.plane.clone(),
            print,
            waiting_store: print.is_none(),
            hellos,
            contents: vec![None; cfg.world],
            asked_content: false,
            done: false,
        }
    }

    /// The index `from` (the store) sent: it must be the one its hello described.
    pub(super) fn index_from(&mut self, from: usize, offsets: &[u64]) -> Result<(), PlaneError> {
        let sizes = offsets.windows(2).map(|w| w[1] - w[0]);
        let index = RecordIndex::from_sizes(sizes).map_err(|e| PlaneError::Protocol {
            rank: from,
            what: format!("an index that is not one ({e})"),
            me: self.me,
            doing: "waiting for the start-up agreement".into(),
        })?;
        let said = self.hellos.get(from).and_then(Option::as_ref).and_then(|h| h.index);
        if said != Some(print_of(&index)) {
            return Err(PlaneError::Protocol {
                rank: from,
                what: "an index other than its hello said".into(),
                me: self.me,
                doing: "waiting for the start-up agreement".into(),
            });
        }
        Ok(())
    }

    /// This rank's record store was made for `index`.
    pub(super) fn store_made(&mut self, index: &RecordIndex) {
        self.print = Some(print_of(index));
        self.waiting_store = false;
    }

    fn hello_of(cfg: &EngineConfig, index: Option<IndexPrint>) -> Hello {
        Hello {
            version: VERSION,
            world: cfg.world as u32,
            rank: cfg.rank as u32,
            settings: cfg.settings.clone(),
            index,
            reads_source: cfg.reads_source,
            store_error: cfg.store_error.clone().unwrap_or_default(),
        }
    }

    /// This rank's hello.
    pub(super) fn hello(&self, cfg: &EngineConfig) -> Message<'static> {
        Message::Hello(Setup::hello_of(cfg, self.print))
    }

    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// `from`'s hello: the version, the size and the settings are checked at once.
    pub(super) fn hello_from(&mut self, from: usize, h: Hello, cfg: &EngineConfig) -> Result<(), PlaneError> {
        if h.version != VERSION {
            return Err(PlaneError::Mismatch(format!(
                "rank {from} speaks version {} of the data plane's protocol, rank {} version {VERSION}: every rank must run the same ubershuffle",
                h.version, self.me
            )));
        }
        if h.world as usize != cfg.world || h.rank as usize != from {
            return Err(PlaneError::Mismatch(format!(
                "rank {from} says it is rank {} of {}, rank {} counts {} ranks",
                h.rank, h.world, self.me, cfg.world
            )));
        }
        let names: Vec<&str> = cfg.settings.iter().map(|(n, _)| n.as_str()).collect();
        let theirs: Vec<&str> = h.settings.iter().map(|(n, _)| n.as_str()).collect();
        if names != theirs {
            return Err(PlaneError::Mismatch(format!(
                "rank {from} runs another version of ubershuffle than rank {} (its settings are named {theirs:?})",
                self.me
            )));
        }
        for ((name, mine), (_, other)) in cfg.settings.iter().zip(&h.settings) {
            if mine != other {
                return Err(PlaneError::Mismatch(format!(
                    "the {name} differs between rank {from} ({other}) and rank {} ({mine}): every rank of a {} must pass the same settings",
                    self.me, self.plane
                )));
            }
        }
        if self.hellos[from].is_some() {
            return Err(PlaneError::Protocol {
                rank: from,
                what: "a second hello".into(),
                me: self.me,
                doing: "waiting for the start-up agreement".into(),
            });
        }
        self.hellos[from] = Some(h);
        Ok(())
    }

    /// `from`'s content digest.
    pub(super) fn content_from(
        &mut self,
        from: usize,
        digest: u64,
        cfg: &EngineConfig,
    ) -> Result<(), PlaneError> {
        let _ = cfg;
        let reads = self.hellos.get(from).and_then(Option::as_ref).is_some_and(|h| h.reads_source);
        if !reads || self.contents[from].is_some() {
            return Err(PlaneError::Protocol {
                rank: from,
                what: "a content digest it was not to send".into(),
                me: self.me,
                doing: "waiting for the start-up agreement".into(),
            });
        }
        self.contents[from] = Some(digest);
        Ok(())
    }

    /// This rank's own content digest.
    pub(super) fn own_content(&mut self, digest: u64) {
        self.contents[self.me] = Some(digest);
    }

    /// Checks what can be checked so far.
    pub(super) fn advance(&mut self) -> Result<Step, PlaneError> {
        if self.done || self.hellos.iter().any(Option::is_none) {
            return Ok(Step::Waiting);
        }
        let hellos: Vec<&Hello> = self.hellos.iter().flatten().collect();
        // Every rank fails on the first store that could not be made, its own first.
        let mut order: Vec<usize> = vec![self.me];
        order.extend((0..hellos.len()).filter(|&p| p != self.me));
        for p in order {
            let e = &hellos[p].store_error;
            if !e.is_empty() {
                let text = if p == self.me { e.clone() } else { format!("rank {p}: {e}") };
                return Err(PlaneError::Store(text));
            }
        }
        for (p, h) in hellos.iter().enumerate() {
            if let (Some(mine), Some(theirs)) = (self.print, h.index)
                && mine != theirs
            {
                return Err(PlaneError::Mismatch(format!(
                    "the records differ between rank {} ({} records, {} bytes) and rank {p} ({} records, {} bytes): every rank must read the same data set",
                    self.me, mine.records, mine.bytes, theirs.records, theirs.bytes
                )));
            }
        }
        if self.waiting_store {
            return Ok(Step::Waiting);
        }
        let readers: Vec<usize> = (0..hellos.len()).filter(|&p| hellos[p].reads_source).collect();
        if readers.len() >= 2 {
            if readers.contains(&self.me) && self.contents[self.me].is_none() {
                if !self.asked_content {
                    self.asked_content = true;
                    return Ok(Step::NeedContent);
                }
                return Ok(Step::Waiting);
            }
            if readers.iter().any(|&p| self.contents[p].is_none()) {
                return Ok(Step::Waiting);
            }
            if let Some(&mine) = self.contents[self.me].as_ref() {
                for &p in &readers {
                    if self.contents[p] != Some(mine) {
                        return Err(PlaneError::Mismatch(format!(
                            "the records of rank {p} and rank {} differ in content (a sample of {CONTENT_SAMPLE} records chosen by the seed): every rank must read the same data set",
                            self.me
                        )));
                    }
                }
            }
        }
        self.done = true;
        Ok(Step::Agreed)
    }
}
