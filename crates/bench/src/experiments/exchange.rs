//! `exchange`: the data plane of `ubershuffle.Exchange` on real sockets. A master
//! ([`ubershuffle_runtime::exchange::serve`]) delivers 4 KiB records to 4 ranks over loopback
//! TCP, each rank a worker of the runtime on a thread of its own with a sink that checks every
//! record it receives against the data set, for the policies partial-local 0.3 and global.
//!
//! Checked every epoch (the run fails otherwise): the master's data bytes equal the plan's
//! transmissions times the record size plus the stated header of each data message
//! ([`ubershuffle_runtime::protocol::data_chunk_framing`]), to the byte; the coded ratio equals
//! the plan's (the epoch chain planned alone, as `ubershuffle plan --policy ... --epochs` does);
//! every rank received exactly the records its batch lacked, each byte as in the data set.
//! The Python side's comparison with `ubershuffle run --transport tcp` is
//! `python/benchmarks/bench_exchange.py` (results/exchange-vs-run.csv).

use std::sync::mpsc::channel;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use ubershuffle_codes::Records;
use ubershuffle_core::PlannerOptions;
use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::exchange::{Delivery, RecordSink, ServeOptions, Serving, serve};
use ubershuffle_runtime::protocol::data_chunk_framing;
use ubershuffle_runtime::{EpochMetrics, RuntimeError, WorkerOptions, run_worker_with};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};

use super::Context;
use crate::report::{Report, Row, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "exchange";
/// What it shows.
pub const ABOUT: &str = "the exchange's data plane over loopback TCP: 4 ranks, 4 KiB records, the master's bytes against the plan's transmissions, to the byte";

const RANKS: usize = 4;
const WIDTH: usize = 4096;
const ALPHA: f64 = 0.5;
const SEED: u64 = 1;
const SCHEME: &str = "coded";

/// One epoch of one policy.
#[derive(Clone, Debug, Serialize)]
struct EpochRow {
    policy: String,
    epoch: usize,
    transmissions: usize,
    uncoded_transmissions: usize,
    coded_ratio: f64,
    plan_ratio: f64,
    payload_bytes: u64,
    framing_bytes: u64,
    data_bytes: u64,
    records_checked: usize,
    transmit_s: f64,
    decode_s: f64,
    delivery_s: f64,
}

/// Times depend on the machine; counts and bytes must repeat exactly.
impl Row for EpochRow {
    const MACHINE_COLUMNS: &'static [&'static str] = &["transmit_s", "decode_s", "delivery_s"];
}

/// A rank's sink: checks every new record against the data set and counts them per epoch.
struct Checking {
    truth: Records,
    checked: Vec<(u32, usize)>,
}

impl RecordSink for Checking {
    fn epoch(&mut self, d: Delivery<'_>) -> Result<(), RuntimeError> {
        if let Some(id) = d.first_differing(&self.truth)? {
            return Err(RuntimeError::WorkerFailed { worker: 0, message: format!("record {id} differs") });
        }
        self.checked.push((d.epoch, d.new_ids.len()));
        Ok(())
    }
}

/// Runs both policies.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let (points, epochs) = if ctx.quick { (1024, 3) } else { (2048, 6) };
    let mut rows = Vec::new();
    for (policy, fraction) in [("partial-local", Some(0.3)), ("global", None)] {
        rows.extend(measure(ExchangePolicy::new(policy, fraction)?, points, epochs)?);
    }
    let summary =
        summary(&rows, points) + &ctx.quick_note("1024 records and 3 epochs; the full run 2048 and 6");
    Ok(Report::new(summary).table(format!("{NAME}.csv"), &rows)?)
}

/// The plan's transmissions and uncoded ones per epoch, the chain planned alone.
fn planned(policy: ExchangePolicy, points: usize, epochs: usize) -> anyhow::Result<Vec<(usize, usize)>> {
    let planner = super::planner(SCHEME, &PlannerOptions::default())?;
    let mut chain = EpochChain::new(ChainParams::new(RANKS, points, policy, SEED).with_alpha(ALPHA)?)?;
    let live: Vec<usize> = (0..RANKS).collect();
    let mut out = Vec::new();
    for _ in 0..epochs {
        let p = chain.draw(&live, 0)?.plan(planner.as_ref(), None)?;
        out.push((p.plan.len(), p.instance.uncoded_transmissions()));
        chain.commit(&p);
    }
    Ok(out)
}

