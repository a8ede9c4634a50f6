//! Moving bytes between the master (rank 0) and the workers (ranks 1..size).
//!
//! [`Transport`] is what the epoch loop is written against: rank and size, tagged byte
//! messages between any two ranks, broadcast from a root, and a barrier, every wait bounded by
//! a timeout and every failure a typed [`TransportError`] naming the rank at fault. Three
//! implementations:
//!
//! - [`in_process`]: one thread per rank over channels, with optional link shaping (bytes per
//!   second and latency, single-ported NICs as in the UberShuffle paper) so a 1 Gbit/s cluster
//!   can be emulated on one machine;
//! - [`tcp`]: a master and workers as processes (or threads) over TCP, with token
//!   authentication, a full mesh between workers, and the paper's scatter + ring
//!   pseudo-broadcast (or the plain "send to each worker" broadcast);
//! - `mpi` (cargo feature `mpi`): Open MPI through rsmpi, broadcast by `MPI_Bcast`.
//!
//! Bytes on a socket travel in [`frame`]s: length-prefixed, versioned, with the sender, a
//! length bound checked before any allocation, and CRC32C checksums. [`conformance`] is the one
//! test suite every transport passes.
//!
//! ```
//! use ubershuffle_transport::{in_process, Transport, TransportError};
//! let ranks = in_process::cluster(3, &in_process::InProcessConfig::default())?;
//! let handles: Vec<_> = ranks
//!     .into_iter()
//!     .map(|mut t| std::thread::spawn(move || {
//!         let mut buf = if t.rank() == 0 { b"coded packets".to_vec() } else { Vec::new() };
//!         t.broadcast(0, &mut buf)?;
//!         Ok::<_, TransportError>(buf)
//!     }))
//!     .collect();
//! for h in handles {
//!     assert_eq!(h.join().unwrap()?, b"coded packets");
//! }
//! # Ok::<(), TransportError>(())
//! ```

mod collectives;
pub mod conformance;
mod error;
pub mod frame;
pub mod in_process;
mod mailbox;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod tcp;
mod transport;

pub use collectives::BroadcastMethod;
pub use error::TransportError;
pub use transport::{MAX_USER_TAG, Tag, Transport};
