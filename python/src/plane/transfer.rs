//! [`Transfer`]: the records that must move between ranks for every rank to hold its target,
//! sent whole, rank to rank (the partial-local seed's exchange, and any catch-up: a start, a
//! resume, a change of world size). Every rank computes the same transfer from the same
//! holdings and targets, so both ends of every message know its size without asking.
//!
//! A record a rank lacks comes from a rank that holds it (the one with the fewest bytes to send
//! so far, the lowest rank on a tie: the load spreads over the holders), or, when no rank holds
//! it, from the source (the data set's files, the parallel file system of the seed), read by
//! the rank that needs it. Moves are cut into rounds of at most `round_bytes` between any two
//! ranks (a record larger than that is a round of its own), so buffers stay bounded and
//! progress is visible while training runs.

use std::collections::HashMap;

use ubershuffle_codes::RecordIndex;

/// One record going from `from` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Move {
    id: u32,
    from: usize,
    to: usize,
}

/// What one rank holds or must hold: a sorted list, or every record (a store rank).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holding {
    /// These records, sorted.
    Some(Vec<u32>),
    /// Every record of the data set.
    All,
}

impl Holding {
    fn contains(&self, id: u32) -> bool {
        match self {
            Holding::Some(ids) => ids.binary_search(&id).is_ok(),
            Holding::All => true,
        }
    }
}

/// The transfer as one rank sees it (see the module's docs).
#[derive(Clone, Debug, Default)]
pub struct Transfer {
    world: usize,
    rank: usize,
    /// Per round, per peer: the records this rank sends (sorted).
    sends: Vec<Vec<Vec<u32>>>,
    /// Per round, per peer: the records this rank receives (sorted).
    recvs: Vec<Vec<Vec<u32>>>,
    /// Records this rank reads from the source.
    source: Vec<u32>,
    /// Records every rank receives from peers, for the figures of all.
    received_by: Vec<u64>,
    /// Bytes every rank receives from peers.
    received_bytes_by: Vec<u64>,
    /// Records every rank reads from the source.
    source_by: Vec<u64>,
}

/// The figures of a transfer at one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferFigures {
    /// Records this rank sends.
    pub records_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Records this rank receives.
    pub records_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// Records this rank reads from the source.
    pub source_records: u64,
    /// Their bytes.
    pub source_bytes: u64,
    /// Records all ranks receive from peers.
    pub all_records_moved: u64,
    /// Their bytes.
    pub all_bytes_moved: u64,
    /// Records all ranks read from the source.
    pub all_source_records: u64,
}

impl Transfer {
    /// The transfer that brings every rank from `holdings` to holding its `targets` (one of
    /// each per rank), seen from `rank`.
    pub fn plan(
        index: &RecordIndex,
        holdings: &[Holding],
        targets: &[Holding],
        rank: usize,
        round_bytes: u64,
    ) -> Result<Transfer, String> {
        let world = holdings.len();
        if targets.len() != world || rank >= world {
            return Err(format!(
                "{} holdings and {} targets for rank {rank}: one of each per rank is needed",
                holdings.len(),
                targets.len()
            ));
        }
        let size = |id: u32| index.size(id).unwrap_or(0);
        // Who holds what: for every record, its holders (ranks holding all come last).
        let all_holders: Vec<usize> = (0..world).filter(|&r| holdings[r] == Holding::All).collect();
        let mut holders: HashMap<u32, Vec<usize>> = HashMap::new();
        for (r, h) in holdings.iter().enumerate() {
            if let Holding::Some(ids) = h {
                for &id in ids {
                    if (id as usize) >= index.len() {
                        return Err(format!(
                            "rank {r} holds record {id}, beyond the {} records",
                            index.len()
                        ));
                    }
                    holders.entry(id).or_default().push(r);
                }
            }
        }
        let mut load = vec![0u64; world];
        let mut moves = Vec::new();
        let mut source_by = vec![0u64; world];
        let mut source = Vec::new();
        for (to, target) in targets.iter().enumerate() {
            let Holding::Some(ids) = target else { continue };
            for &id in ids {
                if (id as usize) >= index.len() {
                    return Err(format!("rank {to} needs record {id}, beyond the {} records", index.len()));
                }
                if holdings[to].contains(id) {
                    continue;
                }
                let candidates = holders.get(&id).map(Vec::as_slice).unwrap_or(&[]);
                let from = candidates.iter().chain(&all_holders).copied().min_by_key(|&r| (load[r], r));
                match from {
                    Some(from) => {
                        load[from] += size(id);
                        moves.push(Move { id, from, to });
                    }
                    None => {
                        source_by[to] += 1;
                        if to == rank {
                            source.push(id);
                        }
                    }
                }
            }
        }
        let mut received_by = vec![0u64; world];
        let mut received_bytes_by = vec![0u64; world];
        for m in &moves {
            received_by[m.to] += 1;
            received_bytes_by[m.to] += size(m.id);
        }
        let rounds = rounds_of(&moves, round_bytes, size);
        let n_rounds = rounds.iter().copied().max().map_or(0, |r| r + 1);
        let mut sends = vec![vec![Vec::new(); world]; n_rounds];
        let mut recvs = vec![vec![Vec::new(); world]; n_rounds];
        for (m, &k) in moves.iter().zip(&rounds) {
            if m.from == rank {
                sends[k][m.to].push(m.id);
            }
            if m.to == rank {
                recvs[k][m.from].push(m.id);
            }
        }
        for list in sends.iter_mut().chain(recvs.iter_mut()).flatten() {
            list.sort_unstable();
        }
        source.sort_unstable();
        Ok(Transfer { world, rank, sends, recvs, source, received_by, received_bytes_by, source_by })
    }

