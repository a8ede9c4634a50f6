//! Closed forms from the papers, printed next to simulated counts.

/// The UberShuffle paper's Theorem 1 (from Lee et al.): as `q` grows, coded shuffling sends
/// `R_c = q / (n p)^2 * ((1-p)^(n+1) + (n-1) p (1-p) - (1-p)^2)` broadcasts per epoch, where
/// `p = (s - q/n) / (q - q/n)` is the chance that a point outside a worker's batch is cached by it.
///
/// At `p = 0` (no excess storage) the formula is `0/0`; its limit, `q (n-1) / (2n)`, is returned.
/// `None` when `n < 2` (there is nothing to shuffle between workers) or `s` is outside `[q/n, q]`.
///
/// ```
/// use ubershuffle_core::theory::theorem1_coded_transmissions;
/// let r = theorem1_coded_transmissions(20, 1_000_000, 550_000).unwrap();
/// assert!((r - 40_725.0).abs() < 1.0);
/// ```
pub fn theorem1_coded_transmissions(workers: usize, points: usize, cache_size: usize) -> Option<f64> {
    if workers < 2 || points == 0 {
        return None;
    }
    let (n, q, s) = (workers as f64, points as f64, cache_size as f64);
    let p = (s - q / n) / (q - q / n);
    if !(-1e-12..=1.0 + 1e-12).contains(&p) {
        return None;
    }
    let p = p.clamp(0.0, 1.0);
    if p < 1e-6 {
        // Series of the bracket around p = 0: n(n-1)/2 p^2 + O(p^3).
        return Some(q * (n - 1.0) / (2.0 * n));
    }
    let r = 1.0 - p;
    Some(q / (n * p).powi(2) * (r.powf(n + 1.0) + (n - 1.0) * p * r - r * r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_known_values() {
        // No excess storage: the limit q(n-1)/(2n).
        assert_eq!(theorem1_coded_transmissions(4, 100, 25), Some(37.5));
        // Continuity at a tiny p.
        let near = theorem1_coded_transmissions(4, 1_000_000_000, 250_000_100).unwrap();
        assert!((near - 375_000_000.0).abs() / 375_000_000.0 < 1e-3);
        // Everything cached: nothing to send.
        assert!(theorem1_coded_transmissions(3, 90, 90).unwrap().abs() < 1e-9);
        assert_eq!(theorem1_coded_transmissions(1, 10, 10), None);
        // Close to the paper's approximation q(1-alpha)/(alpha n) = 40909 at n = 20.
        let r = theorem1_coded_transmissions(20, 1_000_000, 550_000).unwrap();
        assert!((r - 40_725.0).abs() < 1.0, "{r}");
        assert!((r / (1e6 * 0.45 / (0.55 * 20.0)) - 1.0).abs() < 0.01);
    }
}
