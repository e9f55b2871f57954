//! OffsetForLeaderEpochResponse (API key 23), versions 2–4: for each partition asked about,
//! the largest leader epoch the leader knows that is at most the one asked for, and where it
//! ends (the first offset of the next epoch, or the log end for the current one). A consumer
//! validates its position with it after a leader change (KIP-320): an end below the position
//! means the log was truncated under it. The request is generated
//! (`super::super::generated`), versions 3–4 (v3 added the replica id a consumer sets to -1).
//!
//! Schema: `OffsetForLeaderEpochRequest.json` / `OffsetForLeaderEpochResponse.json`. v1 added
//! the leader epoch to the answer and v2 the throttle time; v3 changes only the request; v4 is
//! the first flexible version. Kafka 4.0 dropped v0–1 (KIP-896).

use bytes::BufMut;

use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// OffsetForLeaderEpochResponse: per partition, the epoch found and its end offset (or the
/// error).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetForLeaderEpochResponse {
    /// How long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The topics asked about.
    pub topics: Vec<OffsetForLeaderTopicResult>,
}

/// One topic of an [`OffsetForLeaderEpochResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetForLeaderTopicResult {
    /// The topic name.
    pub topic: String,
    /// The partitions asked about.
    pub partitions: Vec<EpochEndOffset>,
}

/// One partition of an [`OffsetForLeaderTopicResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The partition's error code, 0 for none.
    pub error_code: i16,
    /// The partition index.
    pub partition: i32,
    /// The largest epoch the leader knows at or below the one asked for; -1 when it knows none.
    pub leader_epoch: i32,
    /// Where that epoch ends: the first offset of the next epoch, or the log end offset if it
    /// is the current one; -1 when unknown.
    pub end_offset: i64,
}

impl Default for EpochEndOffset {
    /// The schema's defaults (`LeaderEpoch` and `EndOffset` -1).
    fn default() -> Self {
        Self {
            error_code: 0,
            partition: 0,
            leader_epoch: -1,
            end_offset: -1,
        }
    }
}

impl OffsetForLeaderTopicResult {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = OffsetForLeaderEpochResponse::is_flexible(version);
        put_topic_entry(
            out,
            flexible,
            TopicRef::Name(&self.topic),
            &self.partitions,
            |out, p| p.encode(flexible, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = OffsetForLeaderEpochResponse::is_flexible(version);
        let (topic, _, partitions) = read_topic_entry(
            d,
            flexible,
            TopicKey::Name,
            "OffsetForLeaderEpochResponse.topics",
            |d| EpochEndOffset::decode(d, flexible),
        )?;
        Ok(Self { topic, partitions })
    }
}

impl EpochEndOffset {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_i16(self.error_code);
        out.put_i32(self.partition);
        out.put_i32(self.leader_epoch);
        out.put_i64(self.end_offset);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let partition = Self {
            error_code: d.i16("OffsetForLeaderEpochResponse.partitions.error_code")?,
            partition: d.i32("OffsetForLeaderEpochResponse.partitions.partition")?,
            leader_epoch: d.i32("OffsetForLeaderEpochResponse.partitions.leader_epoch")?,
            end_offset: d.i64("OffsetForLeaderEpochResponse.partitions.end_offset")?,
        };
        if flexible {
            d.skip_tagged_fields("OffsetForLeaderEpochResponse.partitions.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl Message for OffsetForLeaderEpochResponse {
    const API_KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    const MIN_VERSION: i16 = 2;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 4;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_i32(self.throttle_time_ms);
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let throttle_time_ms = d.i32("OffsetForLeaderEpochResponse.throttle_time_ms")?;
        let topics = d.array_of(flexible, "OffsetForLeaderEpochResponse.topics", |d| {
            OffsetForLeaderTopicResult::decode(d, version)
        })?;
        if flexible {
            d.skip_tagged_fields("OffsetForLeaderEpochResponse.tagged_fields")?;
        }
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> OffsetForLeaderEpochResponse {
        OffsetForLeaderEpochResponse {
            throttle_time_ms: 7,
            topics: vec![OffsetForLeaderTopicResult {
                topic: "t".into(),
                partitions: vec![EpochEndOffset {
                    error_code: 0,
                    partition: 2,
                    leader_epoch: 5,
                    end_offset: 42,
                }],
            }],
        }
    }

    #[test]
    fn response_v3_classic_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x07,         // throttle_time_ms
            0x00, 0x00, 0x00, 0x01,         // topics: count 1
            0x00, 0x01, b't',               //   topic
            0x00, 0x00, 0x00, 0x01,         //   partitions: count 1
            0x00, 0x00,                     //     error_code
            0x00, 0x00, 0x00, 0x02,         //     partition
            0x00, 0x00, 0x00, 0x05,         //     leader_epoch
            0, 0, 0, 0, 0, 0, 0, 42,        //     end_offset
        ];
        assert_golden(&response(), 3, &golden);
        assert_golden(&response(), 2, &golden);
    }

    #[test]
    fn response_v4_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x07,         // throttle_time_ms
            0x02,                           // topics: compact count 1 + 1
            0x02, b't',                     //   topic
            0x02,                           //   partitions
            0x00, 0x00,                     //     error_code
            0x00, 0x00, 0x00, 0x02,         //     partition
            0x00, 0x00, 0x00, 0x05,         //     leader_epoch
            0, 0, 0, 0, 0, 0, 0, 42,        //     end_offset
            0x00,                           //     partition tagged fields
            0x00,                           //   topic tagged fields
            0x00,                           // tagged fields
        ];
        assert_golden(&response(), 4, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&response());
    }
}
