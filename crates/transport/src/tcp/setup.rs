//! Setting up a TCP cluster, the master's side: admitting workers, welcoming them, starting
//! them (the workers' side is [`super::join`]).

use std::net::{SocketAddr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

use super::admission::{Admission, Event, Refusal};
use super::conn::Conn;
use super::handshake::{self, Welcome};
use super::joiner::Joiner;
use super::noise::{self, Context, RunSecret};
use super::setup_io::{at_least, write_before, write_tagged_before};
use super::{Listening, TcpConfig, TcpTransport};
use crate::TransportError;
use crate::frame::FrameKind;

/// How long a refusal to a worker that is not needed may take to write.
const POLL: Duration = Duration::from_millis(20);
/// Pause between polls of pending handshakes when nothing moved.
pub(crate) const IDLE_POLL: Duration = Duration::from_millis(2);
/// Handshakes the master keeps pending at once; a newer connection drops the oldest.
pub const MAX_PENDING_HANDSHAKES: usize = 64;

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransportError {
    let context = context.into();
    move |source| TransportError::Io { context, error: source }
}

/// The master's listening socket, before the workers have joined.
#[derive(Debug)]
pub struct MasterListener {
    listener: TcpListener,
    config: TcpConfig,
}

impl MasterListener {
    /// Listens on `addr` (`127.0.0.1:0` picks a free port); refuses an empty token first.
    pub fn bind(addr: &str, config: TcpConfig) -> Result<MasterListener, TransportError> {
        noise::check_token(&config.token)?;
        let listener = TcpListener::bind(addr).map_err(io_error(format!("cannot listen on {addr}")))?;
        Ok(MasterListener { listener, config })
    }

    /// The address workers connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.listener.local_addr().map_err(io_error("reading the listening address"))
    }

    /// Waits for `workers` workers that prove they know the token, turning away others (each
    /// reported to `on_refused`), then starts the cluster; returns rank 0.
    ///
    /// Handshakes run side by side, each within the timeout of its connection however its
    /// bytes trickle in, at most [`MAX_PENDING_HANDSHAKES`] at once. Admission ends at the
    /// join timeout. A worker that leaves after joining, before the start (before its welcome,
    /// or after it while the workers link up with each other), is replaced by the next one to
    /// join: the others are welcomed again once the places are filled (each reported to
    /// `on_refused`). Once all are in, the welcome and the workers' mesh have until the join
    /// timeout, or one timeout from then if that is later.
    pub fn accept_workers(
        self,
        workers: usize,
        on_refused: impl FnMut(&Refusal),
    ) -> Result<TcpTransport, TransportError> {
        self.accept_at_least(workers, workers, on_refused)
    }

    /// [`MasterListener::accept_workers`], starting at the join timeout with the workers that
    /// have joined if they are at least `min_workers`: they take ranks `1..=k`, and ranks
    /// `k+1..=workers` stay absent (the cluster's size is still `workers + 1`; every wait for an
    /// absent rank fails at once with [`TransportError::PeerGone`], as for a departed one). With
    /// `min_workers == workers` it is [`MasterListener::accept_workers`]. Fewer than
    /// `min_workers` at the join timeout is an error naming the workers that left during the
    /// join.
    pub fn accept_at_least(
        self,
        workers: usize,
        min_workers: usize,
        mut on_refused: impl FnMut(&Refusal),
    ) -> Result<TcpTransport, TransportError> {
        let config = self.config;
        if workers == 0 || workers >= handshake::MAX_RANKS {
            return Err(TransportError::Setup(format!(
                "the number of workers must be in 1..{}, got {workers}",
                handshake::MAX_RANKS
            )));
        }
        if !(1..=workers).contains(&min_workers) {
            return Err(TransportError::Setup(format!(
                "the least number of workers to start with must be in 1..={workers}, got {min_workers}"
            )));
        }
        noise::check_token(&config.token)?;
        let psk = noise::token_psk(&config.token);
        let mut join = Join {
            config: &config,
            secret: RunSecret(noise::random32()?),
            workers,
            min_workers,
            deadline: Instant::now() + config.join_timeout,
            admission: Admission::new(
                &self.listener,
                config.sealed,
                config.timeout,
                MAX_PENDING_HANDSHAKES,
                FrameKind::Hello,
                0,
                move |_| Some((Context::Join, psk)),
            )?,
            joined: Vec::new(),
            left: Vec::new(),
            on_refused: &mut on_refused,
        };
        let mut generation = 0u32;
        let (streams, addrs) = loop {
            join.admit()?;
            if let Some(started) = join.welcome(generation)? {
                break started;
            }
            generation = generation.wrapping_add(1) % noise::LIVE_JOIN;
        };
        let secret = join.secret;
        drop(join);
        let listening = Listening::Master { listener: self.listener, addrs, secret };
        TcpTransport::from_streams(0, workers + 1, config.broadcast, &config, streams, listening)
    }
}

