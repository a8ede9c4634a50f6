//! What shuffling the roles does to one placement of the slow workers (exact enumeration).

use serde::Serialize;
use ubershuffle_gradient_codes::{EncodingMatrix, ErrorTable, RoleShuffle};
use ubershuffle_learners::gradient_coding::expected::enumerate;

use super::{N, PAPER, S};
use crate::report::{Row, markdown_table};

/// The numbers of slow workers enumerated.
const SLOW: [usize; 3] = [1, 2, 3];

/// The long-run error of the placements of `slow_workers` slow workers under one shuffle.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Placements {
    code: &'static str,
    workers: usize,
    replication: usize,
    p_slow_straggle: f64,
    slow_workers: usize,
    shuffle: &'static str,
    mean: f64,
    min_over_placements: f64,
    max_over_placements: f64,
}

impl Row for Placements {}

pub(super) fn measure() -> anyhow::Result<Vec<Placements>> {
    let mut rows = Vec::new();
    for b in [EncodingMatrix::uncoded(N)?, EncodingMatrix::frc(N, S)?, EncodingMatrix::crc(N, S)?] {
        let table = ErrorTable::new(&b)?;
        for m in SLOW {
            for shuffle in RoleShuffle::ALL {
                if let Some(e) = enumerate(&table, m, PAPER, shuffle) {
                    rows.push(Placements {
                        code: b.kind().name(),
                        workers: N,
                        replication: b.replication(),
                        p_slow_straggle: PAPER.p_slow_straggle,
                        slow_workers: m,
                        shuffle: shuffle.name(),
                        mean: e.mean,
                        min_over_placements: e.min_over_placements,
                        max_over_placements: e.max_over_placements,
                    });
                }
            }
        }
    }
    Ok(rows)
}

pub(super) fn section(rows: &[Placements]) -> String {
    let find = |code: &str, m: usize, shuffle: RoleShuffle| {
        rows.iter().find(|r| r.code == code && r.slow_workers == m && r.shuffle == shuffle.name())
    };
    let mut cases: Vec<(&str, usize)> = rows.iter().map(|r| (r.code, r.slow_workers)).collect();
    cases.dedup();
    let table = cases.iter().map(|&(code, m)| {
        let mean = find(code, m, RoleShuffle::Random).map_or("-".into(), |r| format!("{:.4}", r.mean));
        let spread = RoleShuffle::ALL.map(|s| {
            find(code, m, s).map_or("-".into(), |r| {
                format!("{:.4} .. {:.4}", r.min_over_placements, r.max_over_placements)
            })
        });
        [code.to_string(), m.to_string(), mean].into_iter().chain(spread).collect::<Vec<_>>()
    });
    let header =
        ["code", "m", "mean", "none: best .. worst", "cyclic: best .. worst", "random: best .. worst"];
    let widest = |shuffle: RoleShuffle| {
        rows.iter()
            .filter(|r| r.shuffle == shuffle.name())
            .map(|r| r.max_over_placements - r.min_over_placements)
            .fold(0.0, f64::max)
    };
    let mean_gap = cases
        .iter()
        .map(|&(code, m)| {
            let means: Vec<f64> =
                rows.iter().filter(|r| r.code == code && r.slow_workers == m).map(|r| r.mean).collect();
            means.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                - means.iter().copied().fold(f64::INFINITY, f64::min)
        })
        .fold(0.0, f64::max);
    format!(
        "\n### What shuffling changes (n = {N}, s = {S}, exactly m slow workers)\n\n\
         Averaged over where the slow workers sit, the expected error is the same with and without shuffling \
         (relabelling workers leaves a uniformly random placement uniformly random); here the three shuffles' means \
         differ by at most {mean_gap:.1e}. What shuffling changes is the long-run error of a *given* placement \
         (exact enumeration, best and worst placement):\n\n{}\n\
         The best and worst placements differ by up to {:.4} without shuffling, {:.4} with cyclic and {:.1e} with \
         random shuffling. Without shuffling, slow workers that share partitions (the same FRC group, neighbouring \
         CRC roles) hold them back for the whole run; shuffling moves the roles every iteration. That is what can \
         bias the trained model without shuffling (next section).\n",
        markdown_table(&header, table),
        widest(RoleShuffle::None),
        widest(RoleShuffle::Cyclic),
        widest(RoleShuffle::Random),
    )
}
