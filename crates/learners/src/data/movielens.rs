//! A loader for MovieLens rating files from a path the user gives (the data sets are not
//! shipped: their licence forbids redistribution).
//!
//! Two formats: `u.data` of MovieLens 100k (`user<TAB>item<TAB>rating<TAB>timestamp`, no
//! header) and `ratings.csv` of the later releases (`userId,movieId,rating,timestamp` with
//! that header line). User and item ids are mapped to dense row and column indices in
//! increasing id order.

use std::collections::BTreeMap;
use std::path::Path;

use super::RatingData;
use crate::LearnerError;
use crate::sample::Rating;

/// Ratings with the original ids of their rows and columns.
#[derive(Clone, Debug, PartialEq)]
pub struct MovieLens {
    /// The ratings, with dense row (user) and column (item) indices.
    pub data: RatingData,
    /// `user_ids[row]`: the file's user id of each row.
    pub user_ids: Vec<u64>,
    /// `item_ids[col]`: the file's item id of each column.
    pub item_ids: Vec<u64>,
}

/// Reads a MovieLens `u.data` or `ratings.csv` file (told apart by the `userId` header).
pub fn load(path: &Path) -> Result<MovieLens, LearnerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| LearnerError::Io { path: path.to_path_buf(), source })?;
    parse(&text, path)
}

/// Parses the text of a MovieLens file; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<MovieLens, LearnerError> {
    let error = |line: usize, reason: String| LearnerError::Parse { path: path.to_path_buf(), line, reason };
    let mut triples = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    let csv = lines.peek().is_some_and(|(_, l)| l.trim_start().starts_with("userId"));
    if csv {
        lines.next();
    }
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = if csv {
            line.split(',').map(str::trim).collect()
        } else {
            line.split('\t').map(str::trim).collect()
        };
        if fields.len() < 3 {
            let want = if csv {
                "userId,movieId,rating,timestamp"
            } else {
                "user<TAB>item<TAB>rating<TAB>timestamp"
            };
            return Err(error(i + 1, format!("expected {want}, got '{line}'")));
        }
        let id = |k: usize, what: &str| {
            fields[k]
                .parse::<u64>()
                .map_err(|_| error(i + 1, format!("{what} '{}' is not a non-negative integer", fields[k])))
        };
        let (user, item) = (id(0, "user id")?, id(1, "item id")?);
        let rating = fields[2]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| error(i + 1, format!("rating '{}' is not a number", fields[2])))?;
        triples.push((user, item, rating));
    }
    if triples.is_empty() {
        return Err(error(1, "no ratings".into()));
    }
    let index = |ids: Vec<u64>| -> BTreeMap<u64, u32> {
        let mut sorted = ids;
        sorted.sort_unstable();
        sorted.dedup();
        sorted.into_iter().enumerate().map(|(k, id)| (id, k as u32)).collect()
    };
    let users = index(triples.iter().map(|t| t.0).collect());
    let items = index(triples.iter().map(|t| t.1).collect());
    if users.len() + items.len() > u32::MAX as usize {
        return Err(error(1, "too many distinct users and items".into()));
    }
    let ratings =
        triples.iter().map(|&(u, m, v)| Rating { row: users[&u], col: items[&m], value: v }).collect();
    Ok(MovieLens {
        data: RatingData { rows: users.len(), cols: items.len(), ratings },
        user_ids: users.keys().copied().collect(),
        item_ids: items.keys().copied().collect(),
    })
}
