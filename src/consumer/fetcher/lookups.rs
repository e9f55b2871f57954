//! Finding positions: the committed offset (OffsetFetch), `auto.offset.reset` and `seek_to_*`
//! (ListOffsets), and the validation of a position after a leader change (OffsetForLeaderEpoch,
//! KIP-320): the requests for the partitions waiting on each, and what their answers change.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::partition::{Offset, PartitionState};
use super::{Asked, Fetcher, Followup, by_topic, no_offset_error};
use crate::consumer::offsets::PartitionCommitted;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::topic_name;
use crate::protocol::messages::list_offsets::ListOffsetsResponse;
use crate::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use crate::types::TopicPartition;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{ListOffsetsRequest, OffsetForLeaderEpochRequest};

impl Fetcher {
    /// The `fetchable` partitions whose committed offset is to be looked up.
    pub fn awaiting_committed(&self, fetchable: &[TopicPartition]) -> Vec<Asked> {
        self.awaiting(
            fetchable.iter(),
            |offset| offset == Offset::Committed,
            &HashSet::new(),
        )
    }

    /// Of `partitions`, those owned whose position is in a state `wanted` picks and for
    /// which no request is `in_flight` (by token), with their tokens.
    fn awaiting<'a>(
        &self,
        partitions: impl Iterator<Item = &'a TopicPartition>,
        wanted: impl Fn(Offset) -> bool,
        in_flight: &HashSet<u64>,
    ) -> Vec<Asked> {
        // Almost always none awaits: found without a look-up per partition.
        if !self.partitions.values().any(|s| wanted(s.offset)) {
            return Vec::new();
        }
        partitions
            .filter_map(|tp| {
                let state = self.partitions.get(tp)?;
                (wanted(state.offset) && !in_flight.contains(&state.token)).then(|| Asked {
                    partition: tp.clone(),
                    token: state.token,
                })
            })
            .collect()
    }

    /// The answer to an OffsetFetch of the committed offsets (each partition's, or its
    /// error). A committed offset with its leader epoch is validated with the leader before
    /// it is fetched from (KIP-320): the log may have been truncated under it since.
    pub fn apply_committed(&mut self, answers: Vec<(Asked, PartitionCommitted)>) -> Followup {
        let mut followup = Followup::default();
        let reset = self.reset_offset();
        for (asked, answer) in answers {
            let Some(state) = self.partitions.get_mut(&asked.partition) else {
                continue;
            };
            if !state.answers(asked.token) || state.offset != Offset::Committed {
                continue;
            }
            match answer {
                Ok(Some(committed)) => {
                    let offset = match (committed.leader_epoch, state.leader_epoch) {
                        (Some(_), Some(_)) => Offset::Validate(committed.offset),
                        // Validated once the leader's epoch is known (`leader_epochs`).
                        _ => Offset::Ready(committed.offset),
                    };
                    state.set(offset, committed.leader_epoch);
                }
                Ok(None) => {
                    if reset == Offset::Missing {
                        followup
                            .errors
                            .push(no_offset_error(&asked.partition, "no committed offset"));
                    }
                    state.set(reset, None);
                }
                Err(code) => followup.partition_failed("OffsetFetch", &asked.partition, code),
            }
        }
        followup
    }

    /// The partitions to reset (`auto.offset.reset`, `seek_to_beginning` / `_end`) for which
    /// no ListOffsets is `in_flight` (by token).
    pub fn awaiting_reset(&self, in_flight: &HashSet<u64>) -> Vec<Asked> {
        self.awaiting(
            self.partitions.keys(),
            |offset| matches!(offset, Offset::List(_)),
            in_flight,
        )
    }

    /// The ListOffsets request that resets `asked` (all led by one broker).
    pub fn reset_request(&self, asked: &[Asked]) -> ListOffsetsRequest {
        self.list_request(asked.iter().filter_map(|a| {
            match self.partitions.get(&a.partition)?.offset {
                Offset::List(timestamp) => Some((&a.partition, timestamp)),
                _ => None,
            }
        }))
    }

    /// The ListOffsets request for `(partition, timestamp)` pairs (all led by one broker):
    /// a timestamp in milliseconds asks for the first offset at or after it (KIP-79), the
    /// sentinels for the log start and end (the last stable offset under read_committed).
    /// An owned partition's request carries the leader epoch known, so a stale leader refuses
    /// it (FENCED_LEADER_EPOCH) rather than answer from a log that may be truncated.
    pub fn list_request<'a>(
        &self,
        queries: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) -> ListOffsetsRequest {
        let topics = by_topic(queries.into_iter().map(|(tp, timestamp)| {
            let partition = ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(current_leader_epoch(&self.partitions, tp))
                .with_timestamp(timestamp);
            (&*tp.topic, partition)
        }));
        ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(self.config.isolation.wire())
            .with_topics(
                topics
                    .map(|(name, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_timeout_ms(self.config.list_timeout_ms)
    }

    /// The answer to a [`Fetcher::reset_request`] for `asked`.
    pub fn apply_listed(&mut self, response: ListOffsetsResponse, asked: &[Asked]) -> Followup {
        let mut followup = Followup::default();
        let mut unanswered: HashMap<&TopicPartition, u64> =
            asked.iter().map(|a| (&a.partition, a.token)).collect();
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                let Some(token) = unanswered.remove(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                if !state.answers(token) || !matches!(state.offset, Offset::List(_)) {
                    continue;
                }
                match ErrorCode(p.error_code) {
                    ErrorCode::NONE if p.offset >= 0 => state.set(Offset::Ready(p.offset), None),
                    ErrorCode::NONE => followup.retry = true,
                    code => followup.partition_failed("ListOffsets", &tp, code),
                }
            }
        }
        // A partition the broker left out is asked again, not at once.
        followup.retry |= !unanswered.is_empty();
        followup
    }

    /// The partitions whose position is to be validated with their leader (KIP-320) for
    /// which no OffsetForLeaderEpoch is `in_flight` (by token).
    pub fn awaiting_validation(&self, in_flight: &HashSet<u64>) -> Vec<Asked> {
        self.awaiting(
            self.partitions.keys(),
            |offset| matches!(offset, Offset::Validate(_)),
            in_flight,
        )
    }

    /// The OffsetForLeaderEpoch request that validates `asked` (all led by one broker): for
    /// each, the epoch of the log at the position, under the leader epoch known (so a stale
    /// leader refuses it). The leader answers where that epoch ends in its log.
    pub fn validation_request(&self, asked: &[Asked]) -> OffsetForLeaderEpochRequest {
        let topics = by_topic(asked.iter().filter_map(|a| {
            let state = self.partitions.get(&a.partition)?;
            let (Offset::Validate(_), Some(epoch)) = (state.offset, state.epoch) else {
                return None;
            };
            let partition = OffsetForLeaderPartition::default()
                .with_partition(a.partition.partition)
                .with_current_leader_epoch(state.leader_epoch.unwrap_or(-1))
                .with_leader_epoch(epoch);
            Some((&*a.partition.topic, partition))
        }));
        OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(
                topics
                    .map(|(name, partitions)| {
                        OffsetForLeaderTopic::default()
                            .with_topic(topic_name(name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
    }

    /// The leader cannot validate positions (it has no OffsetForLeaderEpoch a consumer may
    /// send, v3+): `asked` are fetched from as they are, as the Java consumer does.
    pub fn validation_unsupported(&mut self, asked: &[Asked]) {
        for a in asked {
            if let Some(state) = self.partitions.get_mut(&a.partition)
                && state.answers(a.token)
                && let Offset::Validate(offset) = state.offset
            {
                let epoch = state.epoch;
                state.set(Offset::Ready(offset), epoch);
            }
        }
    }

    /// The answer to a [`Fetcher::validation_request`] for `asked`: where the epoch of each
    /// position ends in the leader's log. An end at or past the position validates it; an end
    /// before it means the log was truncated under it (the records from there on are not the
    /// ones read), which is reported as [`Error::LogTruncation`] and, under
    /// `auto.offset.reset` earliest or latest, moves the position to where the logs diverge
    /// (or resets it when the leader knows no epoch that old), as the Java consumer's
    /// `SubscriptionState.maybeCompleteValidation` does; under `none` the partition waits
    /// for a seek. Nothing is read past or read again without the application hearing of it.
    pub fn apply_validated(
        &mut self,
        response: OffsetForLeaderEpochResponse,
        asked: &[Asked],
    ) -> Followup {
        let mut followup = Followup::default();
        let reset = self.reset_offset();
        let mut unanswered: HashMap<&TopicPartition, u64> =
            asked.iter().map(|a| (&a.partition, a.token)).collect();
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.topic.as_str(), p.partition);
                let Some(token) = unanswered.remove(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                let Offset::Validate(offset) = state.offset else {
                    continue;
                };
                if !state.answers(token) {
                    continue;
                }
                let code = ErrorCode(p.error_code);
                if !code.is_ok() {
                    followup.partition_failed("OffsetForLeaderEpoch", &tp, code);
                    continue;
                }
                let divergent = (p.end_offset >= 0 && p.leader_epoch >= 0).then_some(p.end_offset);
                if divergent.is_some_and(|end| end >= offset) {
                    let epoch = state.epoch;
                    state.set(Offset::Ready(offset), epoch);
                    continue;
                }
                let moved_on = reset != Offset::Missing;
                match (divergent, moved_on) {
                    (Some(end), true) => state.set(Offset::Ready(end), Some(p.leader_epoch)),
                    (None, true) => state.set(reset, None),
                    (_, false) => state.set(Offset::Missing, None),
                }
                tracing::warn!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    offset,
                    divergent_offset = ?divergent,
                    "log truncation detected (KIP-320)"
                );
                followup.errors.push(Error::LogTruncation {
                    partition: tp,
                    offset,
                    divergent_offset: divergent,
                    reset: moved_on,
                });
            }
        }
        followup.retry |= !unanswered.is_empty();
        followup
    }
}

/// The leader epoch a request for `tp` carries (KIP-320): the one known, else -1 (no check).
pub(super) fn current_leader_epoch(
    partitions: &BTreeMap<TopicPartition, PartitionState>,
    tp: &TopicPartition,
) -> i32 {
    partitions
        .get(tp)
        .and_then(|s| s.leader_epoch)
        .unwrap_or(-1)
}
