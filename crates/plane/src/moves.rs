//! [`Moves`]: the records that must move between ranks for every rank to hold its target, sent
//! whole, rank to rank (the partial-local exchange of peer mode, every catch-up, and a store's
//! records sent whole). Every rank computes the same moves from the same holdings and targets,
//! so both ends of every stream know what it carries without asking.
//!
//! A record a rank lacks comes from a rank that holds it (the one with the fewest bytes to send
//! so far, the lowest rank on a tie: the load spreads over the holders), or, when no rank holds
//! it, from the source (the data set's files or objects), read by the rank that needs it. The
//! records one rank sends another travel as one stream, in id order.

use std::collections::HashMap;

use ubershuffle_codes::RecordIndex;

/// What one rank holds or must hold: a sorted list, or every record (a store).
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

/// Why moves cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MovesError {
    /// The holdings or targets are not one per rank.
    #[error("{holdings} holdings and {targets} targets for rank {rank}: one of each per rank is needed")]
    Shape {
        /// Holdings given.
        holdings: usize,
        /// Targets given.
        targets: usize,
        /// The rank asked about.
        rank: usize,
    },
    /// A record id past the data set.
    #[error("rank {rank} {what} record {id}, beyond the {records} records")]
    OutOfRange {
        /// The rank.
        rank: usize,
        /// `holds` or `needs`.
        what: &'static str,
        /// The id.
        id: u32,
        /// Records in the data set.
        records: usize,
    },
}

/// The moves as one rank sees them (see the module's docs).
#[derive(Clone, Debug, Default)]
pub struct Moves {
    /// Per peer: the records this rank sends it (sorted).
    sends: Vec<Vec<u32>>,
    /// Per peer: the records this rank receives from it (sorted).
    recvs: Vec<Vec<u32>>,
    /// Records this rank reads from the source (sorted).
    source: Vec<u32>,
    /// Records and bytes all ranks receive from peers, and records all read from the source.
    all: (u64, u64, u64),
}

/// What moves at one rank, and in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovesFigures {
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

impl Moves {
    /// The moves that bring every rank from `holdings` to holding its `targets` (one of each
    /// per rank), seen from `rank`.
    pub fn plan(
        index: &RecordIndex,
        holdings: &[Holding],
        targets: &[Holding],
        rank: usize,
    ) -> Result<Moves, MovesError> {
        let world = holdings.len();
        if targets.len() != world || rank >= world {
            return Err(MovesError::Shape { holdings: world, targets: targets.len(), rank });
        }
        let records = index.len();
        let size = |id: u32| index.size(id).unwrap_or(0);
        // Who holds what: for every record, its holders (ranks holding all come last).
        let all_holders: Vec<usize> = (0..world).filter(|&r| holdings[r] == Holding::All).collect();
        let mut holders: HashMap<u32, Vec<usize>> = HashMap::new();
        for (r, h) in holdings.iter().enumerate() {
            if let Holding::Some(ids) = h {
                for &id in ids {
                    if (id as usize) >= records {
                        return Err(MovesError::OutOfRange { rank: r, what: "holds", id, records });
                    }
                    holders.entry(id).or_default().push(r);
                }
            }
        }
        let mut load = vec![0u64; world];
        let mut sends = vec![Vec::new(); world];
        let mut recvs = vec![Vec::new(); world];
        let mut source = Vec::new();
        let (mut moved, mut moved_bytes, mut from_source) = (0u64, 0u64, 0u64);
        for (to, target) in targets.iter().enumerate() {
            let Holding::Some(ids) = target else { continue };
            for &id in ids {
                if (id as usize) >= records {
                    return Err(MovesError::OutOfRange { rank: to, what: "needs", id, records });
                }
                if holdings[to].contains(id) {
                    continue;
                }
                let candidates = holders.get(&id).map(Vec::as_slice).unwrap_or(&[]);
                let from = candidates.iter().chain(&all_holders).copied().min_by_key(|&r| (load[r], r));
                match from {
                    Some(from) => {
                        load[from] += size(id);
                        (moved, moved_bytes) = (moved + 1, moved_bytes + size(id));
                        if from == rank {
                            sends[to].push(id);
                        }
                        if to == rank {
                            recvs[from].push(id);
                        }
                    }
                    None => {
                        from_source += 1;
                        if to == rank {
                            source.push(id);
                        }
                    }
                }
            }
        }
        for list in sends.iter_mut().chain(recvs.iter_mut()) {
            list.sort_unstable();
        }
        source.sort_unstable();
        Ok(Moves { sends, recvs, source, all: (moved, moved_bytes, from_source) })
    }

