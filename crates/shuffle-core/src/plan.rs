//! [`Plan`]: the list of transmissions a planner chose; each is the XOR of whole data points,
//! every point tagged with the worker meant to learn it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One summand of a transmission: `point`, meant to be learned by `worker`.
///
/// Point ids are `u32` and worker ids `usize` throughout the crate (as in
/// [`crate::ShuffleInstance::cache`] and [`crate::ShuffleInstance::needs`]). In JSON a part is
/// the pair `[point, worker]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Part {
    /// The data point's id.
    pub point: u32,
    /// The worker that is meant to decode it from this transmission.
    pub worker: usize,
}

impl Part {
    /// The part `point` for `worker`.
    pub fn new(point: u32, worker: usize) -> Self {
        Part { point, worker }
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.point, self.worker).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (point, worker) = <(u32, u32)>::deserialize(d)?;
        Ok(Part { point, worker: worker as usize })
    }
}

/// A shuffle plan: transmissions in the order the master sends them. A transmission with one
/// part is a unicast; with several it is the XOR of their points, broadcast to every worker.
///
/// Stored flat (all parts in one vector plus the end offset of each transmission) so that a plan
/// for a million points costs two allocations, not a million.
///
/// ```
/// use ubershuffle_core::{Part, Plan};
/// let mut plan = Plan::new();
/// plan.push(&[Part::new(4, 0), Part::new(1, 2)]);
/// plan.push(&[Part::new(0, 1)]);
/// assert_eq!(plan.len(), 2);
/// assert_eq!(plan.transmission(0)[1].point, 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    parts: Vec<Part>,
    ends: Vec<usize>,
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty plan with room for `transmissions` transmissions of `parts` parts in all.
    pub fn with_capacity(transmissions: usize, parts: usize) -> Self {
        Plan { parts: Vec::with_capacity(parts), ends: Vec::with_capacity(transmissions) }
    }

    /// Appends one transmission, the XOR of `parts`.
    pub fn push(&mut self, parts: &[Part]) {
        self.parts.extend_from_slice(parts);
        self.ends.push(self.parts.len());
    }

    /// Appends one transmission from an iterator of parts.
    pub fn push_iter(&mut self, parts: impl IntoIterator<Item = Part>) {
        self.parts.extend(parts);
        self.ends.push(self.parts.len());
    }

    /// Appends every transmission of `other`.
    pub fn append(&mut self, other: &Plan) {
        for t in other.iter() {
            self.push(t);
        }
    }

    /// Number of transmissions (the communication cost counted in point-sized packets).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the plan sends nothing.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Number of parts over all transmissions (points delivered, counting coded summands).
    pub fn total_parts(&self) -> usize {
        self.parts.len()
    }

    /// The parts of transmission `index`.
    pub fn transmission(&self, index: usize) -> &[Part] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.parts[start..self.ends[index]]
    }

    /// The transmissions in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[Part]> + '_ {
        (0..self.len()).map(|i| self.transmission(i))
    }

    /// The plan as JSON: `{"transmissions": [[[point, worker], ...], ...]}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("plan JSON cannot fail: {e}"))
    }

    /// Parses the layout of [`Plan::to_json`]. Whether the plan is valid for an instance is
    /// [`crate::verify`]'s question.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[derive(Serialize)]
struct PlanJsonRef<'a> {
    transmissions: Vec<&'a [Part]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanJson {
    transmissions: Vec<Vec<Part>>,
}

impl Serialize for Plan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PlanJsonRef { transmissions: self.iter().collect() }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Plan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = PlanJson::deserialize(d)?;
        let mut plan = Plan::with_capacity(raw.transmissions.len(), 0);
        for t in &raw.transmissions {
            plan.push(t);
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_storage_and_json_round_trip() {
        let mut plan = Plan::new();
        plan.push(&[Part::new(4, 0), Part::new(1, 2)]);
        plan.push_iter([Part::new(0, 1)]);
        assert_eq!(plan.total_parts(), 3);
        assert_eq!(plan.to_json(), r#"{"transmissions":[[[4,0],[1,2]],[[0,1]]]}"#);
        assert_eq!(Plan::from_json(&plan.to_json()).unwrap(), plan);
        let mut twice = plan.clone();
        twice.append(&plan);
        assert_eq!(twice.len(), 4);
        assert_eq!(twice.transmission(3), &[Part::new(0, 1)]);
    }
}
