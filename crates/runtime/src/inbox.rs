//! The bounds on what a rank takes from its peers before reading them ([`InboxLimits`]),
//! derived from the job (docs/transport.md, "Bounded inboxes"): a peer that sends a longer
//! frame, or more unread bytes than an honest peer of this job could, loses its link.

use ubershuffle_transport::{COLLECTIVE_HEADER_BYTES, InboxLimits};

/// Bytes allowed beyond a message's content: headers, and the one-line detail of a failure
/// report.
const SLACK: usize = 64 * 1024;

/// Messages of the largest kind an honest peer may have sent and the rank not yet read: at the
/// master, a straggler's update of the last epoch and this epoch's, with their acknowledgements;
/// at a worker, a ring peer's pieces of the broadcast under way and of one it abandoned. Twice
/// that, for margin.
const BACKLOG: usize = 4;

/// The longest update of a model of `params` parameters: dense (`9 + 8 + 8 per value`), or
/// factor rows (`9 + 8`, then `4 + 8 * width` per row: at most 12 bytes a value).
fn update_bytes(params: usize) -> usize {
    params.saturating_mul(12).saturating_add(17)
}

/// The longest data message of `chunk_bytes` of coded packets of `width` bytes
/// ([`crate::protocol::data_chunk_bytes`]: a kind, epoch, attempt and list length, then an id
/// and a payload per packet).
fn data_message_bytes(chunk_bytes: usize, width: usize) -> usize {
    let packets = (chunk_bytes / width.max(1)).max(1);
    packets.saturating_mul(width.saturating_add(4)).saturating_add(13)
}

/// Limits of frames up to `content` bytes (plus slack and a collective's header), `BACKLOG`
/// of them unread.
fn limits_for(content: usize) -> InboxLimits {
    let frame = content.saturating_add(SLACK);
    InboxLimits::new(frame.saturating_add(COLLECTIVE_HEADER_BYTES), frame.saturating_mul(BACKLOG))
}

/// What a rank of a TCP cluster takes from each worker from the moment its links are up until
/// the job sets the bounds below (`TcpConfig::with_join_limits`): frames of at most 64 KiB
/// (plus a collective's header), four of them unread (256 KiB and a few bytes). An honest
/// worker sends nothing to another worker before both hold their jobs (the master has every
/// worker acknowledge its job and starting cache before the first epoch), and nothing to the
/// master before the master sends the jobs but, at most, a failure report of one line: both
/// fit with room to spare, while a peer that floods the join window is cut off at 256 KiB.
pub fn join_limits() -> InboxLimits {
    limits_for(0)
}

/// What a worker of the broadcast demo takes from another worker: ring pieces of a broadcast
/// of `bytes` bytes.
pub(crate) fn for_broadcasts(bytes: usize) -> InboxLimits {
    limits_for(bytes)
}

/// What the master takes from each worker: updates of a model of `params` parameters
/// (acknowledgements and reports are smaller).
pub(crate) fn at_master(params: usize) -> InboxLimits {
    limits_for(update_bytes(params))
}

/// What a worker takes from another worker: ring pieces of a broadcast, which is the model of
/// `params` parameters or a data message of `chunk_bytes` of `width`-byte packets. (The
/// master, trusted, is not limited.)
pub(crate) fn at_worker(params: usize, chunk_bytes: usize, width: usize) -> InboxLimits {
    limits_for(params.saturating_mul(8).max(data_message_bytes(chunk_bytes, width)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::data_chunk_bytes;
    use ubershuffle_learners::{Model, Update, UpdateBody};

    #[test]
    fn the_bounds_hold_the_largest_honest_messages() {
        let (chunk, width) = (1000, 24);
        let seqs: Vec<u32> = (0..(chunk / width) as u32).collect();
        let data = data_chunk_bytes(3, 1, &seqs, width, true, |_, _| {});
        assert_eq!(data.len(), data_message_bytes(chunk, width));
        let dense = Update { points: 5, body: UpdateBody::Dense(vec![0.0; 100]) };
        assert!(dense.to_bytes().len() <= update_bytes(100));
        let rows = Update { points: 5, body: UpdateBody::Rows { width: 1, rows: vec![(7, vec![1.0]); 100] } };
        assert_eq!(rows.to_bytes().len(), update_bytes(100));
        let worker = at_worker(100, chunk, width);
        assert!(worker.max_frame >= Model::new(vec![0.0; 100]).to_bytes().len() + COLLECTIVE_HEADER_BYTES);
        assert_eq!(worker.max_unread, BACKLOG * (data.len() + SLACK));
        assert_eq!(at_master(100).max_unread, BACKLOG * (update_bytes(100) + SLACK));
        // docs/transport.md quotes it: linear regression on 4 features (5 parameters).
        assert_eq!(at_master(5).max_unread, 262_452);
        // Before the job: a failure report's one line, nothing larger.
        assert_eq!(join_limits().max_unread, 4 * SLACK);
        assert!(join_limits().max_frame >= SLACK + COLLECTIVE_HEADER_BYTES);
    }
}