/// The master's side of one join: admitting workers, welcoming them, and welcoming the others
/// again when one leaves before the start.
struct Join<'a, 'l> {
    config: &'a TcpConfig,
    /// This run's secret, from which every pair key of the workers' links is derived.
    secret: RunSecret,
    workers: usize,
    min_workers: usize,
    deadline: Instant,
    admission: Admission<'l>,
    /// Admitted workers, in rank order (welcomed ones first).
    joined: Vec<Joiner>,
    /// Workers that left after their welcome, for the message should the join fail.
    left: Vec<String>,
    on_refused: &'a mut dyn FnMut(&Refusal),
}

impl Join<'_, '_> {
    /// Turns a connection away: an event for the logs, then the caller's callback.
    fn refuse(&mut self, refusal: Refusal) {
        tracing::warn!(from = %refusal.from, reason = %refusal.reason, "connection refused");
        (self.on_refused)(&refusal);
    }

    /// Accepts and advances handshakes once; joined workers beyond `workers` are turned away.
    fn poll_admission(&mut self) -> Result<bool, TransportError> {
        let mut events = Vec::new();
        let moved = self.admission.poll(&mut events)?;
        for event in events {
            match event {
                Event::Admitted(a) if self.joined.len() < self.workers => self.joined.push(Joiner::new(a)),
                Event::Admitted(a) => {
                    let reason = "the cluster has all its workers";
                    let mut a = a;
                    let _ = write_before(
                        &mut a.conn,
                        Instant::now() + POLL,
                        FrameKind::Refused,
                        0,
                        reason.as_bytes(),
                        "",
                    );
                    self.refuse(Refusal { from: a.from, reason: reason.into() });
                }
                Event::Refused(r) => (self.on_refused)(&r),
            }
        }
        Ok(moved)
    }

    /// Drops the joined workers that left (reported); those welcomed before are remembered.
    fn drop_departed(&mut self, mut departed: Vec<(usize, String)>) {
        departed.sort_by_key(|(k, _)| std::cmp::Reverse(*k));
        for (k, why) in departed {
            let j = self.joined.remove(k);
            let who = j.describe();
            let reason = match j.rank {
                Some(_) => {
                    self.left.push(format!("{who}: {why}"));
                    format!(
                        "left after its welcome ({why}), before the cluster started; waiting for another worker"
                    )
                }
                None => {
                    format!(
                        "left after joining ({why}), before the cluster started; waiting for another worker"
                    )
                }
            };
            self.refuse(Refusal { from: j.admitted.from, reason });
        }
    }

    /// Admits workers until `workers` have joined, or until the join timeout if at least
    /// `min_workers` have.
    fn admit(&mut self) -> Result<(), TransportError> {
        while self.joined.len() < self.workers {
            if Instant::now() >= self.deadline {
                if self.joined.len() >= self.min_workers {
                    break;
                }
                let pending = match self.admission.pending() {
                    0 => String::new(),
                    n => format!(" ({n} handshakes unfinished)"),
                };
                let left = match self.left.len() {
                    0 => String::new(),
                    _ => format!("; left during the join: {}", self.left.join("; ")),
                };
                return Err(TransportError::Setup(format!(
                    "only {} of {} workers joined within {:?}{pending}{left}",
                    self.joined.len(),
                    self.workers,
                    self.config.join_timeout,
                )));
            }
            let moved = self.poll_admission()?;
            let departed: Vec<(usize, String)> = self
                .joined
                .iter_mut()
                .enumerate()
                .filter_map(|(k, j)| j.poll().err().map(|e| (k, e)))
                .collect();
            self.drop_departed(departed);
            if !moved {
                thread::sleep(IDLE_POLL);
            }
        }
        Ok(())
    }

