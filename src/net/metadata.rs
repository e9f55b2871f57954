//! The cluster metadata a client needs: broker addresses and, per topic, its partitions'
//! leaders and their epochs (or the error the broker gave for the topic).
//!
//! Leader epochs (KIP-320) only move forward: a broker that has not yet heard of a newer
//! leader answers with an older epoch, and that answer must not send a client back to the old
//! leader (the Java client's `Metadata` keeps the newest epoch in the same way). A topic
//! deleted and created again under the same name has a new topic id, and epochs start over.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::metadata::MetadataResponse;
use crate::types::{BrokerId, TopicPartition};

/// Metadata v4 is the first that lets a client refuse auto-creation (KIP-204).
const REFUSE_AUTO_CREATION_FROM: i16 = 4;

/// The Metadata request for `topics` by name (`None`: every topic) at `version`, refusing
/// auto-creation: asking about a topic must not create it. Below v4 the request has no such
/// field and the broker's `auto.create.topics.enable` decides, as it did for every client
/// before KIP-204. v0 has no null list: there an empty one means every topic.
pub(crate) fn metadata_request(topics: Option<Vec<String>>, version: i16) -> MetadataRequest {
    let topics = match topics {
        Some(names) => Some(
            names
                .into_iter()
                .map(|name| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(name))))
                })
                .collect(),
        ),
        None if version == 0 => Some(Vec::new()),
        None => None,
    };
    MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(version < REFUSE_AUTO_CREATION_FROM)
}

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
    /// The leader epochs of the partitions of the topics in `topics` that are known.
    epochs: FxHashMap<Arc<str>, TopicEpochs>,
}

/// One topic's id and its partitions' leader epochs (-1: unknown, Metadata below v7).
#[derive(Debug, Clone)]
struct TopicEpochs {
    topic_id: [u8; 16],
    epochs: Vec<i32>,
}

impl TopicEpochs {
    /// The epoch known for `partition` of a topic with id `topic_id` (a zero id, below
    /// Metadata v10, matches any): `None` for a topic created anew since.
    fn epoch(&self, topic_id: &[u8; 16], partition: usize) -> Option<i32> {
        let same_topic =
            *topic_id == [0; 16] || self.topic_id == [0; 16] || self.topic_id == *topic_id;
        same_topic
            .then(|| self.epochs.get(partition).copied())
            .flatten()
    }
}

