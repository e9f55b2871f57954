//! Partition offsets: ListOffsets (earliest, latest, by timestamp) and DeleteRecords, each
//! sent to the partitions' leaders. A partition whose leader moved (or has none yet, as just
//! after a topic's creation) is asked again after fresh metadata, within the deadline.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{DeleteRecordsRequest, ListOffsetsRequest};

use super::Admin;
use super::routing::topic_description;
use super::wire::{by_topic, millis_left, outcome, string};
use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::topic_name;
use crate::types::IsolationLevel;

use crate::types::TopicPartition;

/// How many times partitions whose leader moved are asked again.
const LEADER_ROUNDS: usize = 5;

/// Which offset of a partition [`Admin::list_offsets`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The end offset (the high watermark; under read_committed, the last stable offset).
    Latest,
    /// The first offset whose record's timestamp is at or after this many milliseconds
    /// since the epoch.
    Timestamp(i64),
}

impl OffsetSpec {
    /// ListOffsets' timestamp field: the special values -2 (earliest) and -1 (latest).
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// An offset [`Admin::list_offsets`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedOffset {
    /// The offset; -1 when no record has a timestamp that late.
    pub offset: i64,
    /// The record's timestamp (-1 for earliest and latest).
    pub timestamp: i64,
    /// The leader epoch of the record, if the broker said.
    pub leader_epoch: Option<i32>,
}

/// Partitions by their leader, and the partitions that have none (with why).
type ByLeader<T> = (
    BTreeMap<i32, Vec<(TopicPartition, T)>>,
    Vec<(TopicPartition, Error)>,
);

impl Admin {
    /// The leaders of `items`' partitions, from fresh metadata.
    async fn by_leader<T>(&self, items: Vec<(TopicPartition, T)>) -> Result<ByLeader<T>> {
        let topics: BTreeSet<String> = items.iter().map(|(tp, _)| tp.topic.to_string()).collect();
        let response = self.metadata(Some(topics.into_iter().collect())).await?;
        let described: BTreeMap<String, Result<_>> = response
            .topics
            .iter()
            .map(|t| (t.name.clone().unwrap_or_default(), topic_description(t)))
            .collect();
        let mut leaders: BTreeMap<i32, Vec<(TopicPartition, T)>> = BTreeMap::new();
        let mut failed = Vec::new();
        for (tp, item) in items {
            let leader = match described.get(&*tp.topic) {
                Some(Ok(topic)) => topic
                    .partitions
                    .iter()
                    .find(|p| p.partition == tp.partition)
                    .ok_or_else(|| Error::broker(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION))
                    .and_then(|p| {
                        p.leader
                            .ok_or_else(|| Error::broker(ErrorCode::LEADER_NOT_AVAILABLE))
                    }),
                Some(Err(e)) => Err(e.clone()),
                None => Err(Error::broker(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)),
            };
            match leader {
                Ok(node) => leaders.entry(node).or_default().push((tp, item)),
                Err(e) => failed.push((tp, e)),
            }
        }
        Ok((leaders, failed))
    }

    /// Sends `items` to their partitions' leaders with `ask` (one request per leader), and
    /// asks again, after fresh metadata, for those answered with a retriable error (the
    /// leader moved, or there was none yet) while rounds and the deadline last.
    pub(super) async fn on_leaders<T, A, F>(
        &self,
        items: Vec<(TopicPartition, T)>,
        ask: F,
    ) -> Result<BTreeMap<TopicPartition, Result<A>>>
    where
        T: Clone,
        F: AsyncLeaderCall<T, A>,
    {
        let mut results = BTreeMap::new();
        let mut pending = items;
        for round in 0..LEADER_ROUNDS {
            let last_round = round + 1 == LEADER_ROUNDS;
            let (leaders, failed) = self.by_leader(pending.clone()).await?;
            let mut again = Vec::new();
            let wanted: BTreeMap<TopicPartition, T> = pending.into_iter().collect();
            let mut settle = |tp: TopicPartition, result: Result<A>| match result {
                Err(e) if e.is_retriable() && !last_round => {
                    if let Some(item) = wanted.get(&tp) {
                        again.push((tp, item.clone()));
                    }
                }
                result => {
                    results.insert(tp, result);
                }
            };
            for (tp, e) in failed {
                settle(tp, Err(e));
            }
            for (leader, group) in leaders {
                for (tp, result) in ask.call(self, leader, group).await? {
                    settle(tp, result);
                }
            }
            if again.is_empty() {
                break;
            }
            pending = again;
            tokio::time::sleep(self.shared.config.retry_backoff()).await;
        }
        Ok(results)
    }

