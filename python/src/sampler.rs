//! The state machine behind `ubershuffle.CodedShuffleSampler`: which indices every rank
//! serves in every epoch, following the epoch chain, with mid-epoch and elastic resumption.
//!
//! Epochs are numbered from 0 as `DistributedSampler.set_epoch` numbers them. A *segment* is a
//! run of epochs over one world size: its first epoch is the chain's initial partition (nothing
//! cached yet: every rank loads its whole batch), each later epoch one step of the chain. A
//! state loaded onto another world size turns the interrupted epoch into a *remainder* epoch
//! (the samples not yet served, dealt among the new ranks) and starts a new segment at the
//! next epoch.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use ubershuffle_core::ShufflePlanner;
use ubershuffle_core::epoch_chain::{
    ChainParams, ChainStart, ChainState, DrawnEpoch, EpochChain, PlannedEpoch,
};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;
use ubershuffle_core::rng::{seeded_stream, shuffle};

use crate::cache_setting::CacheSetting;
use crate::errors::{Failure, Outcome, bad, bad_error, catch, guarded};
use crate::planning;

/// Version of the state layout.
const STATE_VERSION: u64 = 1;
/// Tags that keep the sampler's streams apart from the chain's and the planners'.
const ORDER_TAG: u64 = 0x4F52_4445_5200_0001;
const DEAL_TAG: u64 = 0x4445_414C_0000_0001;
const SEGMENT_TAG: u64 = 0x5345_474D_0000_0001;

/// What the sampler was built with (a loaded state's values replace these).
#[derive(Clone, Debug)]
struct Config {
    points: usize,
    seed: u64,
    policy: ExchangePolicy,
    cache: CacheSetting,
    scheme: String,
    candidates: Option<Randomness>,
    time_budget: Option<f64>,
    plugin: Option<String>,
    pliable: bool,
    /// How the first segment's first epoch is made (a later segment's starts at random: its
    /// records are already with the ranks).
    start: ChainStart,
}

/// The epoch the sampler is at.
#[derive(Clone, Debug)]
enum Current {
    /// An epoch of the chain: `chain` has committed this epoch's assignment; `before` is the
    /// chain's state before that commit (`None` at the segment's first epoch: nothing cached),
    /// from which the epoch is drawn again to plan it.
    Chain { chain: EpochChain, before: Option<ChainState>, made: Option<Made> },
    /// The samples an interrupted epoch had not served, dealt among `lists.len()` ranks
    /// (`real[r]` of rank `r`'s list are samples; the rest pads).
    Remainder { lists: Vec<Vec<u32>>, real: Vec<usize> },
}

/// The plan of a chain epoch, as `plan_summary` reports it.
#[derive(Clone, Debug)]
struct Made {
    transmissions: usize,
    uncoded: usize,
    lower_bound: usize,
    made_by: String,
    points_moved: usize,
    points_exchanged: usize,
}

/// The sampler's core (see the module's docs).
#[pyclass(module = "ubershuffle._native")]
pub struct SamplerCore {
    config: Config,
    world: usize,
    epoch: u64,
    segment_start: u64,
    current: Current,
}

/// The chain of the segment starting at `segment_start` over `world` ranks: the sampler's
/// seed for the first segment (so epoch `e` is `ubershuffle plan --policy ... --epochs`'s epoch
/// `e`), a seed derived from it, the segment's start and its world size for later ones. The
/// first segment starts as `config.start` says; a later one at random (the ranks already hold
/// the records, so the first epoch's reads from the source are not at stake).
fn chain_params(config: &Config, world: usize, segment_start: u64) -> Outcome<ChainParams> {
    let (seed, start) = if segment_start == 0 {
        (config.seed, config.start)
    } else {
        (mix(config.seed ^ mix(SEGMENT_TAG ^ mix(segment_start ^ mix(world as u64)))), ChainStart::Random)
    };
    config.cache.apply(ChainParams::new(world, config.points, config.policy, seed).with_start(start))
}

/// SplitMix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `a \ b` for sorted lists.
fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j >= b.len() || b[j] != x {
            out.push(x);
        }
    }
    out
}

/// A rank's order of `items` in `epoch`: shuffled by the stream of `(seed, epoch, rank)`.
fn shuffled(items: &[u32], seed: u64, epoch: u64, rank: usize, tag: u64) -> Vec<u32> {
    let mut order = items.to_vec();
    let stream = (epoch << 24) | (rank as u64 & 0xFF_FFFF);
    shuffle(&mut seeded_stream(mix(seed ^ tag), stream), &mut order);
    order
}

