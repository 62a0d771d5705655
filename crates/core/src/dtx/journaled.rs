//! What the journal keeps of a prepared branch beside its records (opaque to the store):
//! its xid, and which of the messages it dequeues it rejected rather than accepted.

use bytes::Bytes;

use super::Xid;

/// A prepared branch as its prepare record names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JournaledBranch {
    pub(crate) xid: Xid,
    /// Store ids of messages the branch rejected: on commit they are dead-lettered, not
    /// just removed.
    pub(crate) rejected: Vec<u64>,
    /// Part of the branch's work was held in memory until its commit (a cluster's
    /// replicated part, `Journal::holds_until_commit`): a restart lost it, so the branch
    /// restored from this record must not commit.
    pub(crate) held_elsewhere: bool,
}

impl JournaledBranch {
    /// format, then the global id and the branch qualifier and the rejected ids, each
    /// after its length (all little-endian).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let xid = &self.xid;
        let mut out = Vec::with_capacity(16 + xid.global.len() + xid.branch.len());
        out.extend_from_slice(&xid.format.to_le_bytes());
        for part in [&xid.global, &xid.branch] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
        out.extend_from_slice(&(self.rejected.len() as u32).to_le_bytes());
        for id in &self.rejected {
            out.extend_from_slice(&id.to_le_bytes());
        }
        // Only when set, so that other branches' records stay as builds before it wrote
        // them (and read them).
        if self.held_elsewhere {
            out.push(1);
        }
        out
    }

    /// Reads [`JournaledBranch::encode`]'s form; `None` if `data` is not in it.
    pub(crate) fn decode(data: &[u8]) -> Option<JournaledBranch> {
        let mut r = Cursor(data);
        let format = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let global = Bytes::copy_from_slice(r.counted(1)?);
        let branch = Bytes::copy_from_slice(r.counted(1)?);
        let rejected = r
            .counted(8)?
            .chunks_exact(8)
            .map(|id| u64::from_le_bytes(id.try_into().unwrap_or_default()))
            .collect();
        let held_elsewhere = match r.0 {
            [] => false,
            [1] => true,
            _ => return None,
        };
        Some(JournaledBranch {
            xid: Xid {
                format,
                global,
                branch,
            },
            rejected,
            held_elsewhere,
        })
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// A u32 count of `width`-byte items, then the items.
    fn counted(&mut self, width: usize) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        self.take(n.checked_mul(width)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_round_trips_and_any_cut_or_excess_is_refused() {
        let branch = JournaledBranch {
            xid: Xid {
                format: 0x0102_0304,
                global: Bytes::from_static(b"global"),
                branch: Bytes::from_static(b""),
            },
            rejected: vec![7, u64::MAX],
            held_elsewhere: false,
        };
        let encoded = branch.encode();
        assert_eq!(JournaledBranch::decode(&encoded), Some(branch.clone()));
        let elsewhere = JournaledBranch {
            held_elsewhere: true,
            ..branch
        };
        let flagged = elsewhere.encode();
        assert_eq!(
            flagged.len(),
            encoded.len() + 1,
            "one octet more, only when set"
        );
        assert_eq!(JournaledBranch::decode(&flagged), Some(elsewhere));
        for cut in 0..encoded.len() {
            assert_eq!(
                JournaledBranch::decode(&encoded[..cut]),
                None,
                "cut at {cut}"
            );
        }
        let mut longer = encoded.clone();
        longer.push(0);
        assert_eq!(JournaledBranch::decode(&longer), None);
        let mut huge = encoded;
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(JournaledBranch::decode(&huge), None);
    }
}
