//! The cluster metadata a client needs: broker addresses and, per topic, its partitions'
//! leaders (or the error the broker gave for the topic).

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::metadata::MetadataResponse;
use crate::types::{BrokerId, TopicPartition};

/// What the producer knows about one topic.
#[derive(Debug, Clone)]
pub(crate) enum TopicMetadata {
    /// The topic exists: the leader of each partition (`None`: no leader right now).
    Known { leaders: Vec<Option<BrokerId>> },
    /// The broker answered with an error for the topic (e.g. UNKNOWN_TOPIC_OR_PARTITION).
    Failed(ErrorCode),
}

/// A snapshot of cluster metadata.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterMetadata {
    pub brokers: HashMap<BrokerId, String>,
    pub topics: FxHashMap<Arc<str>, TopicMetadata>,
}

impl ClusterMetadata {
    /// Folds a Metadata response in: brokers are replaced, topics it covers are updated.
    pub fn update(&mut self, response: &MetadataResponse) {
        if !response.brokers.is_empty() {
            self.brokers = response
                .brokers
                .iter()
                .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
                .collect();
        }
        for topic in &response.topics {
            let Some(name) = topic.name.as_deref() else {
                continue;
            };
            let code = ErrorCode(topic.error_code);
            let entry = if code.is_ok() {
                let mut partitions: Vec<_> = topic.partitions.iter().collect();
                partitions.sort_by_key(|p| p.partition_index);
                let count = partitions
                    .last()
                    .map_or(0, |p| p.partition_index as usize + 1);
                let mut leaders = vec![None; count];
                for p in partitions {
                    if let Some(slot) = usize::try_from(p.partition_index)
                        .ok()
                        .and_then(|i| leaders.get_mut(i))
                    {
                        *slot = (p.leader_id >= 0).then_some(p.leader_id);
                    }
                }
                TopicMetadata::Known { leaders }
            } else {
                TopicMetadata::Failed(code)
            };
            self.topics.insert(Arc::from(name), entry);
        }
    }

    /// Every partition's leader, for the engine.
    pub fn leaders(&self) -> Vec<(TopicPartition, Option<BrokerId>)> {
        let mut out = Vec::new();
        for (topic, meta) in &self.topics {
            if let TopicMetadata::Known { leaders } = meta {
                for (i, leader) in leaders.iter().enumerate() {
                    out.push((TopicPartition::new(Arc::clone(topic), i as i32), *leader));
                }
            }
        }
        out
    }
}
