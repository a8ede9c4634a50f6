//! The byte checks of a job: the plane's bytes against the plan, the rounds the store logged
//! against what the ranks received, and the kernel's counters against the plane's bytes and
//! their headers.

use crate::netns::rounds::Rounds;
use crate::netns::train::types::{Arm, Job, RankLog, Setting};

/// Bytes of headers each Ethernet frame of a TCP stream carries on the link: Ethernet 14, IPv4
/// 20 and TCP with the timestamp option 32 (what Linux sends by default).
pub const HEADER_BYTES: u64 = 66;
/// The IPv4 and TCP headers inside the MTU: a full frame carries `mtu - 52` bytes of payload.
pub const IP_TCP_HEADER_BYTES: u64 = 52;
/// How far a rank's kernel counter may be from the plane's bytes with their headers (the
/// issue's 2 %: the rest of the rank's traffic, requests, barriers, acknowledgements).
const COUNTER_TOLERANCE: f64 = 0.02;

/// The bytes a link counts for `payload` bytes of TCP payload: with `packets`, the packets the
/// kernel counted, each with [`HEADER_BYTES`] (segmentation offload on veth hands the counter
/// fewer, larger packets than frames of the MTU, and acknowledgements are packets too);
/// without (older logs), frames of `mtu`, every one full but the last.
pub fn wire_bytes(payload: u64, packets: Option<u64>, mtu: u32) -> u64 {
    let per_frame = u64::from(mtu).saturating_sub(IP_TCP_HEADER_BYTES).max(1);
    payload + packets.unwrap_or_else(|| payload.div_ceil(per_frame)) * HEADER_BYTES
}

/// The Ethernet header of a frame, beyond the MTU's bytes.
const ETHERNET_HEADER_BYTES: u64 = 14;

/// The store's answer to a training rank's request for a step: two int64s.
const ANSWER_BYTES: u64 = 16;

/// One byte check: what, and whether it held.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was checked, with the numbers.
    pub what: String,
    /// Whether it held.
    pub ok: bool,
}

/// The checks of a job's bytes against its plan (and of the kernel's counters against the
/// plane's).
pub fn byte_checks(job: &Job, setting: &Setting) -> Vec<Check> {
    let arm = job.arm.letter();
    let mut checks = Vec::new();
    let mut check = |ok: bool, what: String| checks.push(Check { what: format!("arm {arm}: {what}"), ok });
    let trainers = job.trainers();
    let Some(first) = trainers.first() else {
        check(false, "no training rank logged".into());
        return checks;
    };
    let epochs = setting.epochs;
    check(trainers.iter().all(|t| t.epochs.len() == epochs), format!("every rank logged {epochs} epochs"));
    match job.arm {
        Arm::D | Arm::E => {
            for (k, t) in trainers.iter().enumerate() {
                for (e, log) in t.epochs.iter().enumerate().skip(1) {
                    let want = first.chain_bytes.get(e - 1).and_then(|v| v.get(k)).copied();
                    check(
                        want == Some(log.bytes_received),
                        format!(
                            "rank {k} received {} plane bytes for epoch {e}, the plan {want:?}",
                            log.bytes_received
                        ),
                    );
                }
                let sent: u64 = t.epochs.iter().map(|l| l.bytes_sent).sum::<u64>()
                    + t.drained_bytes("bytes_sent").unwrap_or(0);
                let tx = t.end_counters.0.saturating_sub(t.start_counters.0);
                check(tx >= sent, format!("rank {k}'s link sent {tx} bytes, at least its plane's {sent}"));
            }
        }
        Arm::A | Arm::B | Arm::C => {
            let Some(store) = job.store() else {
                check(false, "no store logged".into());
                return checks;
            };
            store_checks(job, store, &trainers, setting, &mut check);
            if job.arm != Arm::B {
                // What TCP sent again (a segment dropped at a shaped port is received once
                // more): every node's retransmitted segments, each a full frame at most.
                let resent: u64 = job.ranks.iter().map(RankLog::retransmitted).sum::<u64>()
                    * (u64::from(setting.mtu) + ETHERNET_HEADER_BYTES);
                for (k, t) in trainers.iter().enumerate() {
                    uncoded_rank_checks(k, t, setting, resent, &mut check);
                }
            }
        }
        Arm::F => {
            let plane: u64 = trainers.iter().flat_map(|t| &t.epochs).map(|l| l.bytes_received).sum();
            check(plane == 0, format!("nothing moved on the plane ({plane} bytes)"));
        }
    }
    checks
}

