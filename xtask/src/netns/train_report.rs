//! The report of `cargo xtask netns-train`: the ranks' logs turned into typed rows (one per
//! arm and epoch, and one per arm, epoch and node for the links), the bytes checked against
//! the plan, the emulator's prediction beside arms b and c, the goals of the issue measured,
//! and the CSVs, the chart of accuracy against wall time and results/README.md's section.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use ubershuffle_bench::report::chart::{LineChart, Series};
use ubershuffle_transport::BroadcastMethod;

use super::measure::BroadcastJob;
use super::model;
use super::train::{Arm, EpochLog, Job, RankLog, Setting, TrainRun};
use super::write_csv;

/// One arm's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The arm's letter.
    pub arm: char,
    /// Which run of the arm (0-based; `--repeats`).
    pub repeat: usize,
    /// What the arm is.
    pub setting: String,
    /// The epoch.
    pub epoch: usize,
    /// Training ranks.
    pub ranks: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// Data time exposed to training: the longest `set_epoch` wait over the ranks.
    pub exposed_s: f64,
    /// The longest epoch over the ranks (from `set_epoch` to the end of its training loop).
    pub epoch_s: f64,
    /// The delivery of this epoch's records (in the background of the epoch before), longest
    /// over the ranks.
    pub shuffle_s: f64,
    /// The emulator's time for the store's bytes of this epoch by pseudo-broadcast (b, c).
    pub model_shuffle_s: Option<f64>,
    /// Bytes the store's link sent and received during the epoch (kernel counters).
    pub store_tx_bytes: u64,
    /// Bytes the store's link received.
    pub store_rx_bytes: u64,
    /// Bytes every rank's link sent during the epoch, summed (kernel counters).
    pub ranks_tx_bytes: u64,
    /// Bytes every rank's link received, summed.
    pub ranks_rx_bytes: u64,
    /// Plane payload the store sent for this epoch's delivery.
    pub plane_store_sent_bytes: u64,
    /// Plane payload every rank received for this epoch's delivery, summed.
    pub plane_received_bytes: u64,
    /// Bytes of the records entering the ranks' holdings along the chain (the plan), summed.
    pub plan_bytes: Option<u64>,
    /// Padding bytes of the store's packets.
    pub padding_bytes: u64,
    /// Packets of the store's plan and the coded ones.
    pub packets: u64,
    /// Coded packets of the store's plan.
    pub coded_packets: u64,
    /// The most bytes a training rank holds.
    pub storage_bytes_per_rank: u64,
    /// Held-out accuracy after the epoch.
    pub held_out_accuracy: f64,
    /// Held-out loss after the epoch.
    pub held_out_loss: f64,
    /// Training loss of the epoch (mean over ranks).
    pub train_loss: f64,
    /// Seconds from the job's first barrier to the end of the epoch's evaluation.
    pub wall_s: f64,
    /// The store's profile of this epoch's delivery (store arms, epochs after the first):
    /// waiting for every rank's request before it.
    pub store_request_wait_s: Option<f64>,
    /// What the store's delivery waited for its plan (planned ahead, or then).
    pub store_plan_s: Option<f64>,
    /// The planner's own time, when the store planned ahead while the ranks trained.
    pub store_plan_ahead_s: Option<f64>,
    /// The store's encoding.
    pub store_encode_s: Option<f64>,
    /// The store's scatter (sending the pieces).
    pub store_scatter_s: Option<f64>,
    /// The store's waits on the plane's group.
    pub store_gloo_wait_s: Option<f64>,
    /// The training ranks' profile (the longest over the ranks): from the request to the
    /// store's answer.
    pub answer_wait_s: Option<f64>,
    /// Receiving the pieces from the store.
    pub rank_scatter_s: Option<f64>,
    /// The relay: the ranks giving each other their pieces (all-gather).
    pub relay_s: Option<f64>,
    /// Decoding.
    pub decode_s: Option<f64>,
    /// Every wait on the plane's group during the delivery.
    pub rank_gloo_wait_s: Option<f64>,
}

/// One node's link in one arm's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct LinkRow {
    /// The arm's letter.
    pub arm: char,
    /// Which run of the arm.
    pub repeat: usize,
    /// The epoch.
    pub epoch: usize,
    /// `store` or `rankK` (K the training rank).
    pub node: String,
    /// Bytes the node's link sent during the epoch (kernel counters).
    pub tx_bytes: u64,
    /// Bytes it received.
    pub rx_bytes: u64,
    /// Plane payload the node sent for this epoch's delivery.
    pub plane_sent_bytes: u64,
    /// Plane payload it received.
    pub plane_received_bytes: u64,
    /// Bytes the node holds.
    pub held_bytes: u64,
}

/// One goal of the issue, measured.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    /// A short key for citations.
    pub key: String,
    /// What is measured.
    pub measure: String,
    /// The measured value.
    pub value: f64,
    /// The goal.
    pub goal: String,
    /// Whether it is met.
    pub met: bool,
}