    /// Welcomes the joined workers as the welcome of `generation` and waits for each to report
    /// its links to the others; then starts them. `None` when one left meanwhile (the others
    /// are welcomed again once it is replaced).
    /// Returns every rank's link and peer-listening address.
    #[allow(clippy::type_complexity)]
    fn welcome(
        &mut self,
        generation: u32,
    ) -> Result<Option<(Vec<Option<Conn>>, Vec<String>)>, TransportError> {
        let config = self.config;
        let start_by = at_least(self.deadline, config.timeout);
        let size = self.workers + 1;
        let count = self.joined.len();
        // Ranks past the joined workers stay absent: no address, no connection.
        let mut addrs = vec![String::new()];
        addrs.extend(self.joined.iter().map(|j| j.admitted.listen.clone()));
        addrs.resize(size, String::new());
        let mut departed = Vec::new();
        for (k, j) in self.joined.iter_mut().enumerate() {
            let rank = k + 1;
            j.rank = Some(rank);
            let welcome = Welcome {
                rank: rank as u32,
                size: size as u32,
                method: config.broadcast,
                generation,
                addrs: addrs.clone(),
                keys: noise::welcome_keys(&self.secret.0, rank as u32, generation, &vec![0; size]),
            };
            let bytes = welcome.to_bytes();
            if let Err(e) = write_before(&mut j.admitted.conn, start_by, FrameKind::Welcome, 0, &bytes, "") {
                departed.push((k, format!("did not take its welcome ({e})")));
            }
        }
        // Every worker reports its mesh built; a worker that leaves meanwhile, or has never said
        // that it took a welcome one timeout after this one (frozen, cut off), is replaced. One
        // that answered an earlier welcome may be held up by a frozen peer until its own
        // peer handshake times out: it is waited for up to the join's deadline.
        let take_by = Instant::now() + config.timeout;
        loop {
            for (k, j) in self.joined.iter_mut().enumerate().take(count) {
                if departed.iter().all(|(d, _)| *d != k)
                    && let Err(why) = j.poll()
                {
                    departed.push((k, why));
                }
            }
            if departed.is_empty() && Instant::now() >= take_by {
                let silent = |(k, j): (usize, &Joiner)| (!j.answered()).then_some(k);
                for k in self.joined.iter().take(count).enumerate().filter_map(silent).collect::<Vec<_>>() {
                    let why =
                        format!("did not answer its welcome within {:?} (frozen or cut off)", config.timeout);
                    departed.push((k, why));
                }
            }
            if !departed.is_empty() {
                self.drop_departed(departed);
                return Ok(None);
            }
            if self.joined.iter().take(count).all(|j| j.ready_for(generation)) {
                break;
            }
            if Instant::now() >= start_by {
                let late: Vec<String> = self
                    .joined
                    .iter()
                    .take(count)
                    .filter(|j| !j.ready_for(generation))
                    .map(Joiner::describe)
                    .collect();
                return Err(TransportError::Setup(format!(
                    "{} did not report links to the other workers within {:?} of the join timeout's start",
                    late.join(", "),
                    config.join_timeout.max(config.timeout),
                )));
            }
            // Workers that join meanwhile wait behind the welcomed ones (replacements).
            if !self.poll_admission()? {
                thread::sleep(IDLE_POLL);
            }
        }
        let mut streams: Vec<Option<Conn>> = vec![None];
        let spares = self.joined.split_off(count);
        for mut j in self.joined.drain(..) {
            let who = j.describe();
            // A worker that leaves now is lost at once once running (its link reports it gone).
            let _ = write_tagged_before(
                &mut j.admitted.conn,
                start_by,
                (FrameKind::Ready, 0, generation),
                &[],
                &who,
            );
            streams.push(Some(j.into_conn()));
        }
        for mut j in spares {
            let reason = "the cluster started without it";
            let _ = write_before(
                &mut j.admitted.conn,
                Instant::now() + POLL,
                FrameKind::Refused,
                0,
                reason.as_bytes(),
                "",
            );
            self.refuse(Refusal { from: j.admitted.from, reason: reason.into() });
        }
        streams.resize_with(size, || None);
        Ok(Some((streams, addrs)))
    }
}
