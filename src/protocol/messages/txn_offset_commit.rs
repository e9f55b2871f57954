//! TxnOffsetCommit (API key 28): commits consumer offsets inside a transaction, sent to the
//! group coordinator (KIP-98).
//!
//! Schemas `TxnOffsetCommitRequest.json` / `TxnOffsetCommitResponse.json`: versions 0–5,
//! flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 adds the committed leader epoch (KIP-320); v3 is
//! the first flexible version and adds the consumer group metadata (generation id, member id,
//! group instance id) so the coordinator fences a zombie group member (KIP-447); v4 may answer
//! TRANSACTION_ABORTABLE (KIP-890 part 1); v5 adds the offsets partition to the transaction
//! implicitly under transactions v2, replacing AddOffsetsToTxn (KIP-890 part 2).

use bytes::BufMut;

#[cfg(any(test, feature = "internals"))]
pub use super::add_partitions_to_txn::PartitionError;
pub use super::add_partitions_to_txn::TopicPartitionErrors;
use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// TxnOffsetCommit request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The consumer group id.
    pub group_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// v3+: the consumer's generation id; -1 (the default) when unknown (KIP-447).
    pub generation_id: i32,
    /// v3+: the consumer's member id; empty (the default) when unknown (KIP-447).
    pub member_id: String,
    /// v3+: the consumer's static group instance id, or null (KIP-447).
    pub group_instance_id: Option<String>,
    /// The offsets to commit, by topic.
    pub topics: Vec<TxnOffsetCommitRequestTopic>,
}

impl Default for TxnOffsetCommitRequest {
    fn default() -> Self {
        Self {
            transactional_id: String::new(),
            group_id: String::new(),
            producer_id: 0,
            producer_epoch: 0,
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: Vec::new(),
        }
    }
}

/// The offsets to commit for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnOffsetCommitRequestTopic {
    /// The topic name.
    pub name: String,
    /// The offsets, by partition.
    pub partitions: Vec<TxnOffsetCommitRequestPartition>,
}

/// The offset to commit for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequestPartition {
    /// The partition index.
    pub partition_index: i32,
    /// The offset to commit: the next record to consume.
    pub committed_offset: i64,
    /// v2+: the leader epoch of the last consumed record; -1 (the default) when unknown
    /// (KIP-320).
    pub committed_leader_epoch: i32,
    /// Client metadata stored with the offset, or null.
    pub committed_metadata: Option<String>,
}

impl Default for TxnOffsetCommitRequestPartition {
    fn default() -> Self {
        Self {
            partition_index: 0,
            committed_offset: 0,
            committed_leader_epoch: -1,
            committed_metadata: None,
        }
    }
}