/// One byte check: what, and whether it held.
struct Check {
    what: String,
    ok: bool,
}

/// Builds the rows, checks the bytes, adds the model, writes everything.
pub fn report(plan: &TrainRun, setting: &Setting, jobs: &[Job], root: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut links = Vec::new();
    for job in jobs {
        let (r, l) = job_rows(job, setting, plan.fraction)?;
        rows.extend(r);
        links.extend(l);
    }
    for row in rows.iter_mut().filter(|r| matches!(r.arm, 'b' | 'c') && r.epoch > 0) {
        let job = BroadcastJob {
            bytes: row.plane_store_sent_bytes.max(1),
            rounds: 1,
            method: BroadcastMethod::PseudoBroadcast,
            seed: 1,
        };
        row.model_shuffle_s = model::broadcast(setting.ranks, setting.mbit, &job)?.first().copied();
    }
    let checks: Vec<Check> = jobs.iter().flat_map(|job| byte_checks(job, plan.epochs)).collect();
    let goals = goals(&rows);
    let out = &plan.out;
    write_csv(out, &rows)?;
    write_csv(&beside(out, "-links.csv"), &links)?;
    write_csv(&beside(out, "-summary.csv"), &goals)?;
    let chart = accuracy_chart(&rows, setting);
    // No chart when no rank trained (--sleep-train): there is no accuracy to draw.
    if !chart.series.is_empty() {
        let svg = chart.to_svg().map_err(|e| anyhow::anyhow!("the chart: {e}"))?;
        std::fs::write(beside(out, ".svg"), svg)
            .with_context(|| format!("cannot write {}", beside(out, ".svg").display()))?;
    }
    if plan.readme {
        write_section(root, setting, &rows, &goals)?;
        if setting.sleep_train == 0.0 {
            publish_headlines(root, &goals)?;
        }
    }
    print_summary(&rows, &goals, &checks);
    if plan.short {
        eprintln!(
            "netns-train: the short form checks bytes only; its times and accuracy are not the experiment's"
        );
    }
    let shown = out.strip_prefix(root).unwrap_or(out).display().to_string();
    eprintln!("xtask: wrote {shown} (and -links.csv, -summary.csv and a chart, .svg, beside it)");
    let failed: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
    if let Some(first) = failed.first() {
        bail!("{} of {} byte checks failed; the first: {}", failed.len(), checks.len(), first.what);
    }
    eprintln!("netns-train: all {} byte checks against the plan passed", checks.len());
    Ok(())
}

/// The goal `key`'s value (NaN when it was not measured).
fn goal_value(goals: &[Goal], key: &str) -> f64 {
    goals.iter().find(|g| g.key == key).map_or(f64::NAN, |g| g.value)
}

/// Replaces netns-train's rows of `results/headline.csv` and re-renders README's headline table.
fn publish_headlines(root: &Path, goals: &[Goal]) -> anyhow::Result<()> {
    use ubershuffle_bench::report::headline::{self, HeadlineRecord};
    let v = |key: &str, digits: usize| num(goal_value(goals, key), digits);
    let record = |what: String, ours: String, paper: &str, keys: &str| HeadlineRecord {
        experiment: "netns-train".into(),
        run: "full".into(),
        what,
        ours,
        paper: paper.into(),
        source: format!("results/netns-train-summary.csv: {keys}"),
        command: "cargo xtask netns-train --python PYTHON".into(),
        machine: true,
    };
    let mut fresh = Vec::new();
    if goals.iter().any(|g| g.key == "a_vs_d_epoch") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links: partial-local (Q = 0.3) vs reading each new batch from the store"
                .into(),
            format!(
                "exposed data time {}x shorter, epochs {}x shorter, accuracy {} points apart",
                v("a_vs_d_exposed", 0),
                v("a_vs_d_epoch", 2),
                v("a_vs_d_accuracy", 2)
            ),
            "about 5x faster training at the same accuracy (partial-local seed)",
            "key=a_vs_d_exposed, a_vs_d_epoch, a_vs_d_accuracy",
        ));
    }
    if goals.iter().any(|g| g.key == "b_vs_c_shuffle") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links: coded vs uncoded store delivery, alpha 0.5".into(),
            format!(
                "store bytes {}x, shuffle time {}x, epoch time {}x",
                v("b_vs_c_bytes", 3),
                v("b_vs_c_shuffle", 2),
                v("b_vs_c_epoch", 2)
            ),
            "shuffle time about 0.5x, training time about 0.7x (UberShuffle)",
            "key=b_vs_c_bytes, b_vs_c_shuffle, b_vs_c_epoch",
        ));
    }
    let path = root.join("results").join("headline.csv");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let records = headline::parse_records(&existing)?;
    // The experiments in the order they stand (netns-train last when new).
    let mut order: Vec<&str> = Vec::new();
    for r in &records {
        if !order.contains(&r.experiment.as_str()) {
            order.push(&r.experiment);
        }
    }
    if !order.contains(&"netns-train") {
        order.push("netns-train");
    }
    let order: Vec<String> = order.into_iter().map(String::from).collect();
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let all = headline::merge(records, "netns-train", "full", fresh, &order);
    ubershuffle_runtime::write_atomically(&path, headline::to_csv(&all)?.as_bytes())?;
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path)
        .with_context(|| format!("cannot read {}", readme_path.display()))?;
    ubershuffle_runtime::write_atomically(
        &readme_path,
        headline::replace_block(&readme, &headline::render(&all))?.as_bytes(),
    )?;
    Ok(())
}