/// `order` cut or padded to `len`: padding repeats the list from its start (`fallback` when
/// the list is empty).
fn fit(mut order: Vec<u32>, len: usize, fallback: &[u32]) -> Vec<u32> {
    if order.len() >= len {
        order.truncate(len);
        return order;
    }
    let source = if order.is_empty() { fallback.to_vec() } else { order.clone() };
    let mut i = 0;
    while order.len() < len && !source.is_empty() {
        order.push(source[i % source.len()]);
        i += 1;
    }
    order
}

/// Lists as bytes: count, then each list's length and its ids (little-endian).
fn lists_to_bytes(lists: &[Vec<u32>]) -> Vec<u8> {
    let total: usize = lists.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(8 + 8 * lists.len() + 4 * total);
    out.extend_from_slice(&(lists.len() as u64).to_le_bytes());
    for list in lists {
        out.extend_from_slice(&(list.len() as u64).to_le_bytes());
        for &p in list {
            out.extend_from_slice(&p.to_le_bytes());
        }
    }
    out
}

fn lists_from_bytes(bytes: &[u8]) -> Outcome<Vec<Vec<u32>>> {
    let broken = || bad("the sampler state is corrupt (its lists do not parse)");
    let mut at = 0usize;
    let mut word = |n: usize| -> Outcome<&[u8]> {
        let slice = bytes.get(at..at + n).ok_or_else(broken)?;
        at += n;
        Ok(slice)
    };
    let count = u64::from_le_bytes(word(8)?.try_into().map_err(|_| broken())?) as usize;
    let mut lists = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let len = u64::from_le_bytes(word(8)?.try_into().map_err(|_| broken())?) as usize;
        let raw = word(len.checked_mul(4).ok_or_else(broken)?)?;
        lists.push(raw.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
    }
    Ok(lists)
}

/// A chain state as a dict of plain values and bytes (caches left out when they are the
/// batches).
fn chain_state_dict<'py>(py: Python<'py>, s: &ChainState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("completed_epochs", s.completed_epochs)?;
    d.set_item("batches", PyBytes::new(py, &lists_to_bytes(&s.batches)))?;
    let caches = (s.caches != s.batches).then(|| PyBytes::new(py, &lists_to_bytes(&s.caches)));
    d.set_item("caches", caches)?;
    Ok(d)
}

/// The chain state of [`chain_state_dict`].
fn chain_state_from(value: &Bound<'_, PyAny>) -> PyResult<ChainState> {
    let d =
        value.cast::<PyDict>().map_err(|_| bad("the sampler state is corrupt (its chain is not a dict)"))?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(key)?.ok_or_else(|| bad(format!("the sampler state's chain has no \"{key}\"")).into())
    };
    let completed_epochs: usize = get("completed_epochs")?.extract()?;
    let batches = lists_from_bytes(get("batches")?.extract::<&[u8]>()?)?;
    let caches = match get("caches")?.extract::<Option<Vec<u8>>>()? {
        Some(bytes) => lists_from_bytes(&bytes)?,
        None => batches.clone(),
    };
    Ok(ChainState { completed_epochs, batches, caches })
}

impl SamplerCore {
    fn new_chain(config: &Config, world: usize, segment_start: u64) -> Outcome<Current> {
        let chain = EpochChain::new(chain_params(config, world, segment_start)?).map_err(bad_error)?;
        Ok(Current::Chain { chain, before: None, made: None })
    }

    /// The scheme's planner.
    fn planner(config: &Config) -> Outcome<Box<dyn ShufflePlanner>> {
        planning::choose_planner(
            &config.scheme,
            config.plugin.as_deref(),
            &planning::options(config.time_budget)?,
        )
    }

    /// Plans the epoch drawn from `before` (the chain's planner stream, as `plan --policy`).
    fn plan_from(
        config: &Config,
        params: ChainParams,
        before: ChainState,
        planner: &dyn ShufflePlanner,
    ) -> Outcome<PlannedEpoch> {
        let chain = EpochChain::with_state(params, before).map_err(bad_error)?;
        let drawn = chain.draw(&chain.all_workers(), 0).map_err(bad_error)?;
        let planned = drawn.plan(planner, config.candidates.filter(|_| config.pliable)).map_err(bad_error)?;
        planned.verify().map_err(|e| Failure::Internal(crate::errors::one_line(&e)))?;
        Ok(planned)
    }