    /// Looks up offsets of partitions (earliest, latest, or by timestamp), as
    /// `isolation` sees them (read_uncommitted: the high watermark; read_committed: the last
    /// stable offset). One result per partition.
    pub async fn list_offsets(
        &self,
        specs: impl IntoIterator<Item = (TopicPartition, OffsetSpec)>,
        isolation: IsolationLevel,
    ) -> Result<BTreeMap<TopicPartition, Result<ListedOffset>>> {
        let specs: Vec<(TopicPartition, OffsetSpec)> = specs.into_iter().collect();
        self.within(
            "ListOffsets",
            self.on_leaders(specs, ListOffsets(isolation)),
        )
        .await
    }

    /// Deletes the records of partitions before the given offsets (`-1`: up to the high
    /// watermark, i.e. every record): the log start offset moves there. One result per
    /// partition, the new log start offset (low watermark) on success.
    pub async fn delete_records(
        &self,
        before: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<BTreeMap<TopicPartition, Result<i64>>> {
        let before: Vec<(TopicPartition, i64)> = before.into_iter().collect();
        self.within("DeleteRecords", self.on_leaders(before, DeleteRecords))
            .await
    }
}

/// One request to one leader for some of the partitions of [`Admin::on_leaders`].
pub(super) trait AsyncLeaderCall<T, A> {
    /// The result of each partition `items` holds.
    async fn call(
        &self,
        admin: &Admin,
        leader: i32,
        items: Vec<(TopicPartition, T)>,
    ) -> Result<Vec<(TopicPartition, Result<A>)>>;
}

struct ListOffsets(IsolationLevel);

impl AsyncLeaderCall<OffsetSpec, ListedOffset> for ListOffsets {
    async fn call(
        &self,
        admin: &Admin,
        leader: i32,
        items: Vec<(TopicPartition, OffsetSpec)>,
    ) -> Result<Vec<(TopicPartition, Result<ListedOffset>)>> {
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(self.0.wire())
            .with_topics(
                by_topic(items)
                    .into_iter()
                    .map(|(name, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(&name))
                            .with_partitions(
                                partitions
                                    .into_iter()
                                    .map(|(partition, spec)| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(partition)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(spec.wire())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = admin.call_broker(leader, request).await?;
        let mut out = Vec::new();
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                let result = outcome(p.error_code, None).map(|()| ListedOffset {
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
                });
                out.push((tp, result));
            }
        }
        Ok(out)
    }
}

struct DeleteRecords;

impl AsyncLeaderCall<i64, i64> for DeleteRecords {
    async fn call(
        &self,
        admin: &Admin,
        leader: i32,
        items: Vec<(TopicPartition, i64)>,
    ) -> Result<Vec<(TopicPartition, Result<i64>)>> {
        let request = DeleteRecordsRequest::default()
            .with_topics(
                by_topic(items)
                    .into_iter()
                    .map(|(name, partitions)| {
                        DeleteRecordsTopic::default()
                            .with_name(topic_name(&name))
                            .with_partitions(
                                partitions
                                    .into_iter()
                                    .map(|(partition, offset)| {
                                        DeleteRecordsPartition::default()
                                            .with_partition_index(partition)
                                            .with_offset(offset)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_timeout_ms(millis_left(admin.deadline()));
        let response = admin.call_broker(leader, request).await?;
        let mut out = Vec::new();
        for topic in response.topics {
            let name = string(&topic.name.0);
            for p in topic.partitions {
                let tp = TopicPartition::new(name.as_str(), p.partition_index);
                out.push((tp, outcome(p.error_code, None).map(|()| p.low_watermark)));
            }
        }
        Ok(out)
    }
}