/// `out` with its `.csv` replaced by `tail`.
fn beside(out: &Path, tail: &str) -> PathBuf {
    let stem =
        out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "netns-train".into());
    out.with_file_name(format!("{stem}{tail}"))
}

/// A counter series `(time, tx, rx)` at time `t`, linearly between samples.
fn counters_at(samples: &[(f64, u64, u64)], t: f64) -> (u64, u64) {
    let Some(first) = samples.first() else { return (0, 0) };
    if t <= first.0 {
        return (first.1, first.2);
    }
    for w in samples.windows(2) {
        let (a, b) = (w[0], w[1]);
        if t <= b.0 {
            let f = if b.0 > a.0 { (t - a.0) / (b.0 - a.0) } else { 1.0 };
            let lerp = |x: u64, y: u64| x + ((y.saturating_sub(x)) as f64 * f).round() as u64;
            return (lerp(a.1, b.1), lerp(a.2, b.2));
        }
    }
    samples.last().map_or((0, 0), |l| (l.1, l.2))
}

/// The rows of one job.
fn job_rows(job: &Job, setting: &Setting, fraction: f64) -> anyhow::Result<(Vec<Row>, Vec<LinkRow>)> {
    let trainers = job.trainers();
    let store = job.store();
    let first = trainers.first().context("a job without training ranks")?;
    let epochs = first.epochs.len();
    if trainers.iter().any(|t| t.epochs.len() != epochs) {
        bail!("arm {}: the ranks logged different numbers of epochs", job.arm.letter());
    }
    let arm = job.arm.letter();
    let (mut rows, mut links) = (Vec::new(), Vec::new());
    for e in 0..epochs {
        let logs: Vec<&EpochLog> = trainers.iter().map(|t| &t.epochs[e]).collect();
        let start = first.epochs[e].t_start;
        let end = first.epochs.get(e + 1).map_or(first.epochs[e].t_end, |n| n.t_start);
        let window = |t: &RankLog| {
            let from = t.epochs[e].counters_start;
            let to = t.epochs.get(e + 1).map_or(t.end_counters, |n| n.counters_start);
            (to.0.saturating_sub(from.0), to.1.saturating_sub(from.1))
        };
        let served = store.and_then(|s| s.served.iter().find(|f| f.epoch == e));
        let (store_tx, store_rx) = match store {
            Some(s) => {
                let (a, b) = (counters_at(&s.samples, start), counters_at(&s.samples, end));
                (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))
            }
            None => (0, 0),
        };
        if let Some(s) = store {
            links.push(LinkRow {
                arm,
                repeat: job.repeat,
                epoch: e,
                node: "store".into(),
                tx_bytes: store_tx,
                rx_bytes: store_rx,
                plane_sent_bytes: served.map_or(0, |f| f.bytes_sent),
                plane_received_bytes: 0,
                held_bytes: s.held_bytes,
            });
        }
        let (mut tx_sum, mut rx_sum) = (0, 0);
        for (k, t) in trainers.iter().enumerate() {
            let (tx, rx) = window(t);
            tx_sum += tx;
            rx_sum += rx;
            let l = &t.epochs[e];
            links.push(LinkRow {
                arm,
                repeat: job.repeat,
                epoch: e,
                node: format!("rank{k}"),
                tx_bytes: tx,
                rx_bytes: rx,
                plane_sent_bytes: l.bytes_sent,
                plane_received_bytes: l.bytes_received,
                held_bytes: l.held_bytes,
            });
        }
        let max = |f: fn(&EpochLog) -> f64| logs.iter().map(|l| f(l)).fold(0.0, f64::max);
        let longest = |f: fn(&EpochLog) -> Option<f64>| {
            logs.iter().filter_map(|l| f(l)).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        };
        let step = served.filter(|f| f.kind == "step");
        let plan_bytes = if e == 0 { None } else { first.chain_bytes.get(e - 1).map(|v| v.iter().sum()) };
        let l0 = &first.epochs[e];
        rows.push(Row {
            arm,
            repeat: job.repeat,
            setting: job.arm.describe(fraction),
            epoch: e,
            ranks: setting.ranks,
            mbit: setting.mbit,
            exposed_s: max(|l| l.exposed_seconds),
            epoch_s: max(|l| l.epoch_seconds),
            shuffle_s: max(|l| l.transfer_seconds),
            model_shuffle_s: None,
            store_tx_bytes: store_tx,
            store_rx_bytes: store_rx,
            ranks_tx_bytes: tx_sum,
            ranks_rx_bytes: rx_sum,
            plane_store_sent_bytes: served.map_or(0, |f| f.bytes_sent),
            plane_received_bytes: logs.iter().map(|l| l.bytes_received).sum(),
            plan_bytes: if job.arm == Arm::F { Some(0) } else { plan_bytes },
            padding_bytes: served.map_or(0, |f| f.padding_bytes),
            packets: served.map_or(0, |f| f.packets),
            coded_packets: served.map_or(0, |f| f.coded_packets),
            storage_bytes_per_rank: logs.iter().map(|l| l.held_bytes).max().unwrap_or(0),
            held_out_accuracy: l0.held_out_accuracy.unwrap_or(f64::NAN),
            held_out_loss: l0.held_out_loss.unwrap_or(f64::NAN),
            train_loss: logs.iter().map(|l| l.train_loss).sum::<f64>() / logs.len() as f64,
            wall_s: l0.t_end - first.t0,
            store_request_wait_s: step.and_then(|f| f.request_wait_seconds),
            store_plan_s: step.and_then(|f| f.plan_seconds),
            store_plan_ahead_s: step.and_then(|f| f.plan_ahead_seconds),
            store_encode_s: step.and_then(|f| f.encode_seconds),
            store_scatter_s: step.and_then(|f| f.scatter_seconds),
            store_gloo_wait_s: step.and_then(|f| f.gloo_wait_seconds),
            answer_wait_s: longest(|l| l.answer_wait_seconds),
            rank_scatter_s: longest(|l| l.scatter_seconds),
            relay_s: longest(|l| l.relay_seconds),
            decode_s: longest(|l| l.decode_seconds),
            rank_gloo_wait_s: longest(|l| l.gloo_wait_seconds),
        });
    }
    Ok((rows, links))
}

