//! [`Work`]: the delivery a training rank has in flight, peer mode's or store mode's, behind
//! one face for the engine.

use ubershuffle_codes::RecordIndex;

use crate::error::PlaneError;
use crate::store::SharedStore;

use super::delivery::Delivery;
use super::gate::Gate;
use super::streams::Fault;
use super::trainer::TrainerDelivery;
use super::{EngineConfig, Figures};

/// A training rank's delivery in flight.
pub(super) enum Work {
    /// Peer mode: records rank to rank.
    Peer(Box<Delivery>),
    /// Store mode: from the store.
    Trainer(Box<TrainerDelivery>),
}

impl Work {
    pub(super) fn epoch(&self) -> u64 {
        match self {
            Work::Peer(d) => d.epoch(),
            Work::Trainer(d) => d.epoch(),
        }
    }

    pub(super) fn target_digest(&self) -> u64 {
        match self {
            Work::Peer(d) => d.target_digest(),
            Work::Trainer(d) => d.target_digest(),
        }
    }

    pub(super) fn is_done(&self) -> bool {
        match self {
            Work::Peer(d) => d.is_done(),
            Work::Trainer(d) => d.is_done(),
        }
    }

    pub(super) fn doing(&self) -> String {
        match self {
            Work::Peer(d) => d.doing(),
            Work::Trainer(d) => d.doing(),
        }
    }

    pub(super) fn needs(&self, peer: usize) -> bool {
        match self {
            Work::Peer(d) => d.needs(peer),
            Work::Trainer(d) => d.needs(peer),
        }
    }

    /// Whether this delivery takes a message of this kind (a step takes no holdings).
    pub(super) fn takes(&self, bytes: &[u8]) -> bool {
        match self {
            Work::Peer(d) => d.takes(bytes),
            Work::Trainer(_) => true,
        }
    }

    pub(super) fn figures(&self, index: &RecordIndex) -> Figures {
        match self {
            Work::Peer(d) => d.figures(index),
            Work::Trainer(d) => d.figures(index),
        }
    }

    /// A message of this delivery from `from`.
    pub(super) fn on_message(
        &mut self,
        from: usize,
        bytes: &[u8],
        store: &SharedStore,
        index: &RecordIndex,
        now: f64,
    ) -> Result<(), Fault> {
        match self {
            Work::Peer(d) => d.on_message(from, bytes, store, now),
            Work::Trainer(d) => d.on_message(from, bytes, store, index, now),
        }
    }

    /// The control messages to send and the source's records to read, as far as it goes.
    pub(super) fn pump(
        &mut self,
        cfg: &EngineConfig,
        index: &RecordIndex,
        store: &SharedStore,
        now: f64,
        gate: &mut Gate,
    ) -> Result<Vec<super::delivery::Out>, PlaneError> {
        let mut out = Vec::new();
        match self {
            Work::Peer(d) => d.pump(cfg, index, store, now, gate, &mut out)?,
            Work::Trainer(d) => {
                if let Some((to, bytes)) = d.take_want() {
                    out.push(super::delivery::Out::Send(to, bytes));
                }
                for (to, bytes) in d.grant(now, gate) {
                    out.push(super::delivery::Out::Send(to, bytes));
                }
                d.check_done(store, now)?;
            }
        }
        Ok(out)
    }

    /// The next chunk of records for `peer`.
    pub(super) fn next_chunk(
        &mut self,
        peer: usize,
        store: &SharedStore,
        now: f64,
        gate: &mut Gate,
    ) -> Result<Option<Vec<u8>>, PlaneError> {
        match self {
            Work::Peer(d) => d.next_chunk(peer, store, now, gate),
            Work::Trainer(d) => {
                let chunk = d.next_chunk(peer, now, gate);
                d.check_done(store, now)?;
                Ok(chunk)
            }
        }
    }

    /// The source's records were read (peer mode).
    pub(super) fn source_read(&mut self, result: Result<(u64, u64), String>) -> Result<(), PlaneError> {
        match self {
            Work::Peer(d) => d.source_read(result),
            Work::Trainer(_) => {
                Err(PlaneError::Internal("a training rank of store mode reads no source".into()))
            }
        }
    }
}
