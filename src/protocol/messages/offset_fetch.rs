//! OffsetFetchResponse (API key 9), versions 0–10: the offsets a consumer group has committed.
//! The request is generated (`super::super::generated`), versions 1–9.
//!
//! Schema: `OffsetFetchRequest.json` / `OffsetFetchResponse.json`. v1 reads from
//! `__consumer_offsets` rather than ZooKeeper; v2 allows a null topic list (every topic) and
//! adds a top-level error code; v3 the throttle time; v5 each offset's leader epoch (KIP-320);
//! v6 is the first flexible version; v7 adds `RequireStable` (KIP-447); v8 batches several
//! groups in one request (KIP-709); v9 adds the member id and epoch of the new consumer
//! protocol (KIP-848); v10 names topics by id instead of by name (KIP-848; unstable in Kafka
//! 4.1, stable from 4.2). Kafka 4.0 dropped v0 (KIP-896); 3.x brokers still accept it.

use bytes::BufMut;

use super::fields::{TopicKey, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// How a version names topics: by id from v10, by name before (KIP-848).
fn topic_key(version: i16) -> TopicKey {
    TopicKey::from_version(version, 10)
}

/// OffsetFetchResponse: the committed offsets of one group (v0–7) or of several (v8+).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchResponse {
    /// v3+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// v0–7: the offsets per topic.
    pub topics: Vec<OffsetFetchResponseTopic>,
    /// v2–7: the group-level error code, 0 for none.
    pub error_code: i16,
    /// v8+: the offsets per group.
    pub groups: Vec<OffsetFetchResponseGroup>,
}

/// One group of an [`OffsetFetchResponse`], v8+.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchResponseGroup {
    /// The group id.
    pub group_id: String,
    /// The offsets per topic.
    pub topics: Vec<OffsetFetchResponseTopic>,
    /// The group-level error code, 0 for none.
    pub error_code: i16,
}

/// One topic's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchResponseTopic {
    /// v0–9: the topic name.
    pub name: String,
    /// v10+: the topic id (KIP-848).
    pub topic_id: [u8; 16],
    /// The offsets per partition.
    pub partitions: Vec<OffsetFetchResponsePartition>,
}

/// One partition's committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponsePartition {
    /// The partition index.
    pub partition_index: i32,
    /// The committed offset, -1 if none.
    pub committed_offset: i64,
    /// v5+: the leader epoch of the committed offset (KIP-320), -1 if unknown.
    pub committed_leader_epoch: i32,
    /// The metadata committed with the offset.
    pub metadata: Option<String>,
    /// The partition's error code, 0 for none.
    pub error_code: i16,
}

impl Default for OffsetFetchResponsePartition {
    /// The schema's defaults (`CommittedLeaderEpoch` -1; `Metadata` nullable without a
    /// declared default, so the empty string).
    fn default() -> Self {
        Self {
            partition_index: 0,
            committed_offset: 0,
            committed_leader_epoch: -1,
            metadata: Some(String::new()),
            error_code: 0,
        }
    }
}

impl OffsetFetchResponsePartition {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = OffsetFetchResponse::is_flexible(version);
        out.put_i32(self.partition_index);
        out.put_i64(self.committed_offset);
        if version >= 5 {
            out.put_i32(self.committed_leader_epoch);
        }
        out.put_nullable_string(flexible, self.metadata.as_deref());
        out.put_i16(self.error_code);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = OffsetFetchResponse::is_flexible(version);
        let mut partition = Self {
            partition_index: d.i32("OffsetFetchResponse.partitions.partition_index")?,
            committed_offset: d.i64("OffsetFetchResponse.partitions.committed_offset")?,
            ..Self::default()
        };
        if version >= 5 {
            partition.committed_leader_epoch =
                d.i32("OffsetFetchResponse.partitions.committed_leader_epoch")?;
        }
        partition.metadata =
            d.nullable_string(flexible, "OffsetFetchResponse.partitions.metadata")?;
        partition.error_code = d.i16("OffsetFetchResponse.partitions.error_code")?;
        if flexible {
            d.skip_tagged_fields("OffsetFetchResponse.partitions.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl OffsetFetchResponseTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            OffsetFetchResponse::is_flexible(version),
            topic_key(version).pick(&self.name, &self.topic_id),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (name, topic_id, partitions) = read_topic_entry(
            d,
            OffsetFetchResponse::is_flexible(version),
            topic_key(version),
            "OffsetFetchResponse.topics",
            |d| OffsetFetchResponsePartition::decode(d, version),
        )?;
        Ok(Self {
            name,
            topic_id,
            partitions,
        })
    }
}

/// Writes a topic list of the response.
fn put_response_topics<B: BufMut>(out: &mut B, version: i16, topics: &[OffsetFetchResponseTopic]) {
    let flexible = OffsetFetchResponse::is_flexible(version);
    out.put_array(flexible, topics, |out, t| t.encode(version, out));
}

/// Reads a topic list written by [`put_response_topics`].
fn read_response_topics(
    d: &mut Decoder<'_>,
    version: i16,
) -> Result<Vec<OffsetFetchResponseTopic>, DecodeError> {
    let flexible = OffsetFetchResponse::is_flexible(version);
    d.array_of(flexible, "OffsetFetchResponse.topics", |d| {
        OffsetFetchResponseTopic::decode(d, version)
    })
}

impl OffsetFetchResponseGroup {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = OffsetFetchResponse::is_flexible(version);
        out.put_string(flexible, &self.group_id);
        put_response_topics(out, version, &self.topics);
        out.put_i16(self.error_code);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = OffsetFetchResponse::is_flexible(version);
        let group = Self {
            group_id: d.string(flexible, "OffsetFetchResponse.groups.group_id")?,
            topics: read_response_topics(d, version)?,
            error_code: d.i16("OffsetFetchResponse.groups.error_code")?,
        };
        if flexible {
            d.skip_tagged_fields("OffsetFetchResponse.groups.tagged_fields")?;
        }
        Ok(group)
    }
}