/// The checks of a job's bytes against its plan (and of the kernel's counters against the
/// plane's).
fn byte_checks(job: &Job, epochs: usize) -> Vec<Check> {
    let arm = job.arm.letter();
    let mut checks = Vec::new();
    let mut check = |ok: bool, what: String| checks.push(Check { what: format!("arm {arm}: {what}"), ok });
    let trainers = job.trainers();
    let Some(first) = trainers.first() else {
        check(false, "no training rank logged".into());
        return checks;
    };
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
                    + t.drained.get("bytes_sent").copied().unwrap_or(0.0) as u64;
                let tx = t.end_counters.0.saturating_sub(t.start_counters.0);
                check(tx >= sent, format!("rank {k}'s link sent {tx} bytes, at least its plane's {sent}"));
            }
        }
        Arm::A | Arm::B | Arm::C => {
            let Some(store) = job.store() else {
                check(false, "no store logged".into());
                return checks;
            };
            for f in store.served.iter().filter(|f| f.kind == "step" && f.epoch < epochs) {
                let packets = f.packets * f.segment_bytes;
                check(
                    f.data_bytes + f.padding_bytes == packets,
                    format!(
                        "epoch {}: data {} + padding {} = packets {packets}",
                        f.epoch, f.data_bytes, f.padding_bytes
                    ),
                );
                let overhead = f.bytes_sent.saturating_sub(packets);
                check(
                    f.bytes_sent >= packets && overhead <= packets / 20 + (64 << 10),
                    format!(
                        "epoch {}: the store sent {} plane bytes for packets of {packets}",
                        f.epoch, f.bytes_sent
                    ),
                );
                let chain: Option<u64> =
                    first.chain_bytes.get(f.epoch.wrapping_sub(1)).map(|v| v.iter().sum());
                if job.arm == Arm::B {
                    check(
                        chain.is_some_and(|c| f.data_bytes <= c),
                        format!(
                            "epoch {}: coded data bytes {} at most the uncoded plan's {chain:?}",
                            f.epoch, f.data_bytes
                        ),
                    );
                } else {
                    check(
                        chain == Some(f.data_bytes),
                        format!(
                            "epoch {}: uncoded data bytes {} equal the plan's {chain:?}",
                            f.epoch, f.data_bytes
                        ),
                    );
                }
            }
            let sent: u64 = store.served.iter().map(|f| f.bytes_sent).sum();
            let tx = store.end_counters.0.saturating_sub(store.start_counters.0);
            let ratio = tx as f64 / sent.max(1) as f64;
            check(
                (1.0..=1.1).contains(&ratio),
                format!(
                    "the store's link sent {tx} bytes for {sent} plane bytes (ratio {ratio:.4}, 1 to 1.1)"
                ),
            );
        }
        Arm::F => {
            let plane: u64 = trainers.iter().flat_map(|t| &t.epochs).map(|l| l.bytes_received).sum();
            check(plane == 0, format!("nothing moved on the plane ({plane} bytes)"));
        }
    }
    checks
}

