//! [`Setting`], the name of one field of a [`RunSpec`](super::RunSpec), and [`SpecError`], a
//! problem with a run's settings said in terms of them, so that each front end (the command
//! line's flags, Python's keyword arguments, a TOML file's keys) can name them its own way.

use std::fmt;

/// One setting of a run, as errors name it; [`Setting::name`] is its key in the serde forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// Number of workers.
    Workers,
    /// Epochs to run.
    Epochs,
    /// Storage ratio.
    Alpha,
    /// How batches change between epochs.
    Policy,
    /// The partial-local fraction.
    Fraction,
    /// The scheme's name.
    Scheme,
    /// A plugin library.
    Plugin,
    /// A pliable scheme's randomness constraint.
    Candidates,
    /// Which learner.
    Learner,
    /// Linear regression's training points.
    Points,
    /// Linear regression's input features.
    Features,
    /// Linear regression's passes over the local batch.
    LocalPasses,
    /// Label or entry noise.
    Noise,
    /// SGD step size.
    StepSize,
    /// Matrix completion's rows.
    Rows,
    /// Matrix completion's columns.
    Cols,
    /// Matrix completion's rank.
    Rank,
    /// Matrix completion's observed entries per row.
    RatingsPerRow,
    /// Matrix completion's l2 penalty.
    Regularization,
    /// Matrix completion's initial factor scale.
    InitScale,
    /// The straggler model.
    Stragglers,
    /// How long the master waits for updates.
    Deadline,
    /// The seed.
    Seed,
    /// The planner's search budget.
    TimeBudget,
    /// Largest payload of one data message.
    ChunkBytes,
    /// Where the checkpoint goes.
    Checkpoint,
    /// Continue from the checkpoint.
    Resume,
}

impl Setting {
    /// The setting's key in [`RunSpec`](super::RunSpec)'s serde forms (`chunk-bytes`).
    pub fn name(self) -> &'static str {
        match self {
            Setting::Workers => "workers",
            Setting::Epochs => "epochs",
            Setting::Alpha => "alpha",
            Setting::Policy => "policy",
            Setting::Fraction => "fraction",
            Setting::Scheme => "scheme",
            Setting::Plugin => "plugin",
            Setting::Candidates => "candidates",
            Setting::Learner => "learner",
            Setting::Points => "points",
            Setting::Features => "features",
            Setting::LocalPasses => "local-passes",
            Setting::Noise => "noise",
            Setting::StepSize => "step-size",
            Setting::Rows => "rows",
            Setting::Cols => "cols",
            Setting::Rank => "rank",
            Setting::RatingsPerRow => "ratings-per-row",
            Setting::Regularization => "regularization",
            Setting::InitScale => "init-scale",
            Setting::Stragglers => "stragglers",
            Setting::Deadline => "deadline",
            Setting::Seed => "seed",
            Setting::TimeBudget => "time-budget",
            Setting::ChunkBytes => "chunk-bytes",
            Setting::Checkpoint => "checkpoint",
            Setting::Resume => "resume",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A piece of a [`SpecError`]'s sentence: words, or the name of a setting.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Setting(Setting),
}

/// A run's settings cannot run: one sentence that starts with the setting at fault and may
/// name others. [`Display`](fmt::Display) names settings by [`Setting::name`];
/// [`SpecError::render`] names them as a front end spells them (`--alpha`, `alpha=`).
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    setting: Setting,
    pieces: Vec<Piece>,
}

impl SpecError {
    /// `setting` followed by a space and `problem` ("alpha" + "must lie in (0, 1], got 2");
    /// the pieces appended later are written as they are.
    pub fn new(setting: Setting, problem: impl Into<String>) -> SpecError {
        SpecError { setting, pieces: vec![Piece::Text(problem.into())] }
    }

    /// Appends the name of another setting to the sentence.
    pub fn then_setting(mut self, other: Setting) -> SpecError {
        self.pieces.push(Piece::Setting(other));
        self
    }

    /// Appends words to the sentence.
    pub fn then(mut self, text: impl Into<String>) -> SpecError {
        self.pieces.push(Piece::Text(text.into()));
        self
    }

    /// The setting at fault.
    pub fn setting(&self) -> Setting {
        self.setting
    }

    /// The sentence with every setting named by `name`.
    pub fn render(&self, name: &dyn Fn(Setting) -> String) -> String {
        let mut out = name(self.setting);
        for (i, piece) in self.pieces.iter().enumerate() {
            if i == 0 {
                out.push(' ');
            }
            match piece {
                Piece::Text(text) => out += text,
                Piece::Setting(s) => out += &name(*s),
            }
        }
        out
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&|s| s.name().to_string()))
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_settings_as_each_front_end_spells_them() {
        let e = SpecError::new(Setting::Stragglers, "iid:0.2 needs ")
            .then_setting(Setting::Deadline)
            .then(" (how long the master waits)");
        assert_eq!(e.to_string(), "stragglers iid:0.2 needs deadline (how long the master waits)");
        let flag = |s: Setting| format!("--{}", s.name());
        assert_eq!(e.render(&flag), "--stragglers iid:0.2 needs --deadline (how long the master waits)");
        assert_eq!(e.setting(), Setting::Stragglers);
    }
}
