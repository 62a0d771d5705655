//! The total-queue checker: every confirmed message must be received at least once (lost
//! = confirmed but never received); duplicates are counted; a received id nobody tried to
//! publish is unexpected.

use super::workload::History;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub attempted: u64,
    pub confirmed: u64,
    /// Distinct ids received.
    pub received: u64,
    pub deliveries: u64,
    pub lost: u64,
    /// Deliveries beyond the first of an id.
    pub duplicated: u64,
    pub unexpected: u64,
    /// Published, not confirmed, yet received (allowed: the confirm was lost).
    pub unconfirmed_received: u64,
    /// A few lost ids, for the report.
    pub lost_sample: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.unexpected == 0
    }
}

pub fn check(h: &History) -> Verdict {
    let mut lost: Vec<String> = h
        .confirmed
        .iter()
        .filter(|id| !h.received.contains_key(*id))
        .cloned()
        .collect();
    lost.sort();
    Verdict {
        attempted: h.attempted.len() as u64,
        confirmed: h.confirmed.len() as u64,
        received: h.received.len() as u64,
        deliveries: h.deliveries,
        lost: lost.len() as u64,
        duplicated: h
            .received
            .values()
            .map(|n| u64::from(n.saturating_sub(1)))
            .sum(),
        unexpected: h
            .received
            .keys()
            .filter(|id| !h.attempted.contains(*id))
            .count() as u64,
        unconfirmed_received: h
            .received
            .keys()
            .filter(|id| h.attempted.contains(*id) && !h.confirmed.contains(*id))
            .count() as u64,
        lost_sample: lost.into_iter().take(10).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lost_duplicated_and_unexpected() {
        let mut h = History::default();
        for id in ["a", "b", "c", "d"] {
            h.attempted.insert(id.into());
        }
        for id in ["a", "b", "c"] {
            h.confirmed.insert(id.into());
        }
        h.received.insert("a".into(), 1);
        h.received.insert("b".into(), 3);
        h.received.insert("d".into(), 1);
        h.received.insert("zz".into(), 1);
        let v = check(&h);
        assert_eq!(v.lost, 1);
        assert_eq!(v.lost_sample, vec!["c".to_owned()]);
        assert_eq!(v.duplicated, 2);
        assert_eq!(v.unexpected, 1);
        assert_eq!(v.unconfirmed_received, 1);
        assert!(!v.ok());
    }
}