/// One policy: the master here, the ranks on threads, every epoch checked.
fn measure(policy: ExchangePolicy, points: usize, epochs: usize) -> anyhow::Result<Vec<EpochRow>> {
    let records = Records::random(points, WIDTH, SEED)?;
    let config = TcpConfig::new(format!("{NAME}-{SEED}")).with_timeout(Duration::from_secs(30));
    let listener = MasterListener::bind("127.0.0.1:0", config.clone())?;
    let addr = listener.local_addr()?.to_string();
    let (done, checked) = channel();
    for _ in 0..RANKS {
        let (addr, config, done, truth) = (addr.clone(), config.clone(), done.clone(), records.clone());
        std::thread::spawn(move || {
            let outcome = (|| -> anyhow::Result<Vec<(u32, usize)>> {
                let mut t = connect_worker(&addr, &config)?;
                if let ClusterJob::EpochLoop { timeout, .. } = ClusterJob::receive(&mut t)? {
                    t.set_timeout(timeout);
                }
                let mut sink = Checking { truth, checked: Vec::new() };
                run_worker_with(t, &WorkerOptions::default(), &mut sink)?;
                Ok(sink.checked)
            })();
            let _ = done.send(outcome);
        });
    }
    drop(done);
    let mut options = ServeOptions::new(RANKS, ALPHA);
    (options.policy, options.scheme, options.seed, options.epochs) = (policy, SCHEME.into(), SEED, epochs);
    options.timeout = config.timeout;
    let mut metrics: Vec<EpochMetrics> = Vec::new();
    let serving = Serving::prepare(records, &options).context("preparing the exchange")?;
    serve(listener, serving, &mut |m| metrics.push(m.clone())).context("serving")?;
    let mut per_epoch = vec![0usize; epochs + 1];
    for rank in checked.iter() {
        for (epoch, n) in rank? {
            per_epoch[epoch as usize] += n;
        }
    }
    let plan = planned(policy, points, epochs)?;
    metrics.iter().zip(plan).map(|(m, p)| row(policy, m, p, per_epoch[m.epoch])).collect()
}

/// The epoch's row, after its checks.
fn row(
    policy: ExchangePolicy,
    m: &EpochMetrics,
    plan: (usize, usize),
    checked: usize,
) -> anyhow::Result<EpochRow> {
    let packets = m.broadcast_packets + m.unicast_packets;
    // The sum of `data_chunk_framing` over the epoch's messages: its fixed part per message,
    // its part per packet, and a kind byte per point-to-point message.
    let fixed = data_chunk_framing(0, false);
    let framing = (fixed * m.data_messages
        + (data_chunk_framing(1, false) - fixed) * packets
        + m.unicast_messages) as u64;
    let expected = (m.transmissions * WIDTH) as u64 + framing;
    if m.data_bytes != expected || (m.transmissions, m.uncoded_transmissions) != plan {
        bail!(
            "{} epoch {}: {} data bytes (expected {expected}), {:?} against the plan's {plan:?}",
            policy.name(),
            m.epoch,
            m.data_bytes,
            (m.transmissions, m.uncoded_transmissions)
        );
    }
    if checked != m.uncoded_transmissions {
        bail!(
            "{} epoch {}: the ranks received {checked} records, they lacked {}",
            policy.name(),
            m.epoch,
            m.uncoded_transmissions
        );
    }
    Ok(EpochRow {
        policy: policy.name().to_string(),
        epoch: m.epoch,
        transmissions: m.transmissions,
        uncoded_transmissions: m.uncoded_transmissions,
        coded_ratio: m.transmissions as f64 / m.uncoded_transmissions as f64,
        plan_ratio: plan.0 as f64 / plan.1 as f64,
        payload_bytes: m.payload_bytes,
        framing_bytes: framing,
        data_bytes: m.data_bytes,
        records_checked: checked,
        transmit_s: m.transmit_seconds,
        decode_s: m.decode_seconds,
        delivery_s: m.epoch_seconds - m.plan_seconds - m.verify_seconds,
    })
}

fn summary(rows: &[EpochRow], points: usize) -> String {
    let table = ["partial-local", "global"].iter().map(|&p| {
        let of = |f: fn(&EpochRow) -> f64| median(rows.iter().filter(|r| r.policy == p).map(f));
        vec![
            p.to_string(),
            format!("{:.3}", of(|r| r.coded_ratio)),
            format!("{:.0}", of(|r| r.data_bytes as f64)),
            format!("{:.0}", of(|r| r.framing_bytes as f64)),
            format!("{:.4}", of(|r| r.delivery_s)),
        ]
    });
    format!(
        "{RANKS} ranks (threads of this process, each a worker of the runtime on its own TCP \
         connection) receive {points} records of {WIDTH} bytes by `{SCHEME}` delivery, caching \
         alpha = {ALPHA}. Every epoch the master's data bytes equal the plan's transmissions x \
         {WIDTH} plus the stated header of its data messages, the coded ratio equals the plan's, \
         and the ranks receive exactly the records their batches lacked, each checked byte for \
         byte (the run fails otherwise). Medians over epochs:\n\n{}",
        markdown_table(&["policy", "coded / uncoded", "data bytes", "of which headers", "delivery s"], table)
    )
}