    /// One step of the chain: draw; a pliable scheme plans to choose the assignment, any other
    /// scheme's assignment is the policy's and is committed without planning the coded delivery
    /// (the plan summary plans it when asked); commit.
    fn step(config: &Config, current: &mut Current) -> Outcome<()> {
        let Current::Chain { chain, before, made } = current else {
            return Err(Failure::Internal("a remainder epoch is not a step of a chain".into()));
        };
        let drawn = chain.draw(&chain.all_workers(), 0).map_err(bad_error)?;
        if !config.pliable {
            *made = None;
            *before = Some(chain.state().clone());
            chain.commit_drawn(&drawn);
            return Ok(());
        }
        let planner = Self::planner(config)?;
        let planned = drawn.plan(planner.as_ref(), config.candidates).map_err(bad_error)?;
        *made = Some(Made {
            transmissions: planned.plan.len(),
            uncoded: planned.instance.uncoded_transmissions(),
            lower_bound: ubershuffle_planners::bounds::best_lower_bound(&planned.instance).value,
            made_by: planned.made_by.clone(),
            points_moved: moved(&chain.state().batches, &planned),
            points_exchanged: planned.points_exchanged,
        });
        *before = Some(chain.state().clone());
        chain.commit(&planned);
        Ok(())
    }

    fn num_samples_for(&self, drop_last: bool) -> usize {
        match &self.current {
            Current::Chain { .. } => {
                let (q, n) = (self.config.points, self.world);
                if drop_last && q % n != 0 { q / n } else { q.div_ceil(n) }
            }
            Current::Remainder { lists, .. } => lists.first().map_or(0, Vec::len),
        }
    }

    /// Rank `rank`'s indices this epoch, padded or cut to the epoch's length.
    fn order_for(&self, rank: usize, shuffle_within: bool, drop_last: bool) -> Outcome<Vec<u32>> {
        if rank >= self.world {
            return Err(bad(format!("rank {rank} is not below num_replicas {}", self.world)));
        }
        match &self.current {
            Current::Chain { chain, .. } => {
                let batch = &chain.state().batches[rank];
                let order = if shuffle_within {
                    shuffled(batch, self.config.seed, self.epoch, rank, ORDER_TAG)
                } else {
                    batch.clone()
                };
                Ok(fit(order, self.num_samples_for(drop_last), &[]))
            }
            Current::Remainder { lists, .. } => Ok(lists[rank].clone()),
        }
    }

    /// The samples not yet served when every rank has served `position` of this epoch.
    fn remaining(&self, position: usize, shuffle_within: bool, drop_last: bool) -> Outcome<Vec<u32>> {
        let mut rest = Vec::new();
        for rank in 0..self.world {
            let order = self.order_for(rank, shuffle_within, drop_last)?;
            let real = match &self.current {
                Current::Chain { chain, .. } => chain.state().batches[rank].len().min(order.len()),
                Current::Remainder { real, .. } => real[rank],
            };
            rest.extend_from_slice(&order[position.min(real)..real]);
        }
        rest.sort_unstable();
        Ok(rest)
    }

    /// Deals `rest` among `world` ranks for epoch `epoch`, each list padded to the longest.
    fn deal(seed: u64, epoch: u64, world: usize, mut rest: Vec<u32>, shuffle_within: bool) -> Current {
        if shuffle_within {
            shuffle(&mut seeded_stream(mix(seed ^ DEAL_TAG), (epoch << 24) | world as u64), &mut rest);
        }
        let (base, extra) = (rest.len() / world, rest.len() % world);
        let len = rest.len().div_ceil(world);
        let mut at = 0;
        let mut lists = Vec::with_capacity(world);
        let mut real = Vec::with_capacity(world);
        for r in 0..world {
            let size = base + usize::from(r < extra);
            let own = rest[at..at + size].to_vec();
            at += size;
            real.push(size);
            let fallback: Vec<u32> = rest.get(r % rest.len().max(1)).copied().into_iter().collect();
            lists.push(fit(own, len, &fallback));
        }
        Current::Remainder { lists, real }
    }
}

/// The next epoch's draw, the scheme's planner and its candidates (for a pliable scheme).
pub(crate) type NextDraw = (DrawnEpoch, Box<dyn ShufflePlanner>, Option<Randomness>);

/// What the data planes (`ubershuffle.torch`) read off a sampler core: every rank's records
/// this epoch, the epoch that follows, and the next epoch's draw for coded delivery.
impl SamplerCore {
    /// Every rank's target this epoch, sorted: what it must hold while the epoch trains. A
    /// chain epoch's cache (its batch, plus with alpha the other records it keeps for coded
    /// delivery); a remainder epoch's share.
    pub(crate) fn targets(&self) -> Vec<Vec<u32>> {
        match &self.current {
            Current::Chain { chain, .. } => chain.state().caches.clone(),
            Current::Remainder { lists, real } => lists
                .iter()
                .zip(real)
                .map(|(l, &n)| {
                    let mut own = l[..n].to_vec();
                    own.sort_unstable();
                    own
                })
                .collect(),
        }
    }

    /// Every rank's batch this epoch, sorted.
    pub(crate) fn batches(&self) -> Vec<Vec<u32>> {
        match &self.current {
            Current::Chain { chain, .. } => chain.state().batches.clone(),
            Current::Remainder { .. } => self.targets(),
        }
    }

