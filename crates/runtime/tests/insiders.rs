//! A worker that holds the token and misbehaves costs that worker, never the run (issue 27,
//! item 5 (b)-(d)): each hostile run finishes its epochs with the honest workers, epoch by
//! epoch as the reference run in which the hostile worker departs at the same point instead.
//! (The flood of (e) is in `insider_flood.rs`: it measures the process's memory alone.)

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod insider_harness;

use insider_harness::{Act, Wire, assert_same_course, run};
use ubershuffle_transport::insider::Misbehaviour;

const WORKERS: usize = 4;
const EPOCHS: usize = 3;

#[test]
fn a_worker_that_alters_the_pieces_it_relays_is_dropped_alone() {
    // Worker 1 (rank 2) flips a byte of every piece it forwards. In epoch 1's model broadcast
    // its ring successor, worker 2 (rank 3), finds the first one off the root's digest and
    // reports it: one word against another, so the master keeps both and restarts with the
    // next ring (ranks 1, 4, 3, 2), where worker 0 (rank 1) follows rank 2 and finds its
    // pieces altered too. Two receivers: worker 1 goes, alone; the epoch completes at its
    // third attempt over the others, and so does every later one.
    let hostile = run(WORKERS, EPOCHS, &[(1, Act::Collectives(Misbehaviour::FlipRelayed))]);
    assert_eq!(hostile.lost_workers, vec![1], "{:?}", hostile.epochs);
    assert_eq!(hostile.epochs[0].attempts, 3);
    assert_eq!(hostile.epochs[0].lost_workers, vec![1]);
    for e in &hostile.epochs {
        assert_eq!(e.updated_workers, vec![0, 2, 3], "epoch {}", e.epoch);
        assert!(e.loss.is_finite());
    }
    assert!(hostile.epochs[1..].iter().all(|e| e.attempts == 1));
}

#[test]
fn a_worker_that_accuses_its_ring_predecessors_falsely_is_dropped_alone() {
    // Worker 2 (rank 3) reports its predecessor's pieces altered at every broadcast: rank 2
    // in the first ring, rank 4 in the next. An honest receiver is wronged by one liar at a
    // time; a second peer accused costs the accuser, and its first accusation falls with it.
    let hostile = run(WORKERS, EPOCHS, &[(2, Act::Collectives(Misbehaviour::AccuseRelayer))]);
    assert_eq!(hostile.lost_workers, vec![2], "{:?}", hostile.epochs);
    assert_eq!(hostile.epochs[0].attempts, 3);
    for e in &hostile.epochs {
        assert_eq!(e.updated_workers, vec![0, 1, 3], "epoch {}", e.epoch);
    }
}

#[test]
fn forged_failure_reports_cost_their_reporter_not_the_named() {
    // Worker 1 reports, instead of acknowledging epoch 1's model broadcast, that a healthy
    // worker (rank 3), the master (rank 0) or a rank that does not exist (999) failed.
    let reference = run(WORKERS, EPOCHS, &[(1, Act::ExitAtEpoch(1))]);
    for named in [3, 0, 999] {
        let hostile = run(WORKERS, EPOCHS, &[(1, Act::Collectives(Misbehaviour::ReportFailed(named)))]);
        assert_same_course(&hostile, &reference, &[1]);
        assert_eq!(hostile.epochs[0].attempts, 2, "naming rank {named}");
    }
}

#[test]
fn a_malformed_acknowledgement_costs_its_sender_only() {
    let hostile = run(WORKERS, EPOCHS, &[(3, Act::Wire(Wire::MalformedAck, 2))]);
    let reference = run(WORKERS, EPOCHS, &[(3, Act::Wire(Wire::LeaveBeforeAck, 2))]);
    assert_same_course(&hostile, &reference, &[3]);
    assert_eq!(hostile.epochs[1].attempts, 1);
}

#[test]
fn repeated_and_stale_messages_cost_their_sender_only() {
    // An update report sent twice: the copy arrives in epoch 3 (as if it left before its
    // update of epoch 3). A flood of acknowledgements of a finished broadcast before its
    // acknowledgement of epoch 1's model broadcast (as if it left after that broadcast).
    let hostile = run(WORKERS, EPOCHS, &[(2, Act::Wire(Wire::RepeatUpdate, 2))]);
    let reference = run(WORKERS, EPOCHS, &[(2, Act::Wire(Wire::LeaveBeforeUpdate, 3))]);
    assert_same_course(&hostile, &reference, &[2]);
    let flood = Misbehaviour::FloodStale(4 * (WORKERS + 1) * (WORKERS + 1) + 65);
    let hostile = run(WORKERS, EPOCHS, &[(1, Act::Collectives(flood))]);
    let reference = run(WORKERS, EPOCHS, &[(1, Act::ExitAtEpoch(1))]);
    assert_same_course(&hostile, &reference, &[1]);
}

#[test]
fn bad_updates_and_failure_reports_cost_their_sender_only() {
    let reference = run(WORKERS, EPOCHS, &[(2, Act::Wire(Wire::LeaveBeforeUpdate, 2))]);
    assert_eq!(reference.epochs[1].updated_workers, vec![0, 1, 3]);
    for wire in [Wire::NanUpdate, Wire::PointsUpdate, Wire::FailedUpdate, Wire::MalformedUpdate] {
        let hostile = run(WORKERS, EPOCHS, &[(2, Act::Wire(wire, 2))]);
        assert_same_course(&hostile, &reference, &[2]);
    }
}