/// The store's deliveries against the plan, the rounds it logged against what each rank
/// received, and the store's link against its plane bytes.
fn store_checks(
    job: &Job,
    store: &RankLog,
    trainers: &[&RankLog],
    setting: &Setting,
    check: &mut impl FnMut(bool, String),
) {
    let Some(first) = trainers.first() else { return };
    for f in store.served.iter().filter(|f| f.kind == "step" && f.epoch < setting.epochs) {
        let e = f.epoch;
        let chain: Option<u64> = first.chain_bytes.get(e.wrapping_sub(1)).map(|v| v.iter().sum());
        if f.sent == "whole" {
            // The engine's uncoded plan: each record once, whole, to the rank that lacks it.
            check(
                chain == Some(f.bytes_sent),
                format!(
                    "epoch {e}: the store sent {} bytes of whole records, the plan's {chain:?}",
                    f.bytes_sent
                ),
            );
            continue;
        }
        let packets = f.packets * f.segment_bytes;
        check(
            f.data_bytes + f.padding_bytes == packets,
            format!("epoch {e}: data {} + padding {} = packets {packets}", f.data_bytes, f.padding_bytes),
        );
        // Newer logs say what travels (each packet only to the ranks that decode it, the
        // uncoded ones as the records themselves); older ones sent every packet whole.
        let travelling = f.unicast_bytes + f.multicast_bytes;
        let wanted = if travelling > 0 { travelling } else { packets };
        let overhead = f.bytes_sent.saturating_sub(wanted);
        match f.part_bytes {
            // The engine's logs: the packets to the byte (the parts go in their own messages).
            Some(_) if f.sent == "coded" => check(
                f.bytes_sent == wanted,
                format!("epoch {e}: the store sent {} plane bytes for packets of {wanted}", f.bytes_sent),
            ),
            // The plane before the engine: the packets, the plan's parts and one answer per
            // rank, to the byte.
            Some(parts) => check(
                f.bytes_sent == wanted + parts + ANSWER_BYTES * setting.ranks as u64,
                format!(
                    "epoch {e}: the store sent {} plane bytes for packets of {wanted}, parts of the plan of {parts} and {} answers",
                    f.bytes_sent, setting.ranks
                ),
            ),
            None => check(
                f.bytes_sent >= wanted && overhead <= wanted / 20 + (64 << 10),
                format!("epoch {e}: the store sent {} plane bytes for packets of {wanted}", f.bytes_sent),
            ),
        }
        if job.arm == Arm::B {
            check(
                chain.is_some_and(|c| f.data_bytes <= c),
                format!("epoch {e}: coded data bytes {} at most the uncoded plan's {chain:?}", f.data_bytes),
            );
        } else {
            check(
                chain == Some(f.data_bytes),
                format!("epoch {e}: uncoded data bytes {} equal the plan's {chain:?}", f.data_bytes),
            );
        }
        if !f.has_rounds() {
            continue;
        }
        match Rounds::new(setting.ranks, &f.round_store_bytes, &f.round_relay_bytes) {
            Err(why) => check(false, format!("epoch {e}: the store's rounds: {why}")),
            Ok(rounds) => {
                for (k, t) in trainers.iter().enumerate() {
                    // The rounds' payload (the plan's part, the answer besides).
                    let got = t.epochs.get(e).map(|l| l.round_bytes_received.unwrap_or(l.bytes_received));
                    let logged = rounds.place_received(k);
                    check(
                        got == Some(logged),
                        format!(
                            "epoch {e}: rank {k} received {got:?} bytes in rounds, the store's rounds say {logged}"
                        ),
                    );
                }
            }
        }
    }
    let sent: u64 = store.served.iter().map(|f| f.bytes_sent).sum();
    let tx = store.end_counters.0.saturating_sub(store.start_counters.0);
    let ratio = tx as f64 / sent.max(1) as f64;
    check(
        (1.0..=1.1).contains(&ratio),
        format!("the store's link sent {tx} bytes for {sent} plane bytes (ratio {ratio:.4}, 1 to 1.1)"),
    );
}