    /// A copy moved on to the next epoch (as `set_epoch(epoch + 1)`).
    pub(crate) fn stepped(&self) -> Outcome<SamplerCore> {
        let (start, current) = Self::advanced(
            &self.config,
            self.world,
            self.segment_start,
            &self.current,
            self.epoch,
            self.epoch + 1,
        )?;
        Ok(SamplerCore {
            config: self.config.clone(),
            world: self.world,
            epoch: self.epoch + 1,
            segment_start: start,
            current,
        })
    }

    /// The next epoch's draw, when it is a step of this epoch's chain (`None` when the next
    /// epoch starts a new segment: nothing is cached for it), with the scheme's planner and
    /// candidates.
    pub(crate) fn draw_next(&self, most: Option<std::time::Duration>) -> Outcome<Option<NextDraw>> {
        let Current::Chain { chain, .. } = &self.current else { return Ok(None) };
        let drawn = chain.draw(&chain.all_workers(), 0).map_err(bad_error)?;
        let mut config = self.config.clone();
        if let Some(most) = most {
            let own = config.time_budget.unwrap_or(planning::DEFAULT_TIME_BUDGET);
            // Never below the smallest budget `options` takes.
            config.time_budget = Some(own.min(most.as_secs_f64()).max(1e-6));
        }
        let planner = Self::planner(&config)?;
        Ok(Some((drawn, planner, self.config.candidates.filter(|_| self.config.pliable))))
    }

    /// A fingerprint of where the chain stands (epoch, ranks, every batch and cache), equal on
    /// every rank that follows the same chain.
    pub(crate) fn digest(&self) -> u64 {
        let lists = [self.batches(), self.targets()];
        ubershuffle_plane::schedule::lists_digest(
            self.epoch,
            (self.world, self.segment_start),
            &[&lists[0], &lists[1]],
        )
    }

    /// The segment start and current epoch after moving from epoch `at` to `epoch`: one chain
    /// step for the next epoch, a replay from the segment's start for an earlier one, and after
    /// a remainder epoch a new segment over `world`.
    fn advanced(
        config: &Config,
        world: usize,
        segment_start: u64,
        current: &Current,
        at: u64,
        epoch: u64,
    ) -> Outcome<(u64, Current)> {
        let (mut start, mut current, mut at) = (segment_start, current.clone(), at);
        if matches!(current, Current::Remainder { .. }) && epoch > at {
            // The remainder epoch ends its world's change: a new segment over `world`.
            start = at + 1;
            current = Self::new_chain(config, world, start)?;
            at = start;
        } else if epoch < at {
            if epoch < start {
                return Err(bad(format!(
                    "epoch {epoch} comes before this sampler's world-size change at epoch {start}: load a state saved before it"
                )));
            }
            current = Self::new_chain(config, world, start)?;
            at = start;
        }
        while at < epoch {
            at += 1;
            Self::step(config, &mut current)?;
        }
        Ok((start, current))
    }
}

/// Points whose rank changed from `old` batches to the planned epoch's.
fn moved(old: &[Vec<u32>], planned: &PlannedEpoch) -> usize {
    old.iter().enumerate().map(|(w, b)| difference(&planned.instance.assignment(w).to_vec(), b).len()).sum()
}

#[allow(clippy::too_many_arguments)]
fn parse_config(
    points: i64,
    seed: u64,
    policy: &str,
    fraction: Option<f64>,
    cache: CacheSetting,
    scheme: &str,
    candidates: Option<&str>,
    time_budget: Option<f64>,
    plugin: Option<String>,
    first_epoch: Option<&str>,
) -> Outcome<Config> {
    let points = planning::count("points", points)?;
    let start = match first_epoch {
        None => ChainStart::Random,
        Some(name) => name.parse::<ChainStart>().map_err(|e| {
            let names: Vec<String> = ChainStart::ALL.iter().map(|s| format!("\"{s}\"")).collect();
            bad(format!("first_epoch must be {}, got {:?}", names.join(" or "), e.0))
        })?,
    };
    let policy = ExchangePolicy::new(policy, fraction).map_err(crate::errors::bad_error)?;
    let options = planning::options(time_budget)?;
    let planner = planning::choose_planner(scheme, plugin.as_deref(), &options)?;
    let randomness = planning::randomness(candidates)?;
    let pliable = planner.as_pliable().is_some();
    if pliable && policy != ExchangePolicy::Global {
        return Err(bad(format!(
            "--policy does not apply to {}: a pliable scheme chooses the next assignment itself",
            planner.name()
        )));
    }
    if !pliable {
        planning::refuse_candidates(planner.as_ref(), randomness)?;
    }
    Ok(Config {
        points,
        seed,
        policy,
        cache,
        scheme: scheme.to_string(),
        candidates: randomness,
        time_budget,
        plugin,
        pliable,
        start,
    })
}

