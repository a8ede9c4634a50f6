//! The link model of an emulated in-process cluster: single-ported nodes (the UberShuffle
//! paper's Section 3.1) on a switch.
//!
//! Each node has an uplink (its send port) and a downlink (its receive port), each carrying
//! one message at a time at [`LinkShaping::bytes_per_second`]. A message of `b` bytes sent at
//! emulated time `t` leaves the uplink during `[s, s + b/B]`, `s` the later of `t` and the end
//! of the sender's previous message; the send returns at `s + b/B` (a node's processor and its
//! port do not overlap). It crosses the receiver's downlink during `[r, r + b/B]`, `r` the later
//! of `s` and the end of the previous message through that downlink (cut-through: the switch
//! forwards as the bytes come, and queues what meets a busy downlink), and arrives
//! [`LinkShaping::latency`] after its last byte: `r + b/B + latency`. The receiver's clock
//! becomes the later of its own time and the arrival.
//!
//! Nothing sleeps: a message is delivered to the receiver's inbox at once in real time and its
//! times exist only in its stamp and the two clocks. A downlink takes messages in the order its
//! rank receives them (an any-source receive, in the order they left their senders); a real
//! switch takes them in the order they reach it. The epoch loop receives in sending order, so
//! the two agree there (see `docs/training-runs.md`).

use std::time::Duration;

use crate::TransportError;
use crate::mailbox::Stamp;

/// The shape of every link of an emulated in-process cluster: [`LinkShaping::new`] or
/// [`LinkShaping::gbit_per_second`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct LinkShaping {
    /// Bytes per second through each node's send port and each node's receive port.
    pub bytes_per_second: f64,
    /// Delay between a message's last byte leaving and its arrival.
    pub latency: Duration,
}

impl LinkShaping {
    /// Links of `bytes_per_second` through each port, each message arriving `latency` after
    /// its last byte left.
    pub fn new(bytes_per_second: f64, latency: Duration) -> LinkShaping {
        LinkShaping { bytes_per_second, latency }
    }

    /// Links of `gbit` gigabits per second (1 Gbit/s = 125 000 000 bytes/s), no latency.
    pub fn gbit_per_second(gbit: f64) -> LinkShaping {
        LinkShaping { bytes_per_second: gbit * 1e9 / 8.0, latency: Duration::ZERO }
    }

    /// The time a message of `len` bytes occupies a port (saturating at [`Duration::MAX`]).
    pub fn transfer_time(&self, len: usize) -> Duration {
        Duration::try_from_secs_f64(len as f64 / self.bytes_per_second).unwrap_or(Duration::MAX)
    }

    pub(crate) fn check(&self) -> Result<(), TransportError> {
        if !(self.bytes_per_second.is_finite() && self.bytes_per_second > 0.0) {
            return Err(TransportError::Setup(format!(
                "link rate must be a positive number of bytes per second, got {}",
                self.bytes_per_second
            )));
        }
        Ok(())
    }
}

/// One node's two ports on the emulated timeline: when each is next free.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ports {
    uplink_free: Duration,
    downlink_free: Duration,
}

impl Ports {
    /// Sends `len` bytes at emulated time `at`: the message's stamp. The uplink is busy until
    /// the stamp's end, which is when the send returns.
    pub(crate) fn send(&mut self, shaping: &LinkShaping, at: Duration, len: usize) -> Stamp {
        let sent = at.max(self.uplink_free);
        let transfer = shaping.transfer_time(len);
        self.uplink_free = sent.saturating_add(transfer);
        Stamp { sent, transfer }
    }

    /// When a message with `stamp` would arrive through this node's downlink, were it received
    /// next.
    pub(crate) fn arrival(&self, shaping: &LinkShaping, stamp: Stamp) -> Duration {
        stamp.sent.max(self.downlink_free).saturating_add(stamp.transfer).saturating_add(shaping.latency)
    }

    /// Receives a message with `stamp` through the downlink; returns its arrival.
    pub(crate) fn receive(&mut self, shaping: &LinkShaping, stamp: Stamp) -> Duration {
        let arrival = self.arrival(shaping, stamp);
        self.downlink_free = arrival.saturating_sub(shaping.latency);
        arrival
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ports_carry_one_message_at_a_time() {
        let link = LinkShaping::new(1000.0, MS); // 1 byte per ms
        let mut a = Ports::default();
        let first = a.send(&link, Duration::ZERO, 10);
        let second = a.send(&link, 5 * MS, 10); // the uplink is busy until 10 ms
        assert_eq!((first.sent, second.sent, second.transfer), (Duration::ZERO, 10 * MS, 10 * MS));
        let mut c = Ports::default();
        // A message from another sender that left at 2 ms, received first, delays the next.
        let other = Stamp { sent: 2 * MS, transfer: 10 * MS };
        assert_eq!(c.receive(&link, other), 13 * MS);
        assert_eq!(c.receive(&link, first), 23 * MS);
        assert_eq!(c.receive(&link, second), 33 * MS);
    }
}