    /// Number of rounds.
    pub fn rounds(&self) -> usize {
        self.sends.len()
    }

    /// The records this rank sends to each peer in round `k`.
    pub fn sends(&self, k: usize) -> &[Vec<u32>] {
        self.sends.get(k).map_or(&[], Vec::as_slice)
    }

    /// The records this rank receives from each peer in round `k`.
    pub fn recvs(&self, k: usize) -> &[Vec<u32>] {
        self.recvs.get(k).map_or(&[], Vec::as_slice)
    }

    /// The records this rank reads from the source.
    pub fn source(&self) -> &[u32] {
        &self.source
    }

    /// The figures at this rank.
    pub fn figures(&self, index: &RecordIndex) -> TransferFigures {
        let count = |lists: &[Vec<Vec<u32>>]| -> (u64, u64) {
            lists.iter().flatten().fold((0, 0), |(n, b), l| (n + l.len() as u64, b + index.bytes_of(l)))
        };
        let (records_sent, bytes_sent) = count(&self.sends);
        let (records_received, bytes_received) = count(&self.recvs);
        TransferFigures {
            records_sent,
            bytes_sent,
            records_received,
            bytes_received,
            source_records: self.source.len() as u64,
            source_bytes: index.bytes_of(&self.source),
            all_records_moved: self.received_by.iter().sum(),
            all_bytes_moved: self.received_bytes_by.iter().sum(),
            all_source_records: self.source_by.iter().sum(),
        }
    }

    /// The world and this rank.
    pub fn ranks(&self) -> (usize, usize) {
        (self.world, self.rank)
    }
}