#[pymethods]
impl SamplerCore {
    /// A sampler core over `points` samples and `world` ranks, at epoch 0; at most one of
    /// `alpha` and `extra_cache` (see [`CacheSetting`]); `first_epoch` names the chain's start
    /// (`"random"`, the default, or `"blocks"`: see [`ChainStart`]).
    #[new]
    #[pyo3(signature = (points, world, seed, policy, fraction, alpha, scheme, candidates, time_budget, plugin, extra_cache=None, first_epoch=None))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        points: i64,
        world: i64,
        seed: u64,
        policy: &str,
        fraction: Option<f64>,
        alpha: Option<f64>,
        scheme: &str,
        candidates: Option<String>,
        time_budget: Option<f64>,
        plugin: Option<String>,
        extra_cache: Option<f64>,
        first_epoch: Option<String>,
    ) -> PyResult<Self> {
        Ok(catch(|| {
            let config = parse_config(
                points,
                seed,
                policy,
                fraction,
                CacheSetting::new(alpha, extra_cache)?,
                scheme,
                candidates.as_deref(),
                time_budget,
                plugin,
                first_epoch.as_deref(),
            )?;
            let world = planning::count("num_replicas", world)?;
            if world > config.points {
                return Err(bad(format!(
                    "more ranks ({world}) than samples ({}): every rank needs a batch",
                    config.points
                )));
            }
            let current = Self::new_chain(&config, world, 0)?;
            Ok(SamplerCore { config, world, epoch: 0, segment_start: 0, current })
        })?)
    }

    /// The epoch.
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The number of ranks this epoch is served by.
    #[getter]
    fn world(&self) -> usize {
        self.world
    }

    /// The first epoch of the current segment (a world-size change starts a new one).
    #[getter]
    fn segment_start(&self) -> u64 {
        self.segment_start
    }

    /// Whether this epoch is a remainder after a world-size change.
    #[getter]
    fn is_remainder(&self) -> bool {
        matches!(self.current, Current::Remainder { .. })
    }

    /// Moves to `epoch`: one chain step for the next epoch; a replay from the segment's start
    /// for any other.
    fn set_epoch(&mut self, py: Python<'_>, epoch: i64) -> PyResult<()> {
        let epoch =
            u64::try_from(epoch).map_err(|_| bad(format!("epoch must be at least 0, got {epoch}")))?;
        if epoch == self.epoch {
            return Ok(());
        }
        let (config, world, at) = (self.config.clone(), self.world, self.epoch);
        let (start, current) = (self.segment_start, self.current.clone());
        let result = guarded(py, move || Self::advanced(&config, world, start, &current, at, epoch))?;
        (self.segment_start, self.current) = result;
        self.epoch = epoch;
        Ok(())
    }

    /// Every rank's target this epoch (what it holds while the epoch trains), int64 arrays.
    #[pyo3(name = "targets")]
    fn py_targets<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyArray1<i64>>> {
        self.targets().iter().map(|t| crate::store::ids_array(py, t)).collect()
    }

    /// A copy of this core as it stands: what a background delivery works from, so that the
    /// sampler's own core stays free for the training thread (a `load_state` or `set_epoch`
    /// there while the delivery reads it would be a borrow conflict).
    fn copy(&self) -> SamplerCore {
        SamplerCore {
            config: self.config.clone(),
            world: self.world,
            epoch: self.epoch,
            segment_start: self.segment_start,
            current: self.current.clone(),
        }
    }

    /// A copy at the next epoch (computed without the GIL).
    #[pyo3(name = "stepped")]
    fn py_stepped(&self, py: Python<'_>) -> PyResult<SamplerCore> {
        guarded(py, || self.stepped())
    }

    /// A fingerprint of where the chain stands, equal on every rank that follows it.
    #[pyo3(name = "digest")]
    fn py_digest(&self) -> u64 {
        self.digest()
    }

    /// The number of samples each rank serves this epoch.
    fn num_samples(&self, drop_last: bool) -> usize {
        self.num_samples_for(drop_last)
    }

    /// Rank `rank`'s indices this epoch (numpy `int64`), in serving order.
    fn order<'py>(
        &self,
        py: Python<'py>,
        rank: usize,
        shuffle: bool,
        drop_last: bool,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let order = catch(|| self.order_for(rank, shuffle, drop_last))?;
        Ok(order.into_iter().map(i64::from).collect::<Vec<_>>().into_pyarray(py))
    }

    /// An iterator over rank `rank`'s indices this epoch from `start`.
    fn iter(&self, rank: usize, shuffle: bool, drop_last: bool, start: usize) -> PyResult<EpochIter> {
        let order = catch(|| self.order_for(rank, shuffle, drop_last))?;
        Ok(EpochIter { pos: start.min(order.len()), order })
    }

    /// Rank `rank`'s batch this epoch (sorted; a remainder epoch: its share of the rest).
    fn batch<'py>(&self, py: Python<'py>, rank: usize) -> PyResult<Bound<'py, PyArray1<i64>>> {
        if rank >= self.world {
            return Err(bad(format!("rank {rank} is not below num_replicas {}", self.world)).into());
        }
        let mut batch = match &self.current {
            Current::Chain { chain, .. } => chain.state().batches[rank].clone(),
            Current::Remainder { lists, real } => lists[rank][..real[rank]].to_vec(),
        };
        batch.sort_unstable();
        Ok(batch.into_iter().map(i64::from).collect::<Vec<_>>().into_pyarray(py))
    }

    /// What rank `rank` must receive this epoch: its batch minus what it caches.
    fn needs<'py>(&self, py: Python<'py>, rank: usize) -> PyResult<Bound<'py, PyArray1<i64>>> {
        if rank >= self.world {
            return Err(bad(format!("rank {rank} is not below num_replicas {}", self.world)).into());
        }
        let needs = match &self.current {
            Current::Chain { chain, before: Some(before), .. } => {
                difference(&chain.state().batches[rank], &before.caches[rank])
            }
            // A segment's first epoch: the rank loads its starting cache (its batch, plus with
            // alpha the chain's extra points).
            Current::Chain { chain, before: None, .. } => chain.state().caches[rank].clone(),
            Current::Remainder { lists, real } => {
                let mut own = lists[rank][..real[rank]].to_vec();
                own.sort_unstable();
                own
            }
        };
        Ok(needs.into_iter().map(i64::from).collect::<Vec<_>>().into_pyarray(py))
    }

    /// The epoch's plan: transmissions of the scheme against uncoded (planned now, without the
    /// GIL; a pliable scheme's step already planned it).
    fn plan_summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (config, current, world, epoch) =
            (self.config.clone(), self.current.clone(), self.world, self.epoch);
        let (kind, m) = guarded(py, move || match current {
            Current::Remainder { real, .. } => {
                let total: usize = real.iter().sum();
                let m = Made {
                    transmissions: total,
                    uncoded: total,
                    lower_bound: total,
                    made_by: "uncoded".into(),
                    points_moved: total,
                    points_exchanged: total,
                };
                Ok(("remainder", m))
            }
            Current::Chain { chain, before: None, .. } => {
                let total: usize = chain.state().caches.iter().map(Vec::len).sum();
                let m = Made {
                    transmissions: total,
                    uncoded: total,
                    lower_bound: total,
                    made_by: "uncoded".into(),
                    points_moved: config.points,
                    points_exchanged: config.points,
                };
                Ok(("initial", m))
            }
            Current::Chain { made: Some(m), .. } => Ok(("chain", m)),
            Current::Chain { chain, before: Some(before), made: None } => {
                let planner = Self::planner(&config)?;
                let old = before.batches.clone();
                let planned = Self::plan_from(&config, *chain.params(), before, planner.as_ref())?;
                let m = Made {
                    transmissions: planned.plan.len(),
                    uncoded: planned.instance.uncoded_transmissions(),
                    lower_bound: ubershuffle_planners::bounds::best_lower_bound(&planned.instance).value,
                    made_by: planned.made_by.clone(),
                    points_moved: moved(&old, &planned),
                    points_exchanged: planned.points_exchanged,
                };
                Ok(("chain", m))
            }
        })?;
        let d = PyDict::new(py);
        d.set_item("epoch", epoch)?;
        d.set_item("kind", kind)?;
        d.set_item("transmissions", m.transmissions)?;
        d.set_item("uncoded_transmissions", m.uncoded)?;
        d.set_item("lower_bound", m.lower_bound)?;
        d.set_item("made_by", m.made_by)?;
        d.set_item("points_moved", m.points_moved)?;
        d.set_item("points_exchanged", m.points_exchanged)?;
        d.set_item("world_size", world)?;
        Ok(d)
    }

    /// The state at `position` samples into this epoch (plain Python values and bytes).
    fn state<'py>(
        &self,
        py: Python<'py>,
        position: usize,
        shuffle: bool,
        drop_last: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let c = &self.config;
        d.set_item("version", STATE_VERSION)?;
        d.set_item("epoch", self.epoch)?;
        d.set_item("position", position)?;
        d.set_item("world_size", self.world)?;
        d.set_item("num_samples_total", c.points)?;
        d.set_item("seed", c.seed)?;
        d.set_item("shuffle", shuffle)?;
        d.set_item("drop_last", drop_last)?;
        d.set_item("policy", c.policy.name())?;
        d.set_item(
            "fraction",
            matches!(c.policy, ExchangePolicy::PartialLocal { .. }).then(|| c.policy.fraction()),
        )?;
        d.set_item("alpha", c.cache.alpha())?;
        d.set_item("extra_cache", c.cache.extra_cache())?;
        d.set_item("scheme", &c.scheme)?;
        d.set_item("candidates", c.candidates.map(|r| r.to_string()))?;
        d.set_item("segment_start", self.segment_start)?;
        d.set_item("first_epoch", c.start.name())?;
        match &self.current {
            Current::Chain { chain, before, .. } => {
                d.set_item("kind", "chain")?;
                // Without a pliable scheme the chain's state after this epoch is one cheap step
                // from the state before it: only that is kept (half the size).
                let after = match before {
                    Some(_) if !c.pliable => None,
                    _ => Some(chain_state_dict(py, chain.state())?),
                };
                d.set_item("chain", after)?;
                d.set_item("before", before.as_ref().map(|b| chain_state_dict(py, b)).transpose()?)?;
            }
            Current::Remainder { lists, real } => {
                d.set_item("kind", "remainder")?;
                d.set_item("lists", PyBytes::new(py, &lists_to_bytes(lists)))?;
                d.set_item("real", real.clone())?;
            }
        }
        Ok(d)
    }

    /// Loads `state` for `world` ranks; returns the position to resume from in this epoch
    /// (0 after a world-size change: the epoch becomes the remainder, served from its start).
    fn load_state(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>, world: i64) -> PyResult<usize> {
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            state.get_item(key)?.ok_or_else(|| bad(format!("the sampler state has no \"{key}\"")).into())
        };
        let version: u64 = get("version")?.extract()?;
        if version != STATE_VERSION {
            return Err(bad(format!(
                "the sampler state has version {version}; this ubershuffle reads version {STATE_VERSION}"
            ))
            .into());
        }
        let points: i64 = get("num_samples_total")?.extract()?;
        if points as usize != self.config.points {
            return Err(bad(format!(
                "the state is for a dataset of {points} samples, this sampler's has {}",
                self.config.points
            ))
            .into());
        }
        let world = catch(|| planning::count("num_replicas", world))?;
        if world == 0 {
            return Err(bad("num_replicas must be at least 1, got 0").into());
        }
        let policy: String = get("policy")?.extract()?;
        let fraction: Option<f64> = get("fraction")?.extract()?;
        let alpha: Option<f64> = get("alpha")?.extract()?;
        // States saved before extra_cache existed have no such key.
        let extra_cache: Option<f64> =
            state.get_item("extra_cache")?.map(|v| v.extract()).transpose()?.flatten();
        let scheme: String = get("scheme")?.extract()?;
        let candidates: Option<String> = get("candidates")?.extract()?;
        let seed: u64 = get("seed")?.extract()?;
        // States saved before first_epoch existed have no such key (their chains started at
        // random).
        let first_epoch: Option<String> = state.get_item("first_epoch")?.map(|v| v.extract()).transpose()?;
        let config = catch(|| {
            parse_config(
                points,
                seed,
                &policy,
                fraction,
                CacheSetting::new(alpha, extra_cache)?,
                &scheme,
                candidates.as_deref(),
                self.config.time_budget,
                self.config.plugin.clone(),
                first_epoch.as_deref(),
            )
        })?;
        let epoch: u64 = get("epoch")?.extract()?;
        let position: usize = get("position")?.extract()?;
        let saved_world: usize = get("world_size")?.extract()?;
        if saved_world == 0 || saved_world > config.points {
            return Err(bad(format!("the sampler state is corrupt (world_size {saved_world})")).into());
        }
        let segment_start: u64 = get("segment_start")?.extract()?;
        let shuffle_within: bool = get("shuffle")?.extract()?;
        let drop_last: bool = get("drop_last")?.extract()?;
        let kind: String = get("kind")?.extract()?;
        let current = if kind == "chain" {
            let params = catch(|| chain_params(&config, saved_world, segment_start))?;
            let before = match get("before")?.is_none() {
                true => None,
                false => Some(chain_state_from(&get("before")?)?),
            };
            if let Some(b) = &before {
                b.check_shape(saved_world, config.points)
                    .map_err(|e| bad(format!("the sampler state is corrupt: {e}")))?;
            }
            let after = get("chain")?;
            match (after.is_none(), before) {
                (false, before) => {
                    let state = chain_state_from(&after)?;
                    let chain = catch(|| EpochChain::with_state(params, state).map_err(bad_error))?;
                    Current::Chain { chain, before, made: None }
                }
                (true, Some(before)) => {
                    // The epoch is one step from the state before it (no planning: not pliable).
                    let config = config.clone();
                    guarded(py, move || {
                        let chain = EpochChain::with_state(params, before).map_err(bad_error)?;
                        let mut current = Current::Chain { chain, before: None, made: None };
                        Self::step(&config, &mut current)?;
                        Ok(current)
                    })?
                }
                (true, None) => return Err(bad("the sampler state is corrupt (it has no chain)").into()),
            }
        } else {
            let lists = lists_from_bytes(get("lists")?.extract::<&[u8]>()?)?;
            let real: Vec<usize> = get("real")?.extract()?;
            let out_of_range = lists.iter().flatten().any(|&p| p as usize >= config.points);
            if out_of_range
                || lists.len() != saved_world
                || real.len() != lists.len()
                || real.iter().zip(&lists).any(|(r, l)| *r > l.len())
            {
                return Err(bad("the sampler state is corrupt (remainder lengths)").into());
            }
            Current::Remainder { lists, real }
        };
        let saved = SamplerCore { config: config.clone(), world: saved_world, epoch, segment_start, current };
        if world == saved_world {
            *self = saved;
            return Ok(position);
        }
        if world > config.points {
            return Err(bad(format!(
                "more ranks ({world}) than samples ({}): every rank needs a batch",
                config.points
            ))
            .into());
        }
        let rest = catch(|| saved.remaining(position, shuffle_within, drop_last))?;
        let current = guarded(py, || Ok(Self::deal(config.seed, epoch, world, rest, shuffle_within)))?;
        *self = SamplerCore { config, world, epoch, segment_start, current };
        Ok(0)
    }
}

