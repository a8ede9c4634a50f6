//! Part of `ubershuffle plan`: the Attia-Tandon figures printed beside the count when the
//! instance has no excess storage (every worker caches exactly its previous batch).

use serde_json::{Value, json};
use ubershuffle_core::ShuffleInstance;
use ubershuffle_planners::no_excess::ShuffleMatrix;

/// `shuffle_matrix` (its text form), `achievable_bound` (eq. (43)), `ignored_worker` and
/// `worst_case` (Theorem 3, `(K-1) N/K`; null when `K` does not divide `N`); nothing when the
/// instance has excess storage.
pub fn fields(inst: &ShuffleInstance) -> Vec<(&'static str, Value)> {
    let Ok(s) = ShuffleMatrix::from_instance(inst) else { return Vec::new() };
    vec![
        ("shuffle_matrix", json!(s.to_string())),
        ("achievable_bound", json!(s.achievable_transmissions())),
        ("ignored_worker", json!(s.ignored_worker())),
        ("worst_case", json!(s.worst_case_transmissions())),
    ]
}
