//! A worker that floods the master with frames no one waits for (issue 27, item 5 (e)): its
//! link ends once the master holds more of its bytes unread than the job allows (4 updates
//! plus 64 KiB each: 262 452 bytes for this job), it is dropped as a lost worker, the run finishes as
//! the reference in which it departs at the same point, and the master's memory stays
//! bounded. Alone in its binary, so that the process's peak resident memory is this run's.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod insider_harness;

use insider_harness::{Act, Wire, assert_same_course, run};

/// The process's peak resident memory (`VmHWM`), in bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// The flood: 4096 frames of 60 KiB (240 MiB), each below the master's frame bound.
const FLOOD: Wire = Wire::Flood { frames: 4096, bytes: 60 * 1024 };
/// How much the peak resident memory may grow over the reference run's.
const BOUND: u64 = 48 << 20;

#[cfg(target_os = "linux")]
#[test]
fn a_flood_of_frames_no_one_waits_for_ends_its_senders_link_and_memory_stays_bounded() {
    let reference = run(4, 3, &[(1, Act::Wire(Wire::LeaveBeforeAck, 2))]);
    let before = peak_resident_bytes();
    let hostile = run(4, 3, &[(1, Act::Wire(FLOOD, 2))]);
    let grown = peak_resident_bytes().saturating_sub(before);
    eprintln!("peak resident memory grew by {grown} bytes during the flood");
    assert!(grown < BOUND, "the peak resident memory grew by {grown} bytes during the flood");
    assert_same_course(&hostile, &reference, &[1]);
}