    /// The records this rank sends `peer`, in the stream's order.
    pub fn sends_to(&self, peer: usize) -> &[u32] {
        self.sends.get(peer).map_or(&[], Vec::as_slice)
    }

    /// The records this rank receives from `peer`, in the stream's order.
    pub fn recvs_from(&self, peer: usize) -> &[u32] {
        self.recvs.get(peer).map_or(&[], Vec::as_slice)
    }

    /// The records this rank reads from the source.
    pub fn source(&self) -> &[u32] {
        &self.source
    }

    /// The figures at this rank.
    pub fn figures(&self, index: &RecordIndex) -> MovesFigures {
        let count = |lists: &[Vec<u32>]| -> (u64, u64) {
            lists.iter().fold((0, 0), |(n, b), l| (n + l.len() as u64, b + index.bytes_of(l)))
        };
        let (records_sent, bytes_sent) = count(&self.sends);
        let (records_received, bytes_received) = count(&self.recvs);
        MovesFigures {
            records_sent,
            bytes_sent,
            records_received,
            bytes_received,
            source_records: self.source.len() as u64,
            source_bytes: index.bytes_of(&self.source),
            all_records_moved: self.all.0,
            all_bytes_moved: self.all.1,
            all_source_records: self.all.2,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn some(ids: &[u32]) -> Holding {
        Holding::Some(ids.to_vec())
    }

    #[test]
    fn every_missing_record_comes_from_a_holder_or_the_source_and_both_ends_agree() {
        let index = RecordIndex::from_sizes([10u64, 20, 30, 40, 50, 60]).unwrap();
        let holdings = [some(&[0, 1]), some(&[2, 3]), some(&[])];
        let targets = [some(&[0, 2]), some(&[1, 3, 4]), some(&[5, 0])];
        let views: Vec<Moves> =
            (0..3).map(|r| Moves::plan(&index, &holdings, &targets, r).unwrap()).collect();
        assert_eq!(views[0].sends_to(2), &[0], "rank 2 gets record 0 from rank 0");
        assert_eq!(views[1].sends_to(0), &[2], "rank 0 gets record 2 from rank 1");
        assert_eq!(views[0].sends_to(1), &[1]);
        assert_eq!(views[1].source(), &[4], "nobody holds record 4");
        assert_eq!(views[2].source(), &[5]);
        for a in 0..3 {
            for b in 0..3 {
                assert_eq!(views[a].sends_to(b), views[b].recvs_from(a), "{a} to {b}");
            }
        }
        let f = views[0].figures(&index);
        assert_eq!((f.records_sent, f.bytes_sent, f.records_received, f.bytes_received), (2, 30, 1, 30));
        assert_eq!((f.all_records_moved, f.all_bytes_moved, f.all_source_records), (3, 60, 2));
        let store = [Holding::All, some(&[])];
        let t = Moves::plan(&index, &store, &[Holding::All, some(&[1, 2, 3])], 1).unwrap();
        assert_eq!(t.recvs_from(0), &[1, 2, 3], "a store holding every record sends them");
        assert!(matches!(
            Moves::plan(&index, &holdings, &[some(&[9]), some(&[]), some(&[])], 0),
            Err(MovesError::OutOfRange { rank: 0, id: 9, .. })
        ));
        assert!(matches!(Moves::plan(&index, &holdings, &targets[..2], 0), Err(MovesError::Shape { .. })));
    }

    #[test]
    fn the_load_spreads_over_the_holders() {
        let index = RecordIndex::from_sizes([100u64; 8]).unwrap();
        let both = some(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let holdings = [both.clone(), both, some(&[])];
        let targets = [some(&[]), some(&[]), some(&[0, 1, 2, 3, 4, 5, 6, 7])];
        let t = Moves::plan(&index, &holdings, &targets, 2).unwrap();
        assert_eq!((t.recvs_from(0).len(), t.recvs_from(1).len()), (4, 4));
    }
}