/// An iterator over one rank's indices of one epoch; `position` counts what it has served.
#[pyclass(module = "ubershuffle._native", subclass)]
pub struct EpochIter {
    order: Vec<u32>,
    pos: usize,
}

#[pymethods]
impl EpochIter {
    /// An iterator over `order` from `position`.
    #[new]
    #[pyo3(signature = (order, position=0))]
    fn py_new(order: PyReadonlyArray1<'_, i64>, position: usize) -> PyResult<Self> {
        let order: Vec<u32> = order
            .as_slice()?
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| bad(format!("index {i} is out of range"))))
            .collect::<Outcome<_>>()?;
        Ok(EpochIter { pos: position.min(order.len()), order })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self) -> Option<u32> {
        let item = self.order.get(self.pos).copied();
        if item.is_some() {
            self.pos += 1;
        }
        item
    }

    fn __len__(&self) -> usize {
        self.order.len() - self.pos
    }

    /// How many indices it has served (from the start of the epoch).
    #[getter]
    fn position(&self) -> usize {
        self.pos
    }

    /// The whole epoch's order (numpy `int64`).
    fn order<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.order.iter().map(|&i| i64::from(i)).collect::<Vec<_>>().into_pyarray(py)
    }

    /// Replaces the order and position (used when a state is loaded into a running iterator).
    fn _reset(&mut self, order: PyReadonlyArray1<'_, i64>, position: usize) -> PyResult<()> {
        *self = Self::py_new(order, position)?;
        Ok(())
    }
}