/// An uncoded store arm's rank (a, c): what it received on the plane is exactly the records it
/// lacked, and (when the ranks did not train) its link received that plus the headers.
fn uncoded_rank_checks(
    k: usize,
    t: &RankLog,
    setting: &Setting,
    resent: u64,
    check: &mut impl FnMut(bool, String),
) {
    // The records themselves: a step's rounds (its plan's part besides), a catch-up's records.
    for (e, log) in t.epochs.iter().enumerate() {
        if let Some(records) = log.record_bytes_received {
            let payload = log.round_bytes_received.unwrap_or(log.bytes_received);
            check(
                payload == records,
                format!(
                    "rank {k} received {payload} bytes of records for epoch {e}, the records it lacked {records}"
                ),
            );
        }
    }
    let drained = t.drained_bytes("bytes_received");
    let payload = t.drained_bytes("round_bytes_received").or(drained);
    if let (Some(got), Some(records)) = (payload, t.drained_bytes("record_bytes_received")) {
        check(
            got == records,
            format!("rank {k} received {got} bytes of records at close, the records it lacked {records}"),
        );
    }
    // A rank that trains shares its link with DDP's gradients (and the model's first
    // broadcast), which the plane does not count: the kernel's counter says nothing then.
    let Some(from) = t.epochs.first().map(|l| l.counters_start.1).filter(|_| setting.idle()) else {
        return;
    };
    let plane = t.epochs.iter().map(|l| l.bytes_received).sum::<u64>() + drained.unwrap_or(0);
    let packets = t
        .epochs
        .first()
        .and_then(|l| l.packets_start)
        .zip(t.end_packets)
        .map(|(a, b)| b.1.saturating_sub(a.1));
    let expected = wire_bytes(plane, packets, setting.mtu);
    let rx = t.end_counters.1.saturating_sub(from);
    // Beyond the plane's bytes, at most what TCP sent again in the job.
    let ratio = rx.saturating_sub(resent).max(rx.min(expected)) as f64 / expected.max(1) as f64;
    check(
        (1.0 - COUNTER_TOLERANCE..=1.0 + COUNTER_TOLERANCE).contains(&ratio),
        format!(
            "rank {k}'s link received {rx} bytes for {plane} plane bytes, {expected} with headers and at most \
{resent} retransmitted (ratio {ratio:.4}, {:.2} to {:.2})",
            1.0 - COUNTER_TOLERANCE,
            1.0 + COUNTER_TOLERANCE
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_adds_headers_per_packet_counted_or_per_mss() {
        // MTU 1500: 1448 bytes of payload per frame.
        assert_eq!(wire_bytes(0, None, 1500), 0);
        assert_eq!(wire_bytes(1448, None, 1500), 1448 + 66);
        assert_eq!(wire_bytes(1449, None, 1500), 1449 + 2 * 66);
        assert_eq!(wire_bytes(1_000_000, None, 9000), 1_000_000 + 112 * 66);
        // The kernel's packets, when counted: 10 packets of headers.
        assert_eq!(wire_bytes(1_000_000, Some(10), 1500), 1_000_000 + 10 * 66);
    }
}
