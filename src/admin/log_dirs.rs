//! Brokers' log directories (KIP-113): DescribeLogDirs and AlterReplicaLogDirs, each sent to
//! the broker whose directories it concerns (only that broker knows its disks).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, DescribeLogDirsRequest};

use super::Admin;
use super::wire::{by_topic, outcome, string};
use crate::error::Result;
use crate::protocol::generated::{str_bytes, topic_name};
use crate::types::TopicPartition;

/// One log directory of a broker.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LogDirDescription {
    /// The directory's replicas (an offline directory, see `error`, lists none).
    pub replicas: BTreeMap<TopicPartition, ReplicaInfo>,
    /// The directory's volume size in bytes, if the broker reports it (Kafka 3.3+, KIP-827).
    pub total_bytes: Option<i64>,
    /// The bytes still free on that volume, if reported.
    pub usable_bytes: Option<i64>,
    /// Why the directory cannot be used (KAFKA_STORAGE_ERROR for an offline disk), if so.
    pub error: Option<crate::error::Error>,
}

/// One replica in a log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaInfo {
    /// Its size on disk in bytes.
    pub size_bytes: i64,
    /// How far behind its log end it is: the leader's high watermark minus its end for a
    /// follower, its end minus the current replica's for a future one (0 for a leader).
    pub offset_lag: i64,
    /// Whether it is a *future* replica: a copy being made in this directory by
    /// [`Admin::alter_replica_log_dirs`], which takes over once caught up.
    pub is_future: bool,
}

impl Admin {
    /// The log directories of each broker in `brokers` (DescribeLogDirs; the principal needs
    /// DESCRIBE on the cluster): by path, the replicas in it with their sizes, and the
    /// volume's space. One result per broker.
    pub async fn describe_log_dirs(
        &self,
        brokers: impl IntoIterator<Item = i32>,
    ) -> Result<BTreeMap<i32, Result<BTreeMap<String, LogDirDescription>>>> {
        let brokers: Vec<i32> = brokers.into_iter().collect();
        self.within("DescribeLogDirs", async {
            let mut results = BTreeMap::new();
            for broker in brokers {
                // `None`: every partition the broker holds.
                let request = DescribeLogDirsRequest::default().with_topics(None);
                let described = self.call_broker(broker, request).await.and_then(|r| {
                    outcome(r.error_code, None)?;
                    Ok(r.results
                        .iter()
                        .map(|dir| (string(&dir.log_dir), log_dir(dir)))
                        .collect())
                });
                results.insert(broker, described);
            }
            Ok(results)
        })
        .await
    }

    /// Moves replicas between the log directories of their brokers (AlterReplicaLogDirs;
    /// the principal needs ALTER on the cluster): for each replica (partition, broker) the
    /// absolute path of the directory it goes to. The broker copies it there as a future
    /// replica and swaps once it caught up. One result per replica (LOG_DIR_NOT_FOUND for a
    /// path that is not one of the broker's `log.dirs`, KAFKA_STORAGE_ERROR for an offline
    /// one, REPLICA_NOT_AVAILABLE for a replica the broker does not hold).
    pub async fn alter_replica_log_dirs(
        &self,
        moves: impl IntoIterator<Item = ((TopicPartition, i32), String)>,
    ) -> Result<BTreeMap<(TopicPartition, i32), Result<()>>> {
        let mut by_broker: BTreeMap<i32, BTreeMap<String, Vec<TopicPartition>>> = BTreeMap::new();
        for ((tp, broker), path) in moves {
            by_broker
                .entry(broker)
                .or_default()
                .entry(path)
                .or_default()
                .push(tp);
        }
        self.within("AlterReplicaLogDirs", async {
            let mut results = BTreeMap::new();
            for (broker, dirs) in by_broker {
                let request = AlterReplicaLogDirsRequest::default().with_dirs(
                    dirs.into_iter()
                        .map(|(path, partitions)| {
                            AlterReplicaLogDir::default()
                                .with_path(str_bytes(&path))
                                .with_topics(
                                    by_topic(partitions.into_iter().map(|tp| (tp, ())))
                                        .into_iter()
                                        .map(|(name, ps)| {
                                            AlterReplicaLogDirTopic::default()
                                                .with_name(topic_name(&name))
                                                .with_partitions(
                                                    ps.into_iter().map(|(p, ())| p).collect(),
                                                )
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
                let response = self.call_broker(broker, request).await?;
                for topic in response.results {
                    let name = string(&topic.topic_name.0);
                    for p in topic.partitions {
                        results.insert(
                            (
                                TopicPartition::new(name.as_str(), p.partition_index),
                                broker,
                            ),
                            outcome(p.error_code, None),
                        );
                    }
                }
            }
            Ok(results)
        })
        .await
    }
}

/// One directory of a DescribeLogDirs answer.
fn log_dir(
    dir: &kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResult,
) -> LogDirDescription {
    LogDirDescription {
        replicas: dir
            .topics
            .iter()
            .flat_map(|t| {
                let name = string(&t.name.0);
                t.partitions.iter().map(move |p| {
                    (
                        TopicPartition::new(name.as_str(), p.partition_index),
                        ReplicaInfo {
                            size_bytes: p.partition_size,
                            offset_lag: p.offset_lag,
                            is_future: p.is_future_key,
                        },
                    )
                })
            })
            .collect(),
        // -1: not reported (an older broker, or an offline directory).
        total_bytes: (dir.total_bytes >= 0).then_some(dir.total_bytes),
        usable_bytes: (dir.usable_bytes >= 0).then_some(dir.usable_bytes),
        error: outcome(dir.error_code, None).err(),
    }
}
