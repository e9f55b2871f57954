//! TxnOffsetCommitResponse (API key 28): the result of committing consumer offsets inside a
//! transaction, per partition (KIP-98). The request is generated (`super::super::generated`)
//! and goes to the group coordinator.
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
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

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
        assert_robust(&sample_response());
    }
}
