//! Moving bytes between the master (rank 0) and the workers.
//!
//! This crate will hold the `Transport` trait (rank, size, send/recv of byte messages,
//! broadcast from a root, barrier, all with timeouts and typed errors), a checked wire format
//! (length-prefixed frames with a version, type, sender, length bound and CRC32C), and three
//! implementations: in-process threads with optional bandwidth shaping, TCP master/worker with
//! the scatter + ring pseudo-broadcast of the UberShuffle paper, and Open MPI behind the `mpi`
//! feature. It knows nothing about learning. Not built yet: see the transport issue.
