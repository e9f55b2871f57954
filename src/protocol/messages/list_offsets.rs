//! ListOffsetsResponse (API key 2), versions 0–10: the offset of a partition at a timestamp, or
//! at one of the special timestamps (-1 latest, -2 earliest, -3 max timestamp, -4 local log
//! start, -5 last tiered offset). The request is generated (`super::super::generated`),
//! versions 1–10.
//!
//! Schema: `ListOffsetsRequest.json` / `ListOffsetsResponse.json`. v0 asks for up to
//! `MaxNumOffsets` offsets and gets `OldStyleOffsets` back; v1 returns one offset and its
//! timestamp; v2 adds `IsolationLevel` (KIP-98) and the throttle time; v4 the leader epochs
//! (KIP-320); v6 is the first flexible version; v7–v9 only allow new special timestamps
//! (KIP-734, KIP-405, KIP-1005); v10 adds `TimeoutMs` for tiered-storage reads (KIP-1075).
//! Kafka 4.0 dropped v0 (KIP-896); 3.x brokers still accept it.

use bytes::BufMut;

use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// ListOffsetsResponse: per partition, the offset found (or the error).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOffsetsResponse {
    /// v2+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The topics looked up.
    pub topics: Vec<ListOffsetsTopicResponse>,
}

/// One topic of a [`ListOffsetsResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOffsetsTopicResponse {
    /// The topic name.
    pub name: String,
    /// The partitions looked up.
    pub partitions: Vec<ListOffsetsPartitionResponse>,
}

/// One partition of a [`ListOffsetsTopicResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    /// The partition index.
    pub partition_index: i32,
    /// The partition's error code, 0 for none.
    pub error_code: i16,
    /// v0 only: the offsets found, latest first.
    pub old_style_offsets: Vec<i64>,
    /// v1+: the timestamp of the offset found, -1 if none.
    pub timestamp: i64,
    /// v1+: the offset found, -1 if none.
    pub offset: i64,
    /// v4+: the leader epoch of the offset found (KIP-320), -1 if unknown.
    pub leader_epoch: i32,
}

impl Default for ListOffsetsPartitionResponse {
    /// The schema's defaults (`Timestamp`, `Offset` and `LeaderEpoch` -1).
    fn default() -> Self {
        Self {
            partition_index: 0,
            error_code: 0,
            old_style_offsets: Vec::new(),
            timestamp: -1,
            offset: -1,
            leader_epoch: -1,
        }
    }
}

impl ListOffsetsTopicResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            ListOffsetsResponse::is_flexible(version),
            TopicRef::Name(&self.name),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (name, _, partitions) = read_topic_entry(
            d,
            ListOffsetsResponse::is_flexible(version),
            TopicKey::Name,
            "ListOffsetsResponse.topics",
            |d| ListOffsetsPartitionResponse::decode(d, version),
        )?;
        Ok(Self { name, partitions })
    }
}

impl ListOffsetsPartitionResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        out.put_i32(self.partition_index);
        out.put_i16(self.error_code);
        if version == 0 {
            // v0 is never flexible: a classic int32-counted array.
            out.put_array(false, &self.old_style_offsets, |out, o| out.put_i64(*o));
        } else {
            out.put_i64(self.timestamp);
            out.put_i64(self.offset);
        }
        if version >= 4 {
            out.put_i32(self.leader_epoch);
        }
        if ListOffsetsResponse::is_flexible(version) {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let mut partition = Self {
            partition_index: d.i32("ListOffsetsResponse.partitions.partition_index")?,
            error_code: d.i16("ListOffsetsResponse.partitions.error_code")?,
            ..Self::default()
        };
        if version == 0 {
            partition.old_style_offsets = d.array_of(
                false,
                "ListOffsetsResponse.partitions.old_style_offsets",
                |d| d.i64("ListOffsetsResponse.partitions.old_style_offsets"),
            )?;
        } else {
            partition.timestamp = d.i64("ListOffsetsResponse.partitions.timestamp")?;
            partition.offset = d.i64("ListOffsetsResponse.partitions.offset")?;
        }
        if version >= 4 {
            partition.leader_epoch = d.i32("ListOffsetsResponse.partitions.leader_epoch")?;
        }
        if ListOffsetsResponse::is_flexible(version) {
            d.skip_tagged_fields("ListOffsetsResponse.partitions.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl Message for ListOffsetsResponse {
    const API_KEY: ApiKey = ApiKey::ListOffsets;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 10;
    const FLEXIBLE_FROM: i16 = 6;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 2 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 2 {
            response.throttle_time_ms = d.i32("ListOffsetsResponse.throttle_time_ms")?;
        }
        response.topics = d.array_of(flexible, "ListOffsetsResponse.topics", |d| {
            ListOffsetsTopicResponse::decode(d, version)
        })?;
        if flexible {
            d.skip_tagged_fields("ListOffsetsResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> ListOffsetsResponse {
        ListOffsetsResponse {
            throttle_time_ms: 0,
            topics: vec![ListOffsetsTopicResponse {
                name: "t".into(),
                partitions: vec![ListOffsetsPartitionResponse {
                    partition_index: 2,
                    error_code: 0,
                    old_style_offsets: Vec::new(),
                    timestamp: -1,
                    offset: 42,
                    leader_epoch: 5,
                }],
            }],
        }
    }

    #[test]
    fn response_v0_classic_golden() {
        let mut value = response();
        value.topics[0].partitions[0] = ListOffsetsPartitionResponse {
            partition_index: 2,
            error_code: 0,
            old_style_offsets: vec![42, 0],
            ..ListOffsetsPartitionResponse::default()
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x01,                         // topics: count 1
            0x00, 0x01, b't',                               //   name
            0x00, 0x00, 0x00, 0x01,                         //   partitions: count 1
            0x00, 0x00, 0x00, 0x02,                         //     partition_index
            0x00, 0x00,                                     //     error_code
            0x00, 0x00, 0x00, 0x02,                         //     old_style_offsets: count 2
            0, 0, 0, 0, 0, 0, 0, 42,
            0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_golden(&value, 0, &golden);
    }

    #[test]
    fn response_v4_classic_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,                         // throttle_time_ms (v2+)
            0x00, 0x00, 0x00, 0x01,                         // topics: count 1
            0x00, 0x01, b't',                               //   name
            0x00, 0x00, 0x00, 0x01,                         //   partitions: count 1
            0x00, 0x00, 0x00, 0x02,                         //     partition_index
            0x00, 0x00,                                     //     error_code
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     timestamp -1 (v1+)
            0, 0, 0, 0, 0, 0, 0, 42,                        //     offset 42 (v1+)
            0x00, 0x00, 0x00, 0x05,                         //     leader_epoch (v4+)
        ];
        assert_golden(&response(), 4, &golden);
    }

    #[test]
    fn response_v6_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,                         // throttle_time_ms
            0x02,                                           // topics: compact count 1 + 1
            0x02, b't',                                     //   name
            0x02,                                           //   partitions
            0x00, 0x00, 0x00, 0x02,                         //     partition_index
            0x00, 0x00,                                     //     error_code
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     timestamp -1
            0, 0, 0, 0, 0, 0, 0, 42,                        //     offset 42
            0x00, 0x00, 0x00, 0x05,                         //     leader_epoch
            0x00,                                           //     partition tagged fields
            0x00,                                           //   topic tagged fields
            0x00,                                           // tagged fields
        ];
        assert_golden(&response(), 6, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        let mut sample = response();
        sample.topics[0].partitions[0].old_style_offsets = vec![1, 2];
        assert_robust(&sample);
    }
}
