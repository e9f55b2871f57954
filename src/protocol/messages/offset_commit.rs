//! OffsetCommit (API key 8), versions 2–9: commits a group member's consumed offsets outside
//! transactions. (Kafka 4.0 removed v0 and v1, KIP-896.)
//!
//! Schemas `OffsetCommitRequest.json` / `OffsetCommitResponse.json`, flexible from v8. Version
//! history: v2–v4 carry a retention time (-1: the broker's); v3 adds the response's throttle
//! time; v5 drops the retention time; v6 adds the committed leader epoch (KIP-320); v7 the
//! static member's instance id (KIP-345); v8 is the first flexible version; v9 is the first a
//! KIP-848 member may use: its generation field carries the member epoch, and the coordinator
//! refuses non-transactional commits of a KIP-848 member below v9. (v10, Kafka 4.2, names
//! topics by id; not implemented.)

use bytes::BufMut;

#[cfg(any(test, feature = "internals"))]
pub use super::add_partitions_to_txn::PartitionError;
pub use super::add_partitions_to_txn::TopicPartitionErrors;
use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// OffsetCommit request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// The group id.
    pub group_id: String,
    /// The generation (classic) or member epoch (KIP-848, v9+); -1 for a commit from outside
    /// the group.
    pub generation_id_or_member_epoch: i32,
    /// The member id; empty outside the group.
    pub member_id: String,
    /// v7+: the static member's instance id, or null.
    pub group_instance_id: Option<String>,
    /// v2–v4: how long to keep the offsets, -1 for the broker's setting.
    pub retention_time_ms: i64,
    /// The offsets, by topic.
    pub topics: Vec<OffsetCommitRequestTopic>,
}

impl Default for OffsetCommitRequest {
    fn default() -> Self {
        Self {
            group_id: String::new(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: Vec::new(),
        }
    }
}

/// The offsets of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitRequestTopic {
    /// The topic name.
    pub name: String,
    /// The offsets, by partition.
    pub partitions: Vec<OffsetCommitRequestPartition>,
}

/// The offset of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequestPartition {
    /// The partition index.
    pub partition_index: i32,
    /// The next offset to consume.
    pub committed_offset: i64,
    /// v6+: the leader epoch of the last consumed record, or -1.
    pub committed_leader_epoch: i32,
    /// Metadata kept with the offset, or null.
    pub committed_metadata: Option<String>,
}

impl Default for OffsetCommitRequestPartition {
    fn default() -> Self {
        Self {
            partition_index: 0,
            committed_offset: 0,
            committed_leader_epoch: -1,
            committed_metadata: None,
        }
    }
}

impl OffsetCommitRequestPartition {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = OffsetCommitRequest::is_flexible(version);
        out.put_i32(self.partition_index);
        out.put_i64(self.committed_offset);
        if version >= 6 {
            out.put_i32(self.committed_leader_epoch);
        }
        out.put_nullable_string(flexible, self.committed_metadata.as_deref());
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        const CONTEXT: &str = "OffsetCommitRequestPartition";
        let flexible = OffsetCommitRequest::is_flexible(version);
        let mut partition = Self {
            partition_index: d.i32(CONTEXT)?,
            committed_offset: d.i64(CONTEXT)?,
            ..Self::default()
        };
        if version >= 6 {
            partition.committed_leader_epoch = d.i32(CONTEXT)?;
        }
        partition.committed_metadata = d.nullable_string(flexible, CONTEXT)?;
        if flexible {
            d.skip_tagged_fields(CONTEXT)?;
        }
        Ok(partition)
    }
}

impl OffsetCommitRequestTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            OffsetCommitRequest::is_flexible(version),
            TopicRef::Name(&self.name),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (name, _, partitions) = read_topic_entry(
            d,
            OffsetCommitRequest::is_flexible(version),
            TopicKey::Name,
            "OffsetCommitRequestTopic",
            |d| OffsetCommitRequestPartition::decode(d, version),
        )?;
        Ok(Self { name, partitions })
    }
}