/// The sampler's chain as the data plane's engine reads it.
impl ubershuffle_plane::Schedule for SamplerCore {
    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn targets(&self) -> Vec<Vec<u32>> {
        SamplerCore::targets(self)
    }

    fn batches(&self) -> Vec<Vec<u32>> {
        SamplerCore::batches(self)
    }

    fn digest(&self) -> u64 {
        SamplerCore::digest(self)
    }

    fn next_starts_a_chain(&self) -> bool {
        matches!(self.current, Current::Remainder { .. })
    }

    fn stepped(&self) -> Result<Box<dyn ubershuffle_plane::Schedule>, String> {
        SamplerCore::stepped(self)
            .map(|s| Box::new(s) as Box<dyn ubershuffle_plane::Schedule>)
            .map_err(|f| f.to_string())
    }

    fn boxed_copy(&self) -> Box<dyn ubershuffle_plane::Schedule> {
        Box::new(self.copy_core())
    }

    fn draw_next(
        &self,
        most: Option<std::time::Duration>,
    ) -> Result<Option<ubershuffle_plane::schedule::NextDraw>, String> {
        SamplerCore::draw_next(self, most).map_err(|f| f.to_string())
    }
}

impl SamplerCore {
    /// An owned copy (for the data plane, which steps its own).
    pub(crate) fn copy_core(&self) -> SamplerCore {
        SamplerCore {
            config: self.config.clone(),
            world: self.world,
            epoch: self.epoch,
            segment_start: self.segment_start,
            current: self.current.clone(),
        }
    }
}
