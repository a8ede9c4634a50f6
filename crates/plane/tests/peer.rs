//! Peer mode through the hub: every rank ends each epoch holding its target, byte for byte,
//! whatever the policy; the first epoch reads each rank's batch from the source and later
//! epochs move only what changed rank; a killed, frozen, closing or lying rank is named; ranks
//! given other settings or other data sets are told before anything moves.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Job, Setting, failure, ready};
use ubershuffle_core::epoch_chain::{ChainStart, contiguous_blocks};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::moves::{Holding, Moves};
use ubershuffle_plane::wire::Message;
use ubershuffle_plane::{Input, PlaneError, Schedule};

#[test]
fn a_partial_local_chain_moves_exactly_what_changes_rank() {
    let mut s = Setting::peer(4, 300);
    s.policy = ExchangePolicy::new("partial-local", Some(0.3)).unwrap();
    let mut job = Job::new("partial-local", &s);
    let mut source = job.source();
    for epoch in 0..4u64 {
        let outputs = job.epoch(epoch, &mut source);
        job.check_holds(epoch);
        let at = job.schedule.at(epoch).unwrap();
        for (r, out) in outputs.iter().enumerate() {
            let f = ready(out, epoch).unwrap();
            let batch = &at.batches()[r];
            if epoch == 0 {
                assert_eq!(f.count_of("source_records"), batch.len() as u64, "a rank reads its batch");
                assert_eq!(f.count_of("source_bytes"), job.index.bytes_of(batch));
                assert_eq!(f.count_of("records_received"), 0);
                continue;
            }
            let before = job.schedule.at(epoch - 1).unwrap().batches()[r].clone();
            let arrived: Vec<u32> =
                batch.iter().copied().filter(|id| before.binary_search(id).is_err()).collect();
            assert_eq!(f.count_of("source_records"), 0, "epoch {epoch}: nothing from the source");
            assert_eq!(f.count_of("records_received"), arrived.len() as u64, "epoch {epoch}, rank {r}");
            assert_eq!(f.count_of("bytes_received"), job.index.bytes_of(&arrived), "to the byte");
        }
        let sent: u64 = outputs.iter().map(|o| ready(o, epoch).unwrap().count_of("bytes_sent")).sum();
        let got: u64 = outputs.iter().map(|o| ready(o, epoch).unwrap().count_of("bytes_received")).sum();
        assert_eq!(sent, got);
    }
    assert_eq!(source.reads.iter().sum::<u64>(), 300, "each record read from the source once");
}

#[test]
fn a_chain_started_in_blocks_reads_each_rank_s_run_of_ids_and_mixes_after() {
    let mut s = Setting::peer(3, 100);
    s.start = ChainStart::Blocks;
    let mut job = Job::new("blocks", &s);
    let mut source = job.source();
    let blocks = contiguous_blocks(3, 100);
    for epoch in 0..3u64 {
        let outputs = job.epoch(epoch, &mut source);
        job.check_holds(epoch);
        for out in &outputs {
            ready(out, epoch).unwrap();
        }
        // Epoch 0: each rank reads its run of consecutive ids, in order; nothing after.
        assert_eq!(source.read_ids, blocks, "epoch {epoch}");
    }
    let later = job.schedule.at(1).unwrap().batches();
    for batch in &later {
        assert!(blocks.iter().all(|b| batch.iter().any(|p| b.contains(p))), "global mixes every block");
    }
}

#[test]
fn a_global_chain_with_yielding_and_small_chunks_delivers_the_same_bytes() {
    for yielding in [false, true] {
        let mut s = Setting::peer(3, 200);
        s.yielding = yielding;
        s.chunk_bytes = 1000;
        let mut job = Job::new(&format!("global-{yielding}"), &s);
        let mut source = job.source();
        for epoch in 0..3u64 {
            let outputs = job.epoch(epoch, &mut source);
            for out in &outputs {
                ready(out, epoch).unwrap();
            }
            job.check_holds(epoch);
        }
    }
}

