//! A rank's record store: its records of any size in a folder of mapped files
//! ([`MappedStore`]), which the engine writes as records arrive and every process of the rank
//! reads (DataLoader workers map the same files).

mod mapped;
pub mod space;

use std::sync::{Arc, Mutex, MutexGuard};

use ubershuffle_codes::{RecordSource, RecordWriter};

pub use mapped::{MappedStore, StoreError};
pub use space::{NoSpace, PAGE};

/// A record store shared by the engine's thread and the caller's.
pub type SharedStore = Arc<Mutex<MappedStore>>;

/// The store behind `store`'s lock, whoever panicked holding it (a poisoned lock still guards
/// whole records: every write completes a record before its flag is set).
pub fn locked(store: &Mutex<MappedStore>) -> MutexGuard<'_, MappedStore> {
    store.lock().unwrap_or_else(|p| p.into_inner())
}

/// A shared store as the codec's source and target: each call locks it, so a decoder can keep
/// it across rounds while other threads read and evict between them.
#[derive(Clone, Debug)]
pub struct LockedStore(pub SharedStore);

impl RecordSource for LockedStore {
    fn size(&self, id: u32) -> Option<u64> {
        RecordSource::size(&*locked(&self.0), id)
    }

    fn xor_piece_into(
        &self,
        id: u32,
        at: usize,
        dst: &mut [u8],
    ) -> Result<(), ubershuffle_codes::CodecError> {
        locked(&self.0).xor_piece_into(id, at, dst)
    }
}

impl RecordWriter for LockedStore {
    fn write_at(&mut self, id: u32, at: usize, bytes: &[u8]) -> Result<(), ubershuffle_codes::CodecError> {
        locked(&self.0).write_at(id, at, bytes)
    }

    fn complete(&mut self, id: u32) -> Result<(), ubershuffle_codes::CodecError> {
        locked(&self.0).complete(id)
    }
}
