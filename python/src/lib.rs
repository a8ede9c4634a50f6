//! `ubershuffle._native`: the Rust side of the Python package `ubershuffle`. The public,
//! documented API is the Python package (`ubershuffle/__init__.py`); these functions take
//! already-normalised arguments (integer arrays, plain strings) and return dicts and numpy
//! arrays. Planning runs without the GIL, and a Rust panic is raised as `RuntimeError`.

mod cache_setting;
mod errors;
mod plane;
mod planning;
mod sampler;
mod store;

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::guarded;
use crate::planning::{EpochsArgs, Outcome1, PlanArgs};

/// `[{"name": ..., "description": ...}, ...]` as `ubershuffle schemes --json` prints it.
#[pyfunction]
#[pyo3(signature = (plugin=None))]
fn schemes<'py>(py: Python<'py>, plugin: Option<String>) -> PyResult<Bound<'py, PyList>> {
    let list = guarded(py, || planning::schemes(plugin.as_deref()))?;
    let out = PyList::empty(py);
    for (name, description) in list {
        let entry = PyDict::new(py);
        entry.set_item("name", name)?;
        entry.set_item("description", description)?;
        if let Some(path) = &plugin {
            entry.set_item("plugin", path)?;
        }
        out.append(entry)?;
    }
    Ok(out)
}

/// The counts and packets of a plan as a dict (packets as flat numpy arrays).
fn outcome_dict<'py>(py: Python<'py>, o: Outcome1, seed: u64) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let inst = &o.instance;
    d.set_item("scheme", &o.scheme)?;
    d.set_item("made_by", &o.made_by)?;
    d.set_item("workers", inst.workers())?;
    d.set_item("points", inst.points())?;
    d.set_item("cache_size", inst.cache_size())?;
    d.set_item("seed", seed)?;
    d.set_item("transmissions", o.plan.len())?;
    d.set_item("parts", o.plan.total_parts())?;
    d.set_item("uncoded_transmissions", o.uncoded)?;
    d.set_item("fully_random_uncoded_transmissions", o.fully_random_uncoded)?;
    d.set_item("lower_bound", o.bound.value)?;
    d.set_item("lower_bound_kind", o.bound.kind)?;
    d.set_item("theorem1_transmissions", o.theorem1)?;
    d.set_item("verified", o.verified)?;
    d.set_item("plan_seconds", o.plan_seconds)?;
    d.set_item("verify_seconds", o.verify_seconds)?;
    d.set_item("lower_bound_seconds", o.lower_bound_seconds)?;
    let tried = PyList::empty(py);
    for t in &o.tried {
        let entry = PyDict::new(py);
        entry.set_item("scheme", &t.scheme)?;
        match &t.outcome {
            Ok(n) => entry.set_item("transmissions", n)?,
            Err(reason) => entry.set_item("skipped", reason)?,
        }
        tried.append(entry)?;
    }
    d.set_item("tried", tried)?;
    let mut offsets = Vec::with_capacity(o.plan.len() + 1);
    let mut points = Vec::with_capacity(o.plan.total_parts());
    let mut workers = Vec::with_capacity(o.plan.total_parts());
    offsets.push(0i64);
    for t in o.plan.iter() {
        for part in t {
            points.push(part.point);
            workers.push(part.worker);
        }
        offsets.push(points.len() as i64);
    }
    d.set_item("packet_offsets", offsets.into_pyarray(py))?;
    d.set_item("packet_points", points.into_pyarray(py))?;
    d.set_item("packet_workers", workers.into_pyarray(py))?;
    let assignment = PyList::empty(py);
    for w in 0..inst.workers() {
        assignment.append(inst.assignment(w).to_vec().into_pyarray(py))?;
    }
    d.set_item("assignment", assignment)?;
    Ok(d)
}

