//! OffsetCommitResponse (API key 8), versions 2–9: the outcome of committing a group member's
//! consumed offsets outside transactions. (Kafka 4.0 removed v0 and v1, KIP-896.) The request
//! is generated (`super::super::generated`).
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
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

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
    const MIN_VERSION: i16 = 2;
    const MAX_VERSION: i16 = 9;
    const FLEXIBLE_FROM: i16 = 8;

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
        assert_robust(&sample_response());
    }
}