#[test]
fn a_yielding_rank_posts_nothing_while_its_all_reduce_is_in_flight() {
    let mut s = Setting::peer(2, 200);
    s.yielding = true;
    let mut job = Job::new("yield", &s);
    let mut source = job.source();
    // An all-reduce in flight as epoch 0 is asked for: the caller waits, nothing is held.
    for r in 0..2 {
        job.hub.input(r, Input::AllReduceBegan);
    }
    let outputs = job.epoch(0, &mut source);
    ready(&outputs[0], 0).unwrap();
    // Epoch 1's delivery started at once, and holds while the all-reduce is in flight.
    job.hub.advance(1.0, &mut source);
    for r in 0..2 {
        job.hub.input(r, Input::AllReduceEnded { wire_bytes: 1e6 });
    }
    job.hub.run(&mut source);
    let at = job.schedule.at(1).unwrap();
    for r in 0..2 {
        job.hub.input(r, Input::SetEpoch(at.boxed_copy()));
    }
    job.hub.run(&mut source);
    for r in 0..2 {
        let f = ready(&job.hub.take_outputs(r), 1).unwrap();
        assert_eq!(f.count_of("posts_during_allreduce"), 0);
        assert_eq!(f.count_of("yields"), 1, "rank {r} held its delivery once");
        assert!(matches!(f.get("yield_seconds"), Some(ubershuffle_plane::Figure::Real(s)) if *s >= 1.0));
        assert!(f.count_of("delivery_posts") > 0);
        assert_eq!(f.count_of("allreduce_steps"), 1);
    }
    job.check_holds(1);
}

#[test]
fn ranks_given_other_settings_or_data_are_told_before_anything_moves() {
    let s = Setting::peer(3, 50);
    let mut job = Job::with_configs("settings", &s, |r, mut c| {
        if r == 1 {
            c.settings[0].1 = "4".into();
        }
        c
    });
    let outputs = job.epoch(0, &mut job.source());
    for (r, out) in outputs.iter().enumerate() {
        let e = failure(out).unwrap_or_else(|| panic!("rank {r} was not told"));
        let text = e.to_string();
        assert!(matches!(e, PlaneError::Mismatch(_)), "{text}");
        assert!(text.contains("seed differs between rank") && text.contains("ShuffleGroup"), "{text}");
    }
    assert_eq!(job.source().reads.iter().sum::<u64>(), 0);

    let mut job = Job::with_configs("store-error", &s, |r, mut c| {
        if r == 2 {
            c.store_error = Some("/dev/shm/x: 100 bytes of records do not fit".into());
        }
        c
    });
    let outputs = job.epoch(0, &mut job.source());
    for (r, out) in outputs.iter().enumerate() {
        let text = failure(out).unwrap().to_string();
        let want = if r == 2 { "/dev/shm/x" } else { "rank 2: /dev/shm/x" };
        assert!(text.starts_with(want), "rank {r}: {text}");
    }
}

/// A source whose rank 1 reads other bytes (its content digest differs).
struct OtherContent(common::Source);

impl ubershuffle_plane::hub::Caller for OtherContent {
    fn read(&mut self, rank: usize, ids: &[u32]) -> Result<(u64, u64), String> {
        self.0.read(rank, ids)
    }
    fn content(&mut self, rank: usize) -> u64 {
        7 + u64::from(rank == 1)
    }
}

#[test]
fn ranks_reading_other_bytes_are_told() {
    let s = Setting::peer(3, 50);
    let mut job = Job::new("content", &s);
    let at = job.schedule.at(0).unwrap();
    for r in 0..3 {
        job.hub.input(r, Input::SetEpoch(at.boxed_copy()));
    }
    job.hub.run(&mut OtherContent(job.source()));
    for r in 0..3 {
        let text = failure(&job.hub.take_outputs(r)).unwrap().to_string();
        assert!(text.contains("differ in content"), "{text}");
    }
}