/// `ubershuffle plan --workers --points [--alpha] --scheme --seed [--time-budget] --json`.
#[pyfunction]
#[pyo3(signature = (workers, points, alpha, scheme, seed, time_budget, plugin, candidates))]
#[allow(clippy::too_many_arguments)]
fn plan<'py>(
    py: Python<'py>,
    workers: i64,
    points: i64,
    alpha: Option<f64>,
    scheme: String,
    seed: u64,
    time_budget: Option<f64>,
    plugin: Option<String>,
    candidates: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let outcome = guarded(py, || {
        let args = PlanArgs {
            workers: planning::count("workers", workers)?,
            points: planning::count("points", points)?,
            alpha,
            scheme,
            seed,
            time_budget,
            plugin,
            candidates,
        };
        planning::plan_generated(&args)
    })?;
    outcome_dict(py, outcome, seed)
}

/// Lists of int64 arrays as vectors.
fn lists(arrays: &[PyReadonlyArray1<'_, i64>]) -> PyResult<Vec<Vec<i64>>> {
    arrays.iter().map(|a| Ok(a.as_slice()?.to_vec())).collect()
}

/// Plans a given instance (caches and assignment as int64 arrays, one per worker).
#[pyfunction]
#[pyo3(signature = (caches, assignment, points, scheme, seed, time_budget, plugin, candidates))]
#[allow(clippy::too_many_arguments)]
fn plan_instance<'py>(
    py: Python<'py>,
    caches: Vec<PyReadonlyArray1<'py, i64>>,
    assignment: Vec<PyReadonlyArray1<'py, i64>>,
    points: Option<i64>,
    scheme: String,
    seed: u64,
    time_budget: Option<f64>,
    plugin: Option<String>,
    candidates: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let (caches, assignment) = (lists(&caches)?, lists(&assignment)?);
    let outcome = guarded(py, || {
        let points = points.map(|p| planning::count("points", p)).transpose()?;
        let inst = planning::instance_from(&caches, &assignment, points)?;
        let options = planning::options(time_budget)?;
        let planner = planning::choose_planner(&scheme, plugin.as_deref(), &options)?;
        let randomness = planning::randomness(candidates.as_deref())?;
        if planner.as_pliable().is_some() {
            return planning::plan_pliable(
                planner.as_ref(),
                inst,
                None,
                randomness.unwrap_or_default(),
                seed,
            );
        }
        planning::refuse_candidates(planner.as_ref(), randomness)?;
        planning::plan_fixed(planner.as_ref(), inst, seed)
    })?;
    outcome_dict(py, outcome, seed)
}

/// Verifies a plan (flat arrays) on an instance: `(valid, [(worker, missing points), ...])`.
#[pyfunction]
#[pyo3(signature = (caches, assignment, points, offsets, packet_points, packet_workers))]
#[allow(clippy::type_complexity)]
fn verify<'py>(
    py: Python<'py>,
    caches: Vec<PyReadonlyArray1<'py, i64>>,
    assignment: Vec<PyReadonlyArray1<'py, i64>>,
    points: Option<i64>,
    offsets: PyReadonlyArray1<'py, i64>,
    packet_points: PyReadonlyArray1<'py, i64>,
    packet_workers: PyReadonlyArray1<'py, i64>,
) -> PyResult<(bool, Vec<(usize, Vec<u32>)>)> {
    let (caches, assignment) = (lists(&caches)?, lists(&assignment)?);
    let (offsets, pp, pw) = (
        offsets.as_slice()?.to_vec(),
        packet_points.as_slice()?.to_vec(),
        packet_workers.as_slice()?.to_vec(),
    );
    guarded(py, || {
        let points = points.map(|p| planning::count("points", p)).transpose()?;
        let inst = planning::instance_from(&caches, &assignment, points)?;
        let plan = planning::plan_from(&offsets, &pp, &pw)?;
        planning::verify_plan(&inst, &plan)
    })
}

/// The largest lower bound on an instance: `(value, kind, uncoded transmissions)`.
#[pyfunction]
#[pyo3(signature = (caches, assignment, points))]
fn lower_bound<'py>(
    py: Python<'py>,
    caches: Vec<PyReadonlyArray1<'py, i64>>,
    assignment: Vec<PyReadonlyArray1<'py, i64>>,
    points: Option<i64>,
) -> PyResult<(usize, String, usize)> {
    let (caches, assignment) = (lists(&caches)?, lists(&assignment)?);
    guarded(py, || {
        let points = points.map(|p| planning::count("points", p)).transpose()?;
        let inst = planning::instance_from(&caches, &assignment, points)?;
        let bound = ubershuffle_planners::bounds::best_lower_bound(&inst);
        Ok((bound.value, bound.kind.to_string(), inst.uncoded_transmissions()))
    })
}

