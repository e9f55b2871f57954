//! Manual assignment ([`crate::Consumer::assign`]): the partitions the application chose, no
//! group membership at all (no heartbeat, no JoinGroup, no rebalance events). Offsets may still
//! be committed to a `group.id` with generation -1 and no member id, which the coordinator
//! accepts for a group without active members (the Java consumer's "simple consumer" commit
//! with `assign`).

use std::collections::BTreeSet;

use crate::types::ConsumerGroupMetadata;
use crate::types::TopicPartition;

/// The partitions assigned by hand, and the group (possibly none) offsets go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualAssignment {
    group_id: String,
    partitions: Vec<TopicPartition>,
    /// `partitions` sorted, for [`ManualAssignment::owned_in_order`].
    sorted: Vec<TopicPartition>,
}

impl ManualAssignment {
    /// `partitions` (deduplicated, in order), committing to `group_id` (empty: no group).
    pub fn new(group_id: String, partitions: &[TopicPartition]) -> Self {
        let mut seen: BTreeSet<&TopicPartition> = BTreeSet::new();
        let unique: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| seen.insert(*tp))
            .cloned()
            .collect();
        Self {
            group_id,
            partitions: unique,
            sorted: seen.into_iter().cloned().collect(),
        }
    }

    /// The assigned partitions, in order.
    pub fn owned_in_order(&self) -> impl Iterator<Item = &TopicPartition> {
        self.sorted.iter()
    }

    /// The assigned partitions.
    pub fn partitions(&self) -> &[TopicPartition] {
        &self.partitions
    }

    /// The metadata of a commit without membership: generation -1, no member id.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata::new(self.group_id.clone(), -1, String::new(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_deduplicated_and_commits_carry_no_generation() {
        let tp = |p| TopicPartition::new("t", p);
        let manual = ManualAssignment::new("g".into(), &[tp(1), tp(0), tp(1)]);
        assert_eq!(manual.partitions(), &[tp(1), tp(0)]);
        assert!(manual.owned_in_order().eq([tp(0), tp(1)].iter()));
        let meta = manual.group_metadata();
        assert_eq!(meta.generation_id, -1);
        assert!(meta.member_id.is_empty());
        assert_eq!(meta.group_id, "g");
    }
}