#[test]
fn a_killed_rank_is_named_at_once_and_a_frozen_one_after_the_timeout() {
    let s = Setting::peer(4, 200);
    let mut job = Job::new("killed", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    job.hub.kill(2);
    for r in [0, 1, 3] {
        let e = failure(&job.hub.take_outputs(r)).unwrap();
        assert!(matches!(e, PlaneError::PeerLost { rank: 2, .. }), "{e}");
        assert!(e.to_string().contains("rank 2's connection ended"), "{e}");
    }

    let mut job = Job::new("frozen", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    let _frozen = job.hub.freeze(1);
    job.hub.run(&mut source);
    let frozen_at = job.hub.now();
    job.hub.advance(9.9, &mut source);
    for r in [0, 2, 3] {
        assert!(failure(&job.hub.take_outputs(r)).is_none(), "not before the timeout");
    }
    job.hub.advance(0.2, &mut source);
    assert!(job.hub.now() - frozen_at <= 10.1 + 1e-9);
    for r in [0, 2, 3] {
        let e = failure(&job.hub.take_outputs(r)).unwrap();
        assert!(matches!(e, PlaneError::Silent { rank: 1, .. }), "{e}");
        let PlaneError::Silent { seconds, .. } = e else { unreachable!() };
        // Its last message left when it froze; it is named once the timeout has passed, at
        // the next timer (within a period).
        assert!((10.0..=10.0 + 1.0).contains(&seconds), "{seconds}");
    }
}

#[test]
fn a_peer_that_closes_is_named_by_the_ranks_that_need_it() {
    let s = Setting::peer(3, 200);
    let mut job = Job::new("close", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    // Rank 0 closes once epoch 1's records were delivered ahead: epoch 1 still comes, the
    // delivery of epoch 2 that starts with it needs rank 0.
    job.hub.input(0, Input::Close);
    job.hub.run(&mut source);
    let at = job.schedule.at(1).unwrap();
    for r in [1, 2] {
        job.hub.input(r, Input::SetEpoch(at.boxed_copy()));
    }
    job.hub.run(&mut source);
    for r in [1, 2] {
        let out = job.hub.take_outputs(r);
        ready(&out, 1).unwrap();
        let e = failure(&out).unwrap();
        assert!(matches!(e, PlaneError::PeerClosed { rank: 0, .. }), "{e}");
        assert!(e.to_string().contains("rank 0 closed its ShuffleGroup while rank"), "{e}");
    }
}

#[test]
fn a_chain_of_failures_names_the_first() {
    let s = Setting::peer(3, 200);
    let mut job = Job::new("chain", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    let _frozen = job.hub.freeze(2);
    job.hub.advance(12.0, &mut source);
    for r in [0, 1] {
        let e = failure(&job.hub.take_outputs(r)).unwrap();
        // Either rank may time out first; the other hears its give-up, which names rank 2.
        assert!(e.to_string().contains("rank 2 has not been heard from"), "{e}");
    }
}

#[test]
fn a_peer_sending_beyond_its_credit_or_garbage_is_named() {
    let s = Setting::peer(2, 100);
    let mut job = Job::new("hostile", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    // Rank 1 "sends" bytes for epoch 1 that rank 0 never granted.
    let data = Message::Data { epoch: 1, offset: 0, bytes: &[0; 10] }.encode();
    let mut job2 = job;
    job2.hub.input(0, Input::Message { from: 1, bytes: data });
    let e = failure(&job2.hub.take_outputs(0));
    // Epoch 1's delivery at rank 0 takes it: either its stream from rank 1 has no credit, or
    // it has no bytes to receive at all.
    let e = e.unwrap();
    assert!(matches!(e, PlaneError::Protocol { rank: 1, .. }), "{e}");
    assert!(!e.to_string().contains('\n'));

    let mut job = Job::new("garbage", &s);
    job.hub.input(1, Input::Message { from: 0, bytes: vec![250, 1, 2] });
    let e = failure(&job.hub.take_outputs(1)).unwrap();
    assert!(e.to_string().contains("rank 0 broke the protocol (an unreadable message"), "{e}");
}

#[test]
fn moves_agree_with_every_stream_at_both_ends() {
    // The hub's streams are Moves' lists: a rank's view and its peer's agree.
    let index = ubershuffle_codes::RecordIndex::from_sizes([5u64; 40]).unwrap();
    let holdings: Vec<Holding> = (0..4).map(|r| Holding::Some((r * 10..r * 10 + 10).collect())).collect();
    let targets: Vec<Holding> =
        (0..4).map(|r| Holding::Some(((r + 1) % 4 * 10..(r + 1) % 4 * 10 + 10).collect())).collect();
    let views: Vec<Moves> =
        (0..4).map(|r| Moves::plan(&index, &holdings, &targets, r as usize).unwrap()).collect();
    for a in 0..4 {
        for b in 0..4 {
            assert_eq!(views[a].sends_to(b), views[b].recvs_from(a));
        }
    }
}

#[test]
fn a_jump_catches_up_from_what_every_rank_holds_whatever_order_the_messages_take() {
    let s = Setting::peer(3, 300);
    let mut job = Job::new("jump", &s);
    let mut source = job.source();
    job.epoch(0, &mut source);
    // Every rank jumps to epoch 3 (a resume): rank 1's word to rank 0 comes last, so the other
    // ranks' credit reaches rank 0 before it knows every holding.
    job.hub.delay(1, 0);
    let at = job.schedule.at(3).unwrap();
    for r in 0..3 {
        job.hub.input(r, Input::SetEpoch(at.boxed_copy()));
    }
    job.hub.run(&mut source);
    job.hub.release(1, 0);
    job.hub.run(&mut source);
    let mut moved = 0;
    for r in 0..3 {
        let f = ready(&job.hub.take_outputs(r), 3).unwrap();
        assert!(matches!(f.get("kind"), Some(ubershuffle_plane::Figure::Word("catch-up"))));
        moved += f.count_of("records_received");
    }
    assert!(moved > 0, "the jump moved records between ranks");
    job.check_holds(3);
    assert_eq!(source.reads.iter().sum::<u64>(), 300, "nothing read twice from the source");
}
