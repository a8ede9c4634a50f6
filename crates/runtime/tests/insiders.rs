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
fn a_worker_that_alters_the_pieces_it_relays_is_dropped_with_the_receiver_it_accuses() {
    // Worker 1 (rank 2) flips a byte of every piece it forwards: worker 2 (rank 3), next in
    // the ring, finds the first one off the root's digest in epoch 1's model broadcast. The
    // root cannot tell which of the two lies, so both go (the reference: both leave there).
    let hostile = run(WORKERS, EPOCHS, &[(1, Act::Collectives(Misbehaviour::FlipRelayed))]);
    let reference = run(WORKERS, EPOCHS, &[(1, Act::ExitAtEpoch(1)), (2, Act::ExitAtEpoch(1))]);
    assert_same_course(&hostile, &reference, &[1, 2]);
    assert!(hostile.epochs.iter().all(|e| e.loss.is_finite()));
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