/// The median of `values` (NaN when empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// Median over the epochs after the first (every repeat) of `f` in arm `arm`.
fn med(rows: &[Row], arm: char, f: impl Fn(&Row) -> f64) -> f64 {
    median(rows.iter().filter(|r| r.arm == arm && r.epoch > 0).map(f).collect())
}

/// The last epoch's held-out accuracy of arm `arm` (median over repeats).
fn last_accuracy(rows: &[Row], arm: char) -> f64 {
    let last = rows.iter().filter(|r| r.arm == arm).map(|r| r.epoch).max().unwrap_or(0);
    median(rows.iter().filter(|r| r.arm == arm && r.epoch == last).map(|r| r.held_out_accuracy).collect())
}

/// The goals, from the rows (those whose arms ran).
fn goals(rows: &[Row]) -> Vec<Goal> {
    let has = |a: char| rows.iter().any(|r| r.arm == a);
    let mut out = Vec::new();
    let mut goal = |key: &str, measure: &str, value: f64, text: &str, met: bool| {
        out.push(Goal { key: key.into(), measure: measure.into(), value, goal: text.into(), met });
    };
    if has('b') && has('c') {
        let v = med(rows, 'b', |r| r.shuffle_s) / med(rows, 'c', |r| r.shuffle_s);
        goal("b_vs_c_shuffle", "shuffle time, coded (b) / uncoded (c)", v, "<= 0.6", v <= 0.6);
        let v = med(rows, 'b', |r| r.epoch_s) / med(rows, 'c', |r| r.epoch_s);
        goal("b_vs_c_epoch", "epoch time, coded (b) / uncoded (c)", v, "<= 0.8", v <= 0.8);
        let v = med(rows, 'b', |r| r.plane_store_sent_bytes as f64)
            / med(rows, 'c', |r| r.plane_store_sent_bytes as f64);
        goal("b_vs_c_bytes", "store's bytes, coded (b) / uncoded (c)", v, "(the plan's ratio)", true);
        for arm in ['b', 'c'] {
            let v = med(rows, arm, |r| r.shuffle_s / r.model_shuffle_s.unwrap_or(f64::NAN));
            let key = format!("{arm}_measured_vs_model");
            goal(
                &key,
                &format!("shuffle time of ({arm}), measured / emulator"),
                v,
                "0.85 to 1.15",
                (0.85..=1.15).contains(&v),
            );
        }
    }
    let profiled = |a: char| rows.iter().any(|r| r.arm == a && r.relay_s.is_some());
    for arm in ['b', 'c'].into_iter().filter(|&a| profiled(a)) {
        let m = |f: fn(&Row) -> Option<f64>| med(rows, arm, move |r: &Row| f(r).unwrap_or(f64::NAN));
        let figures: [(&str, &str, f64); 6] = [
            (
                "plan_s",
                "the store's planner per epoch, s",
                m(|r| r.store_plan_ahead_s.filter(|v| *v > 0.0).or(r.store_plan_s)),
            ),
            ("plan_wait_s", "what the delivery waited for its plan, s", m(|r| r.store_plan_s)),
            ("scatter_s", "receiving the pieces from the store (ranks), s", m(|r| r.rank_scatter_s)),
            ("relay_s", "the relay among the ranks, s", m(|r| r.relay_s)),
            ("decode_s", "decoding at the ranks, s", m(|r| r.decode_s)),
            ("answer_wait_s", "from the request to the store's answer (ranks), s", m(|r| r.answer_wait_s)),
        ];
        for (key, what, v) in figures {
            goal(&format!("{arm}_{key}"), &format!("profile of ({arm}): {what}"), v, "", true);
        }
    }
    if has('a') && has('d') {
        let (a, d) = (med(rows, 'a', |r| r.exposed_s), med(rows, 'd', |r| r.exposed_s));
        goal("a_exposed", "exposed data time of (a), s", a, "", true);
        goal("d_exposed", "exposed data time of (d), s", d, "", true);
        let v = a / d.max(1e-3);
        goal("a_vs_d_exposed", "exposed data time, (a) / (d) (d's at least 1 ms)", v, ">= 5", v >= 5.0);
        let v = med(rows, 'a', |r| r.epoch_s) / med(rows, 'd', |r| r.epoch_s);
        goal("a_vs_d_epoch", "epoch time, (a) / (d)", v, ">= 2", v >= 2.0);
        let v = (last_accuracy(rows, 'a') - last_accuracy(rows, 'd')).abs() * 100.0;
        goal(
            "a_vs_d_accuracy",
            "accuracy gap between (a) and (d) after the last epoch, points",
            v,
            "<= 1",
            v <= 1.0,
        );
    }
    if has('a') {
        let v = med(rows, 'a', |r| r.shuffle_s / r.epoch_s);
        goal("a_data_share", "data time / epoch time of (a)", v, ">= 0.5", v >= 0.5);
    }
    out
}

