//! The cluster metadata a client needs: broker addresses and, per topic, its partitions'
//! leaders (or the error the broker gave for the topic).

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
