//! How random the run's assignments are over its epochs: every point's owner counts, for the
//! chi-square against uniform. Each epoch's own statistics come from
//! [`ubershuffle_core::epoch_chain::PlannedEpoch::randomness`].

use ubershuffle_core::pliable::OwnerFrequencies;

/// The most `q n` counts a run keeps for the chi-square over epochs (16 bits each: 128 MiB).
const MAX_FREQUENCY_CELLS: usize = 1 << 26;

/// The point-to-worker counts of a run, when small enough to keep.
pub(crate) fn owner_frequencies(points: usize, workers: usize) -> Option<OwnerFrequencies> {
    (points.saturating_mul(workers) <= MAX_FREQUENCY_CELLS).then(|| OwnerFrequencies::new(points, workers))
}

/// Records an epoch's owners (live indices mapped to worker ids) and returns the chi-square
/// per degree of freedom so far.
pub(crate) fn record_owners(
    frequencies: &mut Option<OwnerFrequencies>,
    owners: &[u32],
    live: &[usize],
) -> Option<f64> {
    let f = frequencies.as_mut()?;
    let ids: Vec<u32> =
        owners.iter().map(|&k| live.get(k as usize).map_or(u32::MAX, |&w| w as u32)).collect();
    f.record(&ids);
    let chi = f.chi_square_per_df();
    chi.is_finite().then_some(chi)
}
