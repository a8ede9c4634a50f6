//! [`Figures`]: what one epoch's delivery moved and cost at one rank, by name, in the order
//! they were set.

/// One figure's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    /// A count of things or bytes.
    Count(u64),
    /// Seconds, or a ratio.
    Real(f64),
    /// A word (`"step"`, `"catch-up"`).
    Word(&'static str),
    /// One value per step or round.
    Reals(Vec<f64>),
    /// One flag per step.
    Flags(Vec<bool>),
    /// A name (the scheme that made a plan).
    Text(String),
    /// Counts per round and rank.
    Table(Vec<Vec<u64>>),
    /// Per round, counts from rank to rank.
    Tables(Vec<Vec<Vec<u64>>>),
}

/// The figures of one epoch's delivery at one rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures(Vec<(&'static str, Figure)>);

impl Figures {
    /// Sets `name` to `value` (replacing an earlier value).
    pub fn set(&mut self, name: &'static str, value: Figure) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// Sets a count.
    pub fn count(&mut self, name: &'static str, value: u64) {
        self.set(name, Figure::Count(value));
    }

    /// Sets seconds or a ratio.
    pub fn real(&mut self, name: &'static str, value: f64) {
        self.set(name, Figure::Real(value));
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&Figure> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The count `name` (0 when unset or not a count).
    pub fn count_of(&self, name: &str) -> u64 {
        match self.get(name) {
            Some(Figure::Count(c)) => *c,
            _ => 0,
        }
    }

    /// Every figure, in the order set.
    pub fn iter(&self) -> impl Iterator<Item = &(&'static str, Figure)> {
        self.0.iter()
    }

    /// Every figure of `other` set here too.
    pub fn extend(&mut self, other: Figures) {
        for (name, value) in other.0 {
            self.set(name, value);
        }
    }
}
