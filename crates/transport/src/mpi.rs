//! The MPI transport (cargo feature `mpi`): Open MPI through rsmpi. Broadcast is `MPI_Bcast`.
//!
//! Start the program under `mpirun`; create the universe once per process
//! (`mpi::initialize()`) and hand its world communicator to [`MpiTransport::new`]. The
//! communicator is neither `Send` nor `Sync`, which is why [`Transport`] does not require them.
//!
//! Timeouts: receives poll `MPI_Improbe` until their deadline, so a receive from a stalled or
//! departed rank fails cleanly with [`TransportError::Timeout`] naming it. Before `MPI_Bcast`,
//! every receiver tells the root it is ready and the root answers with the length (both small
//! messages with clean timeouts), so a missing rank is named before anyone enters the
//! collective. A started send cannot be withdrawn in MPI (`MPI_Cancel` of sends is deprecated
//! and Open MPI does not honour it), so a send not completed within the timeout prints the
//! error and aborts the job with `MPI_Abort`, which is also what MPI itself does when a peer
//! dies. A rank that "dies" in the conformance suite stops taking part rather than exiting:
//! a process exiting without `MPI_Finalize` makes `mpirun` end the whole job.

use std::thread;
use std::time::{Duration, Instant};

use mpi::collective::Root;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::scope;
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::collectives::{self, Links};
use crate::transport::{check_peers, check_send, links_accessors, point_to_point_via_links};
use crate::{Tag, Transport, TransportError};

/// A receiver's "ready for the broadcast" message.
const TAG_BCAST_READY: Tag = 0x7010;
/// The root's "go", carrying the length.
const TAG_BCAST_GO: Tag = 0x7011;
/// The largest count one MPI call takes.
const MPI_CHUNK: usize = i32::MAX as usize;

/// One rank of an MPI job.
pub struct MpiTransport {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    timeout: Duration,
    max_message: usize,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiTransport {{ rank: {}, size: {} }}", self.rank, self.size)
    }
}

impl MpiTransport {
    /// Wraps a communicator (usually `universe.world()`), with a 10 s timeout.
    pub fn new(world: SimpleCommunicator) -> MpiTransport {
        let rank = world.rank().max(0) as usize;
        let size = world.size().max(1) as usize;
        MpiTransport { world, rank, size, timeout: Duration::from_secs(10), max_message: MPI_CHUNK }
    }
}

/// Sleeps a little longer each time, from 10 µs to 1 ms, while polling.
fn backoff(round: &mut u32) {
    let micros = 10u64 << (*round).min(7);
    *round += 1;
    thread::sleep(Duration::from_micros(micros.min(1000)));
}

impl Links for MpiTransport {
    links_accessors!();

    fn send_parts(
        &mut self,
        to: usize,
        tag: Tag,
        parts: &[&[u8]],
        op: &'static str,
    ) -> Result<(), TransportError> {
        check_send(self.rank, self.size, to, parts, self.max_message)?;
        let joined;
        let bytes: &[u8] = match parts {
            [one] => one,
            _ => {
                joined = parts.concat();
                &joined
            }
        };
        let deadline = Instant::now() + self.timeout;
        let world = &self.world;
        scope(|scope| {
            let mut request =
                world.process_at_rank(to as i32).immediate_send_with_tag(scope, bytes, i32::from(tag));
            let mut round = 0;
            loop {
                match request.test() {
                    Ok(_) => return,
                    Err(pending) => request = pending,
                }
                if Instant::now() >= deadline {
                    let e = TransportError::Timeout { peer: to, op, after: self.timeout };
                    eprintln!(
                        "error: rank {}: {e}; an MPI send cannot be withdrawn, aborting the job",
                        self.rank
                    );
                    world.abort(1);
                }
                backoff(&mut round);
            }
        });
        Ok(())
    }

    fn recv_from(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        check_peers(self.rank, self.size, from)?;
        let deadline = Instant::now() + timeout;
        let mut round = 0;
        loop {
            for &f in from {
                let process = self.world.process_at_rank(f as i32);
                if let Some(matched) = process.immediate_matched_probe_with_tag(i32::from(tag)) {
                    let (bytes, _) = matched.matched_receive_vec::<u8>();
                    return Ok((f, bytes));
                }
            }
            if Instant::now() >= deadline {
                let peer = from.iter().copied().min().unwrap_or(0);
                return Err(TransportError::Timeout { peer, op, after: timeout });
            }
            backoff(&mut round);
        }
    }
}

impl Transport for MpiTransport {
    point_to_point_via_links!();

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Ready/length handshake with clean timeouts, then `MPI_Bcast` (in chunks below 2 GiB).
    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        const OP: &str = "broadcast";
        if root >= self.size {
            return Err(TransportError::NoSuchRank { rank: root, size: self.size });
        }
        if self.size == 1 {
            return Ok(());
        }
        if self.rank == root {
            if buf.len() > self.max_message {
                return Err(TransportError::MessageTooLarge { len: buf.len(), max: self.max_message });
            }
            let mut waiting: Vec<usize> = (0..self.size).filter(|&r| r != root).collect();
            while !waiting.is_empty() {
                let (from, _) = self.recv_from(&waiting, TAG_BCAST_READY, self.timeout, OP)?;
                waiting.retain(|&r| r != from);
            }
            let len = (buf.len() as u64).to_le_bytes();
            for r in (0..self.size).filter(|&r| r != root) {
                self.send_parts(r, TAG_BCAST_GO, &[&len], OP)?;
            }
        } else {
            self.send_parts(root, TAG_BCAST_READY, &[], OP)?;
            let (_, go) = self.recv_from(&[root], TAG_BCAST_GO, self.timeout * 2, OP)?;
            let len = go
                .as_slice()
                .try_into()
                .ok()
                .map(u64::from_le_bytes)
                .and_then(|l| usize::try_from(l).ok())
                .filter(|&l| l <= self.max_message)
                .ok_or_else(|| TransportError::Protocol {
                    peer: root,
                    op: OP,
                    detail: "malformed broadcast length".into(),
                })?;
            buf.clear();
            buf.resize(len, 0);
        }
        let process = self.world.process_at_rank(root as i32);
        for chunk in buf.chunks_mut(MPI_CHUNK) {
            process.broadcast_into(chunk);
        }
        Ok(())
    }

    /// `MPI_Bcast` when the group is every rank; a smaller group (survivors) uses the
    /// pseudo-broadcast over point-to-point messages, which needs no new communicator.
    fn broadcast_among(
        &mut self,
        root: usize,
        group: &[usize],
        id: u64,
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        self.broadcast_turned(root, group, (id, 0), buf)
    }

    /// As [`broadcast_among`](Transport::broadcast_among); a smaller group's ring is turned
    /// by `named`'s turn, as the other transports' are (`MPI_Bcast` does not relay).
    fn broadcast_turned(
        &mut self,
        root: usize,
        group: &[usize],
        named: (u64, u32),
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        if group.len() == self.size && group.iter().enumerate().all(|(k, &r)| k == r) {
            return self.broadcast(root, buf);
        }
        collectives::broadcast_among(
            self,
            collectives::BroadcastMethod::PseudoBroadcast,
            root,
            group,
            named,
            buf,
        )
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        collectives::barrier(self)
    }
}