/// Accuracy against wall time, one line per arm (its first run).
fn accuracy_chart(rows: &[Row], setting: &Setting) -> LineChart {
    let series = Arm::ALL
        .iter()
        .filter_map(|arm| {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.arm == arm.letter() && r.repeat == 0)
                .map(|r| (r.wall_s, r.held_out_accuracy))
                .filter(|p| p.1.is_finite())
                .collect();
            (!points.is_empty())
                .then(|| Series::solid(format!("({}) {}", arm.letter(), r_name(*arm, setting)), points))
        })
        .collect();
    LineChart {
        title: format!(
            "Held-out accuracy against wall time, {} ranks at {} Mbit/s",
            setting.ranks, setting.mbit
        ),
        x_label: "wall time since the job's start (s)".into(),
        y_label: "held-out accuracy".into(),
        log_x: false,
        log_y: false,
        series,
    }
}

fn r_name(arm: Arm, setting: &Setting) -> String {
    arm.describe(setting.fraction)
}

/// An arm's first cells of both sections' tables: the arm, its times (exposed, epoch, shuffle,
/// the emulator's) and the store's link, medians over the epochs after the first.
fn timing_cells(rows: &[Row], arm: Arm, setting: &Setting) -> String {
    let a = arm.letter();
    format!(
        "| ({a}) {} | {} | {} | {} | {} | {} |",
        arm.describe(setting.fraction),
        num(med(rows, a, |r| r.exposed_s), 3),
        num(med(rows, a, |r| r.epoch_s), 3),
        num(med(rows, a, |r| r.shuffle_s), 3),
        num(med(rows, a, |r| r.model_shuffle_s.unwrap_or(f64::NAN)), 3),
        num(med(rows, a, |r| r.store_tx_bytes as f64 / 1e6), 2),
    )
}

/// A number with `digits` decimals, or `-`.
fn num(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{v:.digits$}") } else { "-".into() }
}

/// Replaces results/README.md's `netns-train` section (the others stay as they are).
fn write_section(root: &Path, setting: &Setting, rows: &[Row], goals: &[Goal]) -> anyhow::Result<()> {
    let path = root.join("results").join("README.md");
    let existing =
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let marker = "<!-- experiment ";
    let preamble =
        existing.find(marker).map_or(existing.as_str(), |at| &existing[..at]).trim_end().to_string() + "\n";
    let order: Vec<String> = existing
        .match_indices(marker)
        .filter_map(|(at, _)| {
            existing[at + marker.len()..].split_once(" begin -->").map(|(n, _)| n.to_string())
        })
        .filter(|n| !n.contains(' '))
        .collect();
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let (name, body) = if setting.sleep_train > 0.0 {
        ("netns-train-idle", idle_section(setting, rows, goals))
    } else {
        ("netns-train", section(setting, rows, goals))
    };
    ubershuffle_bench::report::sections::update_section(&path, &preamble, name, &body, &order)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The section's Markdown.
fn section(setting: &Setting, rows: &[Row], goals: &[Goal]) -> String {
    let mut s = String::from("## netns-train\n\n");
    let _ = writeln!(
        s,
        "Real PyTorch DDP jobs (gloo, CPU) between network namespaces: a store node and {} training ranks, \
each in a namespace of its own, every port shaped by {} at {} Mbit/s (MTU {}). The records are \
scikit-learn's digits upscaled to {} px with grain {} and JPEG-encoded at varying quality ({} training \
records, {:.1} MB, {:.1} KB on average), decoded to 32x32 in the Dataset; a small CNN, {} epochs, the \
same seed in every arm of a run (run r adds r to the seed, for the chain and the model). Times are this machine's wall seconds (2 cores shared by every rank, so \
training is CPU-bound and noisy); bytes are the kernel's interface counters and the plane's own.\n",
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        setting.side,
        setting.grain,
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.bytes as f64 / setting.records as f64 / 1e3,
        setting.epochs
    );
    let _ = writeln!(s, "![Held-out accuracy against wall time](netns-train.svg)\n");
    let runs = rows.iter().map(|r| r.repeat + 1).max().unwrap_or(1);
    let _ = writeln!(
        s,
        "Medians over the epochs after the first, {runs} interleaved run{} of the arms (shuffle: the \
delivery of an epoch's records, in the background of the epoch before; exposed: what training waited \
for it; the emulator's time is the store's bytes of the epoch by pseudo-broadcast on its link model at \
the same rate; accuracy and wall time: the last epoch's, median over the runs; the chart: the first run):\n",
        if runs == 1 { "" } else { "s" }
    );
    s.push_str("| arm | exposed s | epoch s | shuffle s | emulator s | store link MB/epoch | plane MB/epoch | storage MB/rank | accuracy (last) | wall s (last) |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for arm in Arm::ALL {
        let a = arm.letter();
        if !rows.iter().any(|r| r.arm == a) {
            continue;
        }
        let last_epoch = rows.iter().filter(|r| r.arm == a).map(|r| r.epoch).max().unwrap_or(0);
        let last_wall =
            median(rows.iter().filter(|r| r.arm == a && r.epoch == last_epoch).map(|r| r.wall_s).collect());
        let _ = writeln!(
            s,
            "{} {} | {} | {} | {} |",
            timing_cells(rows, arm, setting),
            num(med(rows, a, |r| r.plane_received_bytes as f64 / 1e6), 2),
            num(med(rows, a, |r| r.storage_bytes_per_rank as f64 / 1e6), 2),
            num(last_accuracy(rows, a), 4),
            num(last_wall, 1),
        );
    }
    goal_table(&mut s, goals);
    profile_table(&mut s, setting, rows);
    profile_words(&mut s, rows, goals);
    s.push_str(
        "\nData: [`netns-train.csv`](netns-train.csv) (per arm and epoch), [`netns-train-links.csv`](netns-train-links.csv) \
(per node's link), [`netns-train-summary.csv`](netns-train-summary.csv) (the goals). Regenerate (Linux, root): \
`cargo xtask netns-train --python PYTHON` with torch, Pillow, scikit-learn and the package installed.\n",
    );
    s
}

/// The goals as a Markdown table.
fn goal_table(s: &mut String, goals: &[Goal]) {
    s.push_str("\nThe issue's goals:\n\n| goal | measured | wanted | met |\n| --- | --- | --- | --- |\n");
    for g in goals.iter().filter(|g| !g.goal.is_empty() && !g.goal.starts_with('(')) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            g.measure,
            num(g.value, 3),
            g.goal,
            if g.met { "yes" } else { "no" }
        );
    }
}

