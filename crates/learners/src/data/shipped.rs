//! The CSV tables shipped in the repository's `data/` folder (see its README for origin and
//! licence), embedded in the binary, and a loader for the user's own numeric CSV files.

use std::path::Path;

use super::Dataset;
use crate::LearnerError;

const IRIS_CSV: &str = include_str!("../../data/iris.csv");
const DIABETES_CSV: &str = include_str!("../../data/diabetes.csv");

/// A numeric CSV table: the header's column names and the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<f64>>,
}

/// Parses a comma-separated table with a header line and numbers in every other line;
/// `source` names the text in errors.
pub fn parse_csv(text: &str, source: &Path) -> Result<Table, LearnerError> {
    let parse_error =
        |line: usize, reason: String| LearnerError::Parse { path: source.to_path_buf(), line, reason };
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let Some((_, head)) = lines.next() else { return Err(parse_error(1, "the file is empty".into())) };
    let header: Vec<String> = head.split(',').map(|c| c.trim().to_string()).collect();
    let mut rows = Vec::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != header.len() {
            return Err(parse_error(
                i + 1,
                format!("{} fields, the header has {}", cells.len(), header.len()),
            ));
        }
        let row = cells
            .iter()
            .map(|c| c.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or(c))
            .collect::<Result<Vec<f64>, _>>()
            .map_err(|c| parse_error(i + 1, format!("'{c}' is not a finite number")))?;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(parse_error(1, "no data rows after the header".into()));
    }
    Ok(Table { header, rows })
}

impl Table {
    /// The samples with column `label` as the label and every other column as a feature.
    pub fn dataset(&self, label: &str, source: &Path) -> Result<Dataset, LearnerError> {
        let Some(col) = self.header.iter().position(|h| h == label) else {
            return Err(LearnerError::Parse {
                path: source.to_path_buf(),
                line: 1,
                reason: format!("no column '{label}' (columns: {})", self.header.join(", ")),
            });
        };
        let inputs: Vec<Vec<f64>> = self
            .rows
            .iter()
            .map(|r| r.iter().enumerate().filter(|(c, _)| *c != col).map(|(_, v)| *v).collect())
            .collect();
        Dataset::from_rows(self.header.len() - 1, &inputs, self.rows.iter().map(|r| r[col]).collect())
    }
}

/// Loads a numeric CSV file (header line, then numbers) with column `label` as the label.
pub fn load_csv(path: &Path, label: &str) -> Result<Dataset, LearnerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| LearnerError::Io { path: path.to_path_buf(), source })?;
    parse_csv(&text, path)?.dataset(label, path)
}

fn embedded(text: &str, name: &str, label: &str) -> Result<Dataset, LearnerError> {
    let path = Path::new("data").join(name);
    parse_csv(text, &path)?.dataset(label, &path)
}

/// Fisher's iris: 150 samples, 4 measurements, label `species` (0, 1, 2).
pub fn iris() -> Result<Dataset, LearnerError> {
    embedded(IRIS_CSV, "iris.csv", "species")
}

/// Efron et al.'s diabetes data: 442 samples, 10 baseline variables, label `progression`.
pub fn diabetes() -> Result<Dataset, LearnerError> {
    embedded(DIABETES_CSV, "diabetes.csv", "progression")
}

/// A learning task on a shipped table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShippedTask {
    /// Linear regression of diabetes `progression` (standardised with the training split).
    DiabetesRegression,
    /// Logistic regression: diabetes `progression` above the training split's median (1) or not (0).
    DiabetesAboveMedian,
    /// Logistic regression: iris species virginica (1) or not (0). Virginica is not linearly
    /// separable from versicolor, so the logistic loss has a finite minimiser.
    IrisVirginica,
}

impl ShippedTask {
    /// Every task.
    pub const ALL: [ShippedTask; 3] =
        [ShippedTask::DiabetesRegression, ShippedTask::DiabetesAboveMedian, ShippedTask::IrisVirginica];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            ShippedTask::DiabetesRegression => "diabetes-regression",
            ShippedTask::DiabetesAboveMedian => "diabetes-above-median",
            ShippedTask::IrisVirginica => "iris-virginica",
        }
    }

    /// Whether the labels are 0/1 classes (logistic regression) rather than real values.
    pub fn is_classification(self) -> bool {
        !matches!(self, ShippedTask::DiabetesRegression)
    }

    /// `(train, held_out)`: a seeded split with `held_out_fraction` held out, features
    /// standardised with the training split's moments, labels prepared for the task.
    pub fn prepare(self, held_out_fraction: f64, seed: u64) -> Result<(Dataset, Dataset), LearnerError> {
        let data = match self {
            ShippedTask::DiabetesRegression | ShippedTask::DiabetesAboveMedian => diabetes()?,
            ShippedTask::IrisVirginica => iris()?,
        };
        let (train, held_out) = data.split(held_out_fraction, seed);
        let moments = train.feature_moments();
        let (train, held_out) = (train.standardized(&moments), held_out.standardized(&moments));
        Ok(match self {
            ShippedTask::DiabetesRegression => {
                let n = train.len().max(1) as f64;
                let mean = train.labels().iter().sum::<f64>() / n;
                let sd =
                    (train.labels().iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n).sqrt().max(1e-12);
                let f = |y: f64| (y - mean) / sd;
                (train.map_labels(f), held_out.map_labels(f))
            }
            ShippedTask::DiabetesAboveMedian => {
                let mut sorted = train.labels().to_vec();
                sorted.sort_by(f64::total_cmp);
                let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
                let f = move |y: f64| if y > median { 1.0 } else { 0.0 };
                (train.map_labels(f), held_out.map_labels(f))
            }
            ShippedTask::IrisVirginica => {
                let f = |y: f64| if y == 2.0 { 1.0 } else { 0.0 };
                (train.map_labels(f), held_out.map_labels(f))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_tables_load() {
        let iris = iris().unwrap();
        assert_eq!((iris.len(), iris.features()), (150, 4));
        assert_eq!(iris.labels().iter().filter(|&&y| y == 2.0).count(), 50);
        let diabetes = diabetes().unwrap();
        assert_eq!((diabetes.len(), diabetes.features()), (442, 10));
        let (train, held) = ShippedTask::DiabetesRegression.prepare(0.2, 1).unwrap();
        assert_eq!((train.len(), held.len()), (354, 88));
        let mean: f64 = train.inputs().column(2).sum() / train.len() as f64;
        assert!(mean.abs() < 1e-9, "standardised features have mean 0 on the training split");
    }

    #[test]
    fn bad_csv_is_an_error_with_the_line() {
        let p = Path::new("x.csv");
        let e = parse_csv("a,b\n1,2\n3,x\n", p).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("'x'"), "{e}");
        assert!(parse_csv("a,b\n1\n", p).unwrap_err().to_string().contains("line 2"));
        assert!(parse_csv("", p).is_err());
        assert!(parse_csv("a,b\n1,2\n", p).unwrap().dataset("c", p).is_err());
    }
}
