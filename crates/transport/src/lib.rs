#![doc = include_str!("../README.md")]

mod collectives;
pub mod conformance;
mod error;
pub mod frame;
pub mod in_process;
mod mailbox;
#[cfg(feature = "mpi")]
pub mod mpi;
mod relayed;
pub mod seal;
mod secret;
pub mod tcp;
mod transport;

pub use collectives::{BroadcastMethod, UnknownBroadcastMethod, ring_order};
pub use error::TransportError;
pub use mailbox::InboxLimits;
#[cfg(feature = "insider-harness")]
pub use relayed::insider;
pub use secret::Secret;
pub use transport::{COLLECTIVE_HEADER_BYTES, MAX_USER_TAG, Tag, Transport};