impl Message for OffsetCommitRequest {
    const API_KEY: ApiKey = ApiKey::OffsetCommit;
    const MIN_VERSION: i16 = 2;
    const MAX_VERSION: i16 = 9;
    const FLEXIBLE_FROM: i16 = 8;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_string(flexible, &self.group_id);
        out.put_i32(self.generation_id_or_member_epoch);
        out.put_string(flexible, &self.member_id);
        if version >= 7 {
            out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        }
        if version <= 4 {
            out.put_i64(self.retention_time_ms);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        const CONTEXT: &str = "OffsetCommitRequest";
        let flexible = Self::is_flexible(version);
        let mut request = Self {
            group_id: d.string(flexible, CONTEXT)?,
            generation_id_or_member_epoch: d.i32(CONTEXT)?,
            member_id: d.string(flexible, CONTEXT)?,
            ..Self::default()
        };
        if version >= 7 {
            request.group_instance_id = d.nullable_string(flexible, CONTEXT)?;
        }
        if version <= 4 {
            request.retention_time_ms = d.i64(CONTEXT)?;
        }
        request.topics = d.array_of(flexible, CONTEXT, |d| {
            OffsetCommitRequestTopic::decode(d, version)
        })?;
        if flexible {
            d.skip_tagged_fields(CONTEXT)?;
        }
        Ok(request)
    }
}

impl Request for OffsetCommitRequest {
    type Response = OffsetCommitResponse;
}

/// OffsetCommit response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitResponse {
    /// v3+: how long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The result of each partition, by topic.
    pub topics: Vec<TopicPartitionErrors>,
}

impl Message for OffsetCommitResponse {
    const API_KEY: ApiKey = ApiKey::OffsetCommit;
    const MIN_VERSION: i16 = OffsetCommitRequest::MIN_VERSION;
    const MAX_VERSION: i16 = OffsetCommitRequest::MAX_VERSION;
    const FLEXIBLE_FROM: i16 = OffsetCommitRequest::FLEXIBLE_FROM;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 3 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(flexible, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 3 {
            response.throttle_time_ms = d.i32("OffsetCommitResponse.throttle_time_ms")?;
        }
        response.topics = d.array_of(flexible, "OffsetCommitResponse.topics", |d| {
            TopicPartitionErrors::decode(d, flexible)
        })?;
        if flexible {
            d.skip_tagged_fields("OffsetCommitResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_request() -> OffsetCommitRequest {
        OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: 5,
            member_id: "m".into(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![OffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 1,
                    committed_offset: 10,
                    committed_leader_epoch: -1,
                    committed_metadata: None,
                }],
            }],
        }
    }

    fn sample_response() -> OffsetCommitResponse {
        OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![TopicPartitionErrors {
                name: "t".into(),
                partitions: vec![PartitionError {
                    partition_index: 1,
                    error_code: 113,
                }],
            }],
        }
    }

    #[test]
    fn golden_request_v2_and_v9() {
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x01, b'g',             // group_id
            0x00, 0x00, 0x00, 0x05,       // generation 5
            0x00, 0x01, b'm',             // member_id
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // retention -1
            0x00, 0x00, 0x00, 0x01,       // topics: 1
            0x00, 0x01, b't',             //   name
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00, 0x00, 0x01,       //     partition 1
            0, 0, 0, 0, 0, 0, 0, 10,      //     offset 10
            0xff, 0xff,                   //     metadata null
        ];
        assert_golden(&sample_request(), 2, &v2);
        #[rustfmt::skip]
        let v9 = [
            0x02, b'g',                   // group_id
            0x00, 0x00, 0x00, 0x05,       // member epoch 5
            0x02, b'm',                   // member_id
            0x00,                         // group_instance_id null
            0x02,                         // topics: compact 1+1
            0x02, b't',                   //   name
            0x02,                         //   partitions: compact 1+1
            0x00, 0x00, 0x00, 0x01,       //     partition 1
            0, 0, 0, 0, 0, 0, 0, 10,      //     offset 10
            0xff, 0xff, 0xff, 0xff,       //     leader epoch -1
            0x00,                         //     metadata null
            0x00, 0x00, 0x00,             //   tagged fields: partition, topic, request
        ];
        assert_golden(&sample_request(), 9, &v9);
    }

    #[test]
    fn golden_response_v2_without_throttle_time() {
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x00, 0x00, 0x01,       // topics: 1
            0x00, 0x01, b't',             //   name
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00, 0x00, 0x01,       //     partition 1
            0x00, 0x71,                   //     STALE_MEMBER_EPOCH (113)
        ];
        assert_golden(&sample_response(), 2, &v2);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        assert_robust(&sample_request());
        assert_robust(&sample_response());
    }
}
