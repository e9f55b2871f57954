//! Committed offsets, sans-I/O: the OffsetFetch and OffsetCommit requests of a member and
//! the reading of OffsetFetch answers (both the v0–7 and the v8+ group shapes).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetFetchRequest};

use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::{group_id, str_bytes, topic_name};
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;
use crate::types::TopicPartition;
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

/// OffsetCommit of `offsets` by the member `meta` (its generation, or member epoch under
/// KIP-848, fences a member that no longer owns the partitions).
pub fn offset_commit_request(
    meta: &ConsumerGroupMetadata,
    offsets: &[OffsetToCommit],
) -> OffsetCommitRequest {
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for o in offsets {
        topics.entry(&*o.partition.topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(o.partition.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.wire_leader_epoch())
                .with_committed_metadata(o.metadata.as_deref().map(str_bytes)),
        );
    }
    OffsetCommitRequest::default()
        .with_group_id(group_id(&meta.group_id))
        .with_generation_id_or_member_epoch(meta.generation_id)
        .with_member_id(str_bytes(&meta.member_id))
        .with_group_instance_id(meta.group_instance_id.as_deref().map(str_bytes))
        .with_retention_time_ms(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// OffsetFetch of `partitions` with require_stable (KIP-447). Built in the v8+ shape (one
/// entry in `Groups`); v1–7 carry the group at the top level (see `generated::shapes`).
pub fn offset_fetch_request(group: &str, partitions: &[TopicPartition]) -> OffsetFetchRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(&*tp.topic).or_default().push(tp.partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, partition_indexes)| {
            OffsetFetchRequestTopics::default()
                .with_name(topic_name(name))
                .with_partition_indexes(partition_indexes)
        })
        .collect();
    OffsetFetchRequest::default()
        .with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(group_id(group))
                .with_topics(Some(topics)),
        ])
        .with_require_stable(true)
}

/// A committed offset as OffsetFetch gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the record before it, when the commit carried one (KIP-320): the
    /// position starts out validated against the partition's leader.
    pub leader_epoch: Option<i32>,
}

/// What an OffsetFetch answer says of one partition: its committed offset (`None`: nothing
/// committed), or the partition's error.
pub type PartitionCommitted = Result<Option<Committed>, ErrorCode>;