impl Message for OffsetFetchResponse {
    const API_KEY: ApiKey = ApiKey::OffsetFetch;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 10;
    const FLEXIBLE_FROM: i16 = 6;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 3 {
            out.put_i32(self.throttle_time_ms);
        }
        if version <= 7 {
            put_response_topics(out, version, &self.topics);
            if version >= 2 {
                out.put_i16(self.error_code);
            }
        } else {
            out.put_array(flexible, &self.groups, |out, g| g.encode(version, out));
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 3 {
            response.throttle_time_ms = d.i32("OffsetFetchResponse.throttle_time_ms")?;
        }
        if version <= 7 {
            response.topics = read_response_topics(d, version)?;
            if version >= 2 {
                response.error_code = d.i16("OffsetFetchResponse.error_code")?;
            }
        } else {
            response.groups = d.array_of(flexible, "OffsetFetchResponse.groups", |d| {
                OffsetFetchResponseGroup::decode(d, version)
            })?;
        }
        if flexible {
            d.skip_tagged_fields("OffsetFetchResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    const TOPIC_ID: [u8; 16] = [
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e,
        0x1f,
    ];

    fn partition() -> OffsetFetchResponsePartition {
        OffsetFetchResponsePartition {
            partition_index: 1,
            committed_offset: 9,
            committed_leader_epoch: 3,
            metadata: None,
            error_code: 0,
        }
    }

    #[test]
    fn response_v5_classic_golden() {
        let value = OffsetFetchResponse {
            throttle_time_ms: 2,
            topics: vec![OffsetFetchResponseTopic {
                name: "t".into(),
                topic_id: [0; 16],
                partitions: vec![partition()],
            }],
            error_code: 16, // NOT_COORDINATOR
            groups: Vec::new(),
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x02,         // throttle_time_ms (v3+)
            0x00, 0x00, 0x00, 0x01,         // topics: count 1
            0x00, 0x01, b't',               //   name
            0x00, 0x00, 0x00, 0x01,         //   partitions: count 1
            0x00, 0x00, 0x00, 0x01,         //     partition_index
            0, 0, 0, 0, 0, 0, 0, 9,         //     committed_offset
            0x00, 0x00, 0x00, 0x03,         //     committed_leader_epoch (v5+)
            0xff, 0xff,                     //     metadata: null
            0x00, 0x00,                     //     error_code
            0x00, 0x10,                     // error_code 16 (v2–7)
        ];
        assert_golden(&value, 5, &golden);
    }

    #[test]
    fn response_v0_classic_golden() {
        let mut p = partition();
        p.committed_leader_epoch = -1; // v5+
        let value = OffsetFetchResponse {
            topics: vec![OffsetFetchResponseTopic {
                name: "t".into(),
                topic_id: [0; 16],
                partitions: vec![p],
            }],
            ..OffsetFetchResponse::default()
        };
        #[rustfmt::skip]
        let golden = [
            // no throttle_time_ms before v3
            0x00, 0x00, 0x00, 0x01,         // topics: count 1
            0x00, 0x01, b't',               //   name
            0x00, 0x00, 0x00, 0x01,         //   partitions: count 1
            0x00, 0x00, 0x00, 0x01,         //     partition_index
            0, 0, 0, 0, 0, 0, 0, 9,         //     committed_offset
            0xff, 0xff,                     //     metadata: null
            0x00, 0x00,                     //     error_code
            // no top-level error_code before v2
        ];
        assert_golden(&value, 0, &golden);
    }

    #[test]
    fn response_v8_flexible_golden() {
        let value = OffsetFetchResponse {
            throttle_time_ms: 0,
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics: vec![OffsetFetchResponseTopic {
                    name: "t".into(),
                    topic_id: [0; 16],
                    partitions: vec![partition()],
                }],
                error_code: 0,
            }],
            ..OffsetFetchResponse::default()
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,         // throttle_time_ms
            0x02,                           // groups: compact count 1 + 1
            0x02, b'g',                     //   group_id
            0x02,                           //   topics
            0x02, b't',                     //     name
            0x02,                           //     partitions
            0x00, 0x00, 0x00, 0x01,         //       partition_index
            0, 0, 0, 0, 0, 0, 0, 9,         //       committed_offset
            0x00, 0x00, 0x00, 0x03,         //       committed_leader_epoch
            0x00,                           //       metadata: null
            0x00, 0x00,                     //       error_code
            0x00,                           //       partition tagged fields
            0x00,                           //     topic tagged fields
            0x00, 0x00,                     //   error_code
            0x00,                           //   group tagged fields
            0x00,                           // tagged fields
        ];
        assert_golden(&value, 8, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        let topics = vec![OffsetFetchResponseTopic {
            name: "t".into(),
            topic_id: TOPIC_ID,
            partitions: vec![OffsetFetchResponsePartition {
                metadata: Some("x".into()),
                ..partition()
            }],
        }];
        assert_robust(&OffsetFetchResponse {
            throttle_time_ms: 1,
            topics: topics.clone(),
            error_code: 1,
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics,
                error_code: 2,
            }],
        });
    }
}