impl TxnOffsetCommitRequestPartition {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = TxnOffsetCommitRequest::is_flexible(version);
        out.put_i32(self.partition_index);
        out.put_i64(self.committed_offset);
        if version >= 2 {
            out.put_i32(self.committed_leader_epoch);
        }
        out.put_nullable_string(flexible, self.committed_metadata.as_deref());
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = TxnOffsetCommitRequest::is_flexible(version);
        let mut partition = Self {
            partition_index: d.i32("TxnOffsetCommitRequestPartition.partition_index")?,
            committed_offset: d.i64("TxnOffsetCommitRequestPartition.committed_offset")?,
            ..Self::default()
        };
        if version >= 2 {
            partition.committed_leader_epoch =
                d.i32("TxnOffsetCommitRequestPartition.committed_leader_epoch")?;
        }
        partition.committed_metadata = d.nullable_string(
            flexible,
            "TxnOffsetCommitRequestPartition.committed_metadata",
        )?;
        if flexible {
            d.skip_tagged_fields("TxnOffsetCommitRequestPartition.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl TxnOffsetCommitRequestTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            TxnOffsetCommitRequest::is_flexible(version),
            TopicRef::Name(&self.name),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (name, _, partitions) = read_topic_entry(
            d,
            TxnOffsetCommitRequest::is_flexible(version),
            TopicKey::Name,
            "TxnOffsetCommitRequestTopic",
            |d| TxnOffsetCommitRequestPartition::decode(d, version),
        )?;
        Ok(Self { name, partitions })
    }
}

impl Message for TxnOffsetCommitRequest {
    const API_KEY: ApiKey = ApiKey::TxnOffsetCommit;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_string(flexible, &self.transactional_id);
        out.put_string(flexible, &self.group_id);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        if version >= 3 {
            out.put_i32(self.generation_id);
            out.put_string(flexible, &self.member_id);
            out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut request = Self {
            transactional_id: d.string(flexible, "TxnOffsetCommitRequest.transactional_id")?,
            group_id: d.string(flexible, "TxnOffsetCommitRequest.group_id")?,
            producer_id: d.i64("TxnOffsetCommitRequest.producer_id")?,
            producer_epoch: d.i16("TxnOffsetCommitRequest.producer_epoch")?,
            ..Self::default()
        };
        if version >= 3 {
            request.generation_id = d.i32("TxnOffsetCommitRequest.generation_id")?;
            request.member_id = d.string(flexible, "TxnOffsetCommitRequest.member_id")?;
            request.group_instance_id =
                d.nullable_string(flexible, "TxnOffsetCommitRequest.group_instance_id")?;
        }
        request.topics = d.array_of(flexible, "TxnOffsetCommitRequest.topics", |d| {
            TxnOffsetCommitRequestTopic::decode(d, version)
        })?;
        if flexible {
            d.skip_tagged_fields("TxnOffsetCommitRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for TxnOffsetCommitRequest {
    type Response = TxnOffsetCommitResponse;
}

/// TxnOffsetCommit response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnOffsetCommitResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The result of each partition, by topic.
    pub topics: Vec<TopicPartitionErrors>,
}

impl Message for TxnOffsetCommitResponse {
    const API_KEY: ApiKey = ApiKey::TxnOffsetCommit;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_i32(self.throttle_time_ms);
        out.put_array(flexible, &self.topics, |out, t| t.encode(flexible, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let response = Self {
            throttle_time_ms: d.i32("TxnOffsetCommitResponse.throttle_time_ms")?,
            topics: d.array_of(flexible, "TxnOffsetCommitResponse.topics", |d| {
                TopicPartitionErrors::decode(d, flexible)
            })?,
        };
        if flexible {
            d.skip_tagged_fields("TxnOffsetCommitResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_request() -> TxnOffsetCommitRequest {
        TxnOffsetCommitRequest {
            transactional_id: "txn".into(),
            group_id: "group".into(),
            producer_id: 3,
            producer_epoch: 1,
            generation_id: 4,
            member_id: "member-1".into(),
            group_instance_id: Some("instance".into()),
            topics: vec![TxnOffsetCommitRequestTopic {
                name: "in".into(),
                partitions: vec![TxnOffsetCommitRequestPartition {
                    partition_index: 2,
                    committed_offset: 100,
                    committed_leader_epoch: 6,
                    committed_metadata: Some("m".into()),
                }],
            }],
        }
    }

    fn sample_response() -> TxnOffsetCommitResponse {
        TxnOffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![TopicPartitionErrors {
                name: "in".into(),
                partitions: vec![PartitionError {
                    partition_index: 2,
                    error_code: 22,
                }],
            }],
        }
    }

    #[test]
    fn golden_request_v2_classic() {
        let mut request = sample_request();
        request.generation_id = -1;
        request.member_id = String::new();
        request.group_instance_id = None;
        request.topics[0].partitions[0].committed_metadata = None;
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x03, b't', b'x', b'n', // transactional_id "txn"
            0x00, 0x05, b'g', b'r', b'o', b'u', b'p', // group_id "group"
            0, 0, 0, 0, 0, 0, 0, 0x03,    // producer_id 3
            0x00, 0x01,                   // producer_epoch 1
            0x00, 0x00, 0x00, 0x01,       // topics: 1
            0x00, 0x02, b'i', b'n',       //   name "in"
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00, 0x00, 0x02,       //     partition_index 2
            0, 0, 0, 0, 0, 0, 0, 0x64,    //     committed_offset 100
            0x00, 0x00, 0x00, 0x06,       //     committed_leader_epoch 6
            0xff, 0xff,                   //     committed_metadata null
        ];
        assert_golden(&request, 2, &v2);
    }

    #[test]
    fn golden_request_v3_flexible_with_group_metadata() {
        #[rustfmt::skip]
        let v3 = [
            0x04, b't', b'x', b'n',       // transactional_id "txn"
            0x06, b'g', b'r', b'o', b'u', b'p', // group_id "group"
            0, 0, 0, 0, 0, 0, 0, 0x03,    // producer_id 3
            0x00, 0x01,                   // producer_epoch 1
            0x00, 0x00, 0x00, 0x04,       // generation_id 4 (KIP-447)
            0x09, b'm', b'e', b'm', b'b', b'e', b'r', b'-', b'1', // member_id "member-1"
            0x09, b'i', b'n', b's', b't', b'a', b'n', b'c', b'e', // group_instance_id "instance"
            0x02,                         // topics: compact 1+1
            0x03, b'i', b'n',             //   name "in"
            0x02,                         //   partitions: compact 1+1
            0x00, 0x00, 0x00, 0x02,       //     partition_index 2
            0, 0, 0, 0, 0, 0, 0, 0x64,    //     committed_offset 100
            0x00, 0x00, 0x00, 0x06,       //     committed_leader_epoch 6
            0x02, b'm',                   //     committed_metadata "m"
            0x00,                         //     partition tagged fields
            0x00,                         //   topic tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&sample_request(), 3, &v3);
    }

    #[test]
    fn golden_response_v0_classic_and_v5_flexible() {
        #[rustfmt::skip]
        let v0 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x00, 0x00, 0x01,       // topics: 1
            0x00, 0x02, b'i', b'n',       //   name "in"
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00, 0x00, 0x02,       //     partition_index 2
            0x00, 0x16,                   //     error_code 22 (ILLEGAL_GENERATION)
        ];
        assert_golden(&sample_response(), 0, &v0);
        #[rustfmt::skip]
        let v5 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x02,                         // topics: compact 1+1
            0x03, b'i', b'n',             //   name "in"
            0x02,                         //   partitions: compact 1+1
            0x00, 0x00, 0x00, 0x02,       //     partition_index 2
            0x00, 0x16,                   //     error_code 22
            0x00,                         //     partition tagged fields
            0x00,                         //   topic tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&sample_response(), 5, &v5);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        assert_robust(&sample_request());
        assert_robust(&sample_response());
    }
}