/// The round of every move: each pair of ranks' moves in order, a round holding at most
/// `round_bytes` of them (a larger record alone). A pair's rounds depend on its own moves only,
/// so a rank that knows only its own moves (a training rank catching up from a store) agrees
/// with the sender on every round.
fn rounds_of(moves: &[Move], round_bytes: u64, size: impl Fn(u32) -> u64) -> Vec<usize> {
    let mut pairs: HashMap<(usize, usize), (usize, u64)> = HashMap::new();
    moves
        .iter()
        .map(|m| {
            let b = size(m.id);
            let (round, used) = pairs.entry((m.from, m.to)).or_insert((0, 0));
            if *used > 0 && *used + b > round_bytes {
                *round += 1;
                *used = 0;
            }
            *used += b;
            *round
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn some(ids: &[u32]) -> Holding {
        Holding::Some(ids.to_vec())
    }

    #[test]
    fn every_missing_record_comes_from_a_holder_or_the_source_in_bounded_rounds() {
        let index = RecordIndex::from_sizes([10u64, 20, 30, 40, 50, 60]).unwrap();
        let holdings = [some(&[0, 1]), some(&[2, 3]), some(&[])];
        let targets = [some(&[0, 2]), some(&[1, 3, 4]), some(&[5, 0])];
        let views: Vec<Transfer> =
            (0..3).map(|r| Transfer::plan(&index, &holdings, &targets, r, 60).unwrap()).collect();
        assert_eq!(views[0].sends(0)[2], vec![0], "rank 2 gets record 0 from rank 0");
        assert_eq!(views[1].source(), &[4], "nobody holds record 4");
        assert_eq!(views[2].source(), &[5]);
        // Both ends agree on every message.
        let list = |t: &Transfer, k: usize, peer: usize, send: bool| {
            let lists = if send { t.sends(k) } else { t.recvs(k) };
            lists.get(peer).cloned().unwrap_or_default()
        };
        let rounds = views.iter().map(Transfer::rounds).max().unwrap();
        for k in 0..rounds {
            for a in 0..3 {
                for b in 0..3 {
                    assert_eq!(
                        list(&views[a], k, b, true),
                        list(&views[b], k, a, false),
                        "round {k}, {a} to {b}"
                    );
                }
            }
        }
        // Every rank ends holding its target: what it held, what it receives, what it reads,
        // each received record from a rank that held it.
        for (r, view) in views.iter().enumerate() {
            let Holding::Some(held) = &holdings[r] else { unreachable!() };
            let mut has: Vec<u32> = held.iter().chain(view.source()).copied().collect();
            for k in 0..view.rounds() {
                for (peer, ids) in view.recvs(k).iter().enumerate() {
                    assert!(
                        ids.iter().all(|&id| holdings[peer].contains(id)),
                        "rank {r} from {peer}: {ids:?}"
                    );
                    has.extend(ids);
                }
            }
            let Holding::Some(want) = &targets[r] else { unreachable!() };
            assert!(want.iter().all(|id| has.contains(id)), "rank {r} has {has:?}, wants {want:?}");
        }
        let f = views[0].figures(&index);
        assert_eq!((f.all_records_moved, f.all_source_records), (3, 2));
        assert_eq!((f.records_sent, f.bytes_sent), (2, 30), "records 1 (20 bytes) and 0 (10 bytes)");
        let everything = [Holding::All, some(&[])];
        let want = [Holding::All, some(&[1, 2, 3])];
        let t = Transfer::plan(&index, &everything, &want, 0, 45).unwrap();
        assert_eq!(t.rounds(), 3, "records of 20, 30 and 40 bytes, no two within 45");
        let sent: Vec<Vec<u32>> = (0..3).map(|k| t.sends(k)[1].clone()).collect();
        assert_eq!(sent, [vec![1], vec![2], vec![3]], "one record a round, in order");
    }

    #[test]
    fn a_record_comes_from_the_holder_with_the_least_to_send_the_lowest_rank_on_a_tie() {
        let index = RecordIndex::from_sizes([10u64, 10, 10, 5]).unwrap();
        let holdings = [some(&[0, 1, 2, 3]), some(&[0, 1, 2, 3]), some(&[])];
        let targets = [some(&[0, 1, 2, 3]), some(&[0, 1, 2, 3]), some(&[0, 1, 2, 3])];
        let t = Transfer::plan(&index, &holdings, &targets, 2, 100).unwrap();
        // 0 from rank 0 (a tie), 1 from rank 1 (rank 0 has 10 bytes to send), 2 from rank 0
        // (a tie again), 3 from rank 1 (20 bytes against 10).
        assert_eq!(t.recvs(0), &[vec![0, 2], vec![1, 3], vec![]]);
    }

    #[test]
    fn holdings_and_targets_that_do_not_fit_are_refused() {
        let index = RecordIndex::from_sizes([10u64, 20]).unwrap();
        let e = Transfer::plan(&index, &[some(&[0]), some(&[])], &[some(&[0])], 0, 60).unwrap_err();
        assert_eq!(e, "2 holdings and 1 targets for rank 0: one of each per rank is needed");
        let e =
            Transfer::plan(&index, &[some(&[0]), some(&[])], &[some(&[0]), some(&[9])], 0, 60).unwrap_err();
        assert_eq!(e, "rank 1 needs record 9, beyond the 2 records");
        let e =
            Transfer::plan(&index, &[some(&[5]), some(&[])], &[some(&[0]), some(&[1])], 0, 60).unwrap_err();
        assert_eq!(e, "rank 0 holds record 5, beyond the 2 records");
        assert!(
            Transfer::plan(&index, &[some(&[0])], &[some(&[0])], 1, 60)
                .is_err_and(|e| e.contains("for rank 1"))
        );
    }
}