/// `ubershuffle plan --policy P [--fraction Q] --epochs E --json`'s `per_epoch`, as dicts.
#[pyfunction]
#[pyo3(signature = (workers, points, policy, fraction, alpha, scheme, epochs, seed, time_budget, plugin))]
#[allow(clippy::too_many_arguments)]
fn plan_epochs<'py>(
    py: Python<'py>,
    workers: i64,
    points: i64,
    policy: String,
    fraction: Option<f64>,
    alpha: Option<f64>,
    scheme: String,
    epochs: i64,
    seed: u64,
    time_budget: Option<f64>,
    plugin: Option<String>,
) -> PyResult<Bound<'py, PyList>> {
    let records = guarded(py, || {
        let args = EpochsArgs {
            workers: planning::count("workers", workers)?,
            points: planning::count("points", points)?,
            policy,
            fraction,
            alpha,
            scheme,
            epochs: planning::count("epochs", epochs)?,
            seed,
            time_budget,
            plugin,
        };
        planning::plan_epochs(&args)
    })?;
    let out = PyList::empty(py);
    for r in records {
        let d = PyDict::new(py);
        d.set_item("epoch", r.epoch)?;
        d.set_item("points_exchanged", r.points_exchanged)?;
        d.set_item("points_moved", r.points_moved)?;
        d.set_item("transmissions", r.transmissions)?;
        d.set_item("uncoded_transmissions", r.uncoded_transmissions)?;
        d.set_item("verified", r.verified)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The default segment size for coded delivery of records at `offsets` (int64, `records + 1`).
#[pyfunction]
fn default_segment_bytes(offsets: PyReadonlyArray1<'_, i64>) -> PyResult<usize> {
    let index = store::index_from_offsets(offsets.as_slice()?)?;
    Ok(ubershuffle_codes::default_segment_bytes(&index))
}

/// Panics on purpose (for the test that a panic becomes `RuntimeError`).
#[pyfunction]
fn _panic_for_test(py: Python<'_>) -> PyResult<()> {
    guarded(py, || -> errors::Outcome<()> { panic!("a deliberate panic") })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(schemes, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(plan_instance, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(lower_bound, m)?)?;
    m.add_function(wrap_pyfunction!(plan_epochs, m)?)?;
    m.add_function(wrap_pyfunction!(default_segment_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_class::<sampler::SamplerCore>()?;
    m.add_class::<sampler::EpochIter>()?;
    m.add_class::<store::StoreCore>()?;
    m.add_class::<plane::CodedSendCore>()?;
    m.add_class::<plane::engine::PlaneListener>()?;
    m.add_class::<plane::engine::PlaneCore>()?;
    m.add_class::<plane::outside::OutsideStore>()?;
    m.add_function(wrap_pyfunction!(plane::outside::join_store, m)?)?;
    m.add_function(wrap_pyfunction!(plane::outside::plane_token_key, m)?)?;
    m.add_class::<plane::reader::SourceReader>()?;
    m.add_class::<plane::tar::TarWalker>()?;
    m.add_function(wrap_pyfunction!(plane::tar::scan_tar, m)?)?;
    m.add_function(wrap_pyfunction!(plane::tar::scan_tar_bytes, m)?)?;
    let py = m.py();
    m.add("ShuffleError", py.get_type::<plane::engine::ShuffleError>())?;
    m.add("ShuffleTimeout", py.get_type::<plane::engine::ShuffleTimeout>())?;
    m.add("PeerClosed", py.get_type::<plane::engine::PeerClosed>())?;
    m.add("PeerFailed", py.get_type::<plane::engine::PeerFailed>())?;
    m.add("ShuffleClosed", py.get_type::<plane::engine::ShuffleClosed>())?;
    Ok(())
}