impl ClusterMetadata {
    /// The node id of the broker at `address` (`host:port`), when the metadata names it.
    pub fn broker_at(&self, address: &str) -> Option<BrokerId> {
        self.brokers
            .iter()
            .find(|(_, known)| known.as_str() == address)
            .map(|(&id, _)| id)
    }

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
            let name: Arc<str> = Arc::from(name);
            if !code.is_ok() {
                self.epochs.remove(&name);
                self.topics.insert(name, TopicMetadata::Failed(code));
                continue;
            }
            let mut partitions: Vec<_> = topic.partitions.iter().collect();
            partitions.sort_by_key(|p| p.partition_index);
            let count = partitions
                .last()
                .map_or(0, |p| p.partition_index as usize + 1);
            let mut leaders = vec![None; count];
            let mut epochs = vec![-1; count];
            let known = self.epochs.get(&name);
            let old_leaders = match self.topics.get(&name) {
                Some(TopicMetadata::Known { leaders }) => Some(leaders),
                _ => None,
            };
            for p in partitions {
                let Ok(i) = usize::try_from(p.partition_index) else {
                    continue;
                };
                let (Some(leader), Some(epoch)) = (leaders.get_mut(i), epochs.get_mut(i)) else {
                    continue;
                };
                let newest = known.and_then(|k| k.epoch(&topic.topic_id, i));
                match (newest, old_leaders.and_then(|l| l.get(i))) {
                    // An answer from a broker behind the one that told us of a newer leader.
                    (Some(newest), Some(old)) if (0..newest).contains(&p.leader_epoch) => {
                        *leader = *old;
                        *epoch = newest;
                    }
                    _ => {
                        *leader = (p.leader_id >= 0).then_some(p.leader_id);
                        *epoch = p.leader_epoch;
                    }
                }
            }
            let topic_id = match known {
                Some(k) if topic.topic_id == [0; 16] => k.topic_id,
                _ => topic.topic_id,
            };
            self.epochs
                .insert(Arc::clone(&name), TopicEpochs { topic_id, epochs });
            self.topics.insert(name, TopicMetadata::Known { leaders });
        }
    }

    /// The leader epoch of `tp`'s leader, when the metadata gave it (v7+, KIP-320).
    pub fn leader_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        let epoch = *self
            .epochs
            .get(&tp.topic)?
            .epochs
            .get(usize::try_from(tp.partition).ok()?)?;
        (epoch >= 0).then_some(epoch)
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

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::protocol::{Encode, Versioned};

    fn encoded(request: &MetadataRequest, version: i16) -> Vec<u8> {
        let mut out = BytesMut::new();
        request.write_body(version, &mut out).expect("encodes");
        out.to_vec()
    }

    #[test]
    fn every_version_spoken_encodes_and_refuses_auto_creation_where_it_can() {
        for version in MetadataRequest::MIN_VERSION..=MetadataRequest::MAX_VERSION {
            let named = metadata_request(Some(vec!["t".into()]), version);
            assert_eq!(
                named.allow_auto_topic_creation,
                version < 4,
                "v{version}: KIP-204"
            );
            encoded(&named, version);
            encoded(&metadata_request(None, version), version);
        }
    }

    fn answer(topic_id: u8, partitions: &[(i32, i32, i32)]) -> MetadataResponse {
        use crate::protocol::messages::metadata::{
            MetadataResponsePartition, MetadataResponseTopic,
        };
        MetadataResponse {
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                topic_id: [topic_id; 16],
                partitions: partitions
                    .iter()
                    .map(
                        |&(partition_index, leader_id, leader_epoch)| MetadataResponsePartition {
                            partition_index,
                            leader_id,
                            leader_epoch,
                            ..MetadataResponsePartition::default()
                        },
                    )
                    .collect(),
                ..MetadataResponseTopic::default()
            }],
            ..MetadataResponse::default()
        }
    }

    #[test]
    fn leader_epochs_only_move_forward_within_one_topic_id() {
        let tp = |p| TopicPartition::new("t", p);
        let leader = |m: &ClusterMetadata, p: usize| match m.topics.get("t") {
            Some(TopicMetadata::Known { leaders }) => leaders[p],
            _ => None,
        };
        let mut m = ClusterMetadata::default();
        m.update(&answer(1, &[(0, 1, 5), (1, 2, -1)]));
        assert_eq!(m.leader_epoch(&tp(0)), Some(5));
        assert_eq!(m.leader_epoch(&tp(1)), None, "below v7: unknown");
        // A newer leader, then a broker that has not heard of it yet: the newer one stays.
        m.update(&answer(1, &[(0, 3, 6), (1, 2, -1)]));
        m.update(&answer(1, &[(0, 1, 5), (1, 2, -1)]));
        assert_eq!((leader(&m, 0), m.leader_epoch(&tp(0))), (Some(3), Some(6)));
        // No leader under a newer epoch is taken as it is.
        m.update(&answer(1, &[(0, -1, 7), (1, 2, -1)]));
        assert_eq!((leader(&m, 0), m.leader_epoch(&tp(0))), (None, Some(7)));
        // The topic created again: its epochs start over.
        m.update(&answer(2, &[(0, 2, 0), (1, 2, 0)]));
        assert_eq!((leader(&m, 0), m.leader_epoch(&tp(0))), (Some(2), Some(0)));
        assert_eq!(m.leader_epoch(&tp(9)), None);
    }

    #[test]
    fn every_topic_is_a_null_list_and_at_v0_an_empty_one() {
        assert_eq!(encoded(&metadata_request(None, 0), 0), [0, 0, 0, 0]);
        assert_eq!(
            encoded(&metadata_request(None, 1), 1),
            [0xff, 0xff, 0xff, 0xff]
        );
        // v4: the null list, then allow_auto_topic_creation false.
        assert_eq!(
            encoded(&metadata_request(None, 4), 4),
            [0xff, 0xff, 0xff, 0xff, 0]
        );
    }
}