/// What an OffsetFetch answer says of each of `partitions` (one left out of the answer has
/// nothing committed), or the group's error, which covers them all.
pub fn committed_offsets(
    response: &OffsetFetchResponse,
    partitions: &[TopicPartition],
) -> std::result::Result<Vec<(TopicPartition, PartitionCommitted)>, ErrorCode> {
    let (group_error, topics) = match response.groups.first() {
        Some(group) => (group.error_code, &group.topics),
        None => (response.error_code, &response.topics),
    };
    if group_error != 0 {
        return Err(ErrorCode(group_error));
    }
    let mut found: HashMap<TopicPartition, PartitionCommitted> = HashMap::new();
    for topic in topics {
        for p in &topic.partitions {
            let answer = match ErrorCode(p.error_code) {
                ErrorCode::NONE => Ok((p.committed_offset >= 0).then_some(Committed {
                    offset: p.committed_offset,
                    leader_epoch: (p.committed_leader_epoch >= 0)
                        .then_some(p.committed_leader_epoch),
                })),
                code => Err(code),
            };
            found.insert(
                TopicPartition::new(topic.name.as_str(), p.partition_index),
                answer,
            );
        }
    }
    Ok(partitions
        .iter()
        .map(|tp| (tp.clone(), found.get(tp).copied().unwrap_or(Ok(None))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::generated::lowest_version;
    use crate::protocol::messages::offset_fetch::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
    };

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn requests_carry_the_member_and_group_partitions_by_topic() {
        let meta = ConsumerGroupMetadata::new("g", 7, "m", None);
        let r = offset_commit_request(
            &meta,
            &[OffsetToCommit::new(tp(1), 5), OffsetToCommit::new(tp(0), 3)],
        );
        assert_eq!(
            (r.generation_id_or_member_epoch, r.member_id.as_str()),
            (7, "m")
        );
        assert_eq!(lowest_version(&r), 2, "a dynamic member: every version");
        let static_member = ConsumerGroupMetadata::new("g", 7, "m", Some("i".to_owned()));
        let r_static = offset_commit_request(&static_member, &[OffsetToCommit::new(tp(0), 3)]);
        assert_eq!(
            lowest_version(&r_static),
            7,
            "a static member's instance id (KIP-345)"
        );
        assert_eq!(r.topics.len(), 1);
        assert_eq!(r.topics[0].partitions.len(), 2);
        let f = offset_fetch_request("g", &[tp(0), tp(1)]);
        assert!(f.require_stable);
        // One group (v1–7 can carry it) with require_stable (KIP-447, v7): refused below v7
        // rather than read past a pending transactional commit.
        assert_eq!(lowest_version(&f), 7);
        assert_eq!(
            f.groups[0].topics.as_ref().unwrap()[0].partition_indexes,
            vec![0, 1]
        );
    }

    #[test]
    fn answers_of_both_shapes_and_their_errors() {
        let partition = |index, offset, epoch, error| OffsetFetchResponsePartition {
            partition_index: index,
            committed_offset: offset,
            committed_leader_epoch: epoch,
            error_code: error,
            ..OffsetFetchResponsePartition::default()
        };
        let topics = vec![OffsetFetchResponseTopic {
            name: "t".into(),
            partitions: vec![partition(0, 4, 3, 0), partition(1, -1, -1, 0)],
            ..OffsetFetchResponseTopic::default()
        }];
        let v7 = OffsetFetchResponse {
            topics: topics.clone(),
            ..OffsetFetchResponse::default()
        };
        let four = Committed {
            offset: 4,
            leader_epoch: Some(3),
        };
        let expected = vec![
            (tp(0), Ok(Some(four))),
            (tp(1), Ok(None)),
            (tp(2), Ok(None)),
        ];
        assert_eq!(
            committed_offsets(&v7, &[tp(0), tp(1), tp(2)]),
            Ok(expected.clone())
        );
        let v8 = OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics,
                error_code: 0,
            }],
            ..OffsetFetchResponse::default()
        };
        assert_eq!(committed_offsets(&v8, &[tp(0), tp(1), tp(2)]), Ok(expected));
        // A partition's error is that partition's; the others are answered.
        let mixed = OffsetFetchResponse {
            topics: vec![OffsetFetchResponseTopic {
                name: "t".into(),
                partitions: vec![
                    partition(0, -1, -1, ErrorCode::UNSTABLE_OFFSET_COMMIT.0),
                    partition(1, 7, -1, 0),
                ],
                ..OffsetFetchResponseTopic::default()
            }],
            ..OffsetFetchResponse::default()
        };
        assert_eq!(
            committed_offsets(&mixed, &[tp(0), tp(1)]),
            Ok(vec![
                (tp(0), Err(ErrorCode::UNSTABLE_OFFSET_COMMIT)),
                (
                    tp(1),
                    Ok(Some(Committed {
                        offset: 7,
                        leader_epoch: None
                    }))
                ),
            ])
        );
        // The group's error covers every partition.
        let refused = OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics: Vec::new(),
                error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.0,
            }],
            ..OffsetFetchResponse::default()
        };
        assert_eq!(
            committed_offsets(&refused, &[tp(0)]),
            Err(ErrorCode::GROUP_AUTHORIZATION_FAILED)
        );
    }

    #[test]
    fn commits_carry_the_leader_epoch_of_the_last_record() {
        let meta = ConsumerGroupMetadata::new("g", 7, "m", None);
        let r = offset_commit_request(
            &meta,
            &[
                OffsetToCommit::new(tp(0), 3).with_leader_epoch(Some(5)),
                OffsetToCommit::new(tp(1), 4),
            ],
        );
        let epochs: Vec<i32> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.committed_leader_epoch)
            .collect();
        assert_eq!(epochs, vec![5, -1], "KIP-320; -1 where unknown");
    }
}