/// The store arms' profile (medians over the epochs after the first) as a Markdown table.
fn profile_table(s: &mut String, setting: &Setting, rows: &[Row]) {
    let arms: Vec<Arm> = [Arm::A, Arm::B, Arm::C]
        .into_iter()
        .filter(|a| rows.iter().any(|r| r.arm == a.letter() && r.relay_s.is_some()))
        .collect();
    if arms.is_empty() {
        return;
    }
    s.push_str(
        "\nWhere the store arms' delivery time goes (medians over the epochs after the first, seconds; \
the ranks' figures are the longest over the ranks; the waits include the other ranks' and the store's \
lateness, so the columns overlap and do not add up):\n\n",
    );
    s.push_str("| arm | shuffle | emulator | store: request wait | plan (ahead) | plan wait | encode | scatter | ranks: answer wait | scatter | relay | decode | gloo waits |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let opt = |f: fn(&Row) -> Option<f64>| move |r: &Row| f(r).unwrap_or(f64::NAN);
    for arm in arms {
        let a = arm.letter();
        let _ = writeln!(
            s,
            "| ({a}) {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            arm.describe(setting.fraction),
            num(med(rows, a, |r| r.shuffle_s), 3),
            num(med(rows, a, opt(|r| r.model_shuffle_s)), 3),
            num(med(rows, a, opt(|r| r.store_request_wait_s)), 3),
            num(med(rows, a, opt(|r| r.store_plan_ahead_s)), 3),
            num(med(rows, a, opt(|r| r.store_plan_s)), 3),
            num(med(rows, a, opt(|r| r.store_encode_s)), 3),
            num(med(rows, a, opt(|r| r.store_scatter_s)), 3),
            num(med(rows, a, opt(|r| r.answer_wait_s)), 3),
            num(med(rows, a, opt(|r| r.rank_scatter_s)), 3),
            num(med(rows, a, opt(|r| r.relay_s)), 3),
            num(med(rows, a, opt(|r| r.decode_s)), 3),
            num(med(rows, a, opt(|r| r.rank_gloo_wait_s)), 3),
        );
    }
}

/// What the profile says of coded (b) against uncoded (c) delivery, in words.
fn profile_words(s: &mut String, rows: &[Row], goals: &[Goal]) {
    let has = |a: char| rows.iter().any(|r| r.arm == a && r.relay_s.is_some());
    if !(has('b') && has('c')) {
        return;
    }
    let v = |key: &str| goal_value(goals, key);
    let wire = |a: char| v(&format!("{a}_scatter_s")) + v(&format!("{a}_relay_s"));
    // Waiting less than a tenth of the planner's own time: the plan was off the delivery's path.
    let planning = if v("b_plan_wait_s") < 0.1 * v("b_plan_s").max(0.01) {
        "(b) also plans, which (c) does not, but beside the delivery of the step before"
    } else {
        "(b) also pays for planning, which (c) does not"
    };
    let _ = writeln!(
        s,
        "\nWhere coded delivery (b) gains against its bytes: the store sends {bytes}x the bytes of \
uncoded delivery (c), and the wire time (scatter and relay at the ranks) is {wire_b} s against {wire_c} s \
({wire}x); {planning}: the `auto` planner (its search bounded by ShuffleGroup's `time_budget`) took {plan} s \
per step on the store, which shares this machine's 2 cores with the ranks' processes, and the delivery \
waited {wait} s for its plan; decoding took {decode} s. The relay runs slower than the link, most likely for \
the reason docs/transport.md finds for the ring (each port carries data both ways, and the TCP \
acknowledgements of one direction queue behind the data of the other in the FIFO token bucket); the \
emulator's link model does not charge that. Shuffle time (b) / (c): {ratio}.",
        bytes = num(goal_value(goals, "b_vs_c_bytes"), 3),
        wire_b = num(wire('b'), 3),
        wire_c = num(wire('c'), 3),
        wire = num(wire('b') / wire('c'), 3),
        plan = num(v("b_plan_s"), 3),
        wait = num(v("b_plan_wait_s"), 3),
        decode = num(v("b_decode_s"), 3),
        ratio = num(goal_value(goals, "b_vs_c_shuffle"), 3),
    );
}

/// The section of the control run (`--sleep-train`): the store arms with the CPU idle.
fn idle_section(setting: &Setting, rows: &[Row], goals: &[Goal]) -> String {
    let mut s = String::from("## netns-train-idle\n\n");
    let runs = rows.iter().map(|r| r.repeat + 1).max().unwrap_or(1);
    let _ = writeln!(
        s,
        "The control of netns-train's profile: the same namespaces, links ({} ranks, {} at {} Mbit/s, MTU {}), \
records ({} JPEGs, {:.1} MB) and plane, but no rank trains: each reads every record of its epoch and \
sleeps {} s per epoch (the CPU idle, as while a GPU computes), so the links and not this machine's 2 \
cores are the bottleneck. {} epochs per arm, {} interleaved run{} of the arms; medians over the \
epochs after the first.\n",
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.sleep_train,
        setting.epochs,
        runs,
        if runs == 1 { "" } else { "s" }
    );
    s.push_str("| arm | exposed s | epoch s | shuffle s | emulator s | store link MB/epoch |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for arm in Arm::ALL {
        let a = arm.letter();
        if !rows.iter().any(|r| r.arm == a) {
            continue;
        }
        let _ = writeln!(s, "{}", timing_cells(rows, arm, setting));
    }
    let shuffle: Vec<Goal> = goals
        .iter()
        .filter(|g| g.key.starts_with("b_vs_c_") || g.key.ends_with("_vs_model"))
        .cloned()
        .collect();
    goal_table(&mut s, &shuffle);
    profile_table(&mut s, setting, rows);
    profile_words(&mut s, rows, goals);
    s.push_str(
        "\nData: [`netns-train-idle.csv`](netns-train-idle.csv), [`netns-train-idle-links.csv`](netns-train-idle-links.csv), \
[`netns-train-idle-summary.csv`](netns-train-idle-summary.csv). Regenerate (Linux, root): \
`cargo xtask netns-train --python PYTHON --sleep-train SECONDS --arm b,c`.\n",
    );
    s
}

/// Prints the medians, the goals and the byte checks.
fn print_summary(rows: &[Row], goals: &[Goal], checks: &[Check]) {
    eprintln!("netns-train: medians over epochs after the first:");
    for arm in Arm::ALL {
        let a = arm.letter();
        if !rows.iter().any(|r| r.arm == a) {
            continue;
        }
        eprintln!(
            "  ({a}) exposed {:>7} s  epoch {:>7} s  shuffle {:>7} s  model {:>7} s  store {:>7} MB  accuracy {}",
            num(med(rows, a, |r| r.exposed_s), 3),
            num(med(rows, a, |r| r.epoch_s), 3),
            num(med(rows, a, |r| r.shuffle_s), 3),
            num(med(rows, a, |r| r.model_shuffle_s.unwrap_or(f64::NAN)), 3),
            num(med(rows, a, |r| r.plane_store_sent_bytes as f64 / 1e6), 2),
            num(last_accuracy(rows, a), 4),
        );
    }
    for g in goals {
        let verdict = if g.goal.is_empty() || g.goal.starts_with('(') {
            "    "
        } else if g.met {
            "met "
        } else {
            "MISS"
        };
        eprintln!("  {verdict} {:>9} {:>12}  {}", num(g.value, 4), g.goal, g.measure);
    }
    for c in checks.iter().filter(|c| !c.ok) {
        eprintln!("  byte check FAILED: {}", c.what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_interpolated_between_samples() {
        let s = [(10.0, 100, 0), (11.0, 300, 50)];
        assert_eq!(counters_at(&s, 9.0), (100, 0));
        assert_eq!(counters_at(&s, 10.5), (200, 25));
        assert_eq!(counters_at(&s, 12.0), (300, 50));
        assert_eq!(counters_at(&[], 1.0), (0, 0));
    }

    #[test]
    fn medians_skip_non_finite_values() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn the_side_files_sit_beside_the_csv() {
        let out = Path::new("/r/netns-train.csv");
        assert_eq!(beside(out, "-links.csv"), Path::new("/r/netns-train-links.csv"));
        assert_eq!(beside(out, ".svg"), Path::new("/r/netns-train.svg"));
    }
}
