//! AddPartitionsToTxnResponse (API key 24): whether the partitions a producer asked for joined
//! its transaction (KIP-98, transactions v1). The request is generated
//! (`super::super::generated`).
//!
//! Schemas `AddPartitionsToTxnRequest.json` / `AddPartitionsToTxnResponse.json`: versions 0–5,
//! flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 may answer PRODUCER_FENCED (KIP-588); v3 is the
//! first flexible version; v4 batches several transactions, adds `VerifyOnly` and a top-level
//! response error code (KIP-890 part 1); v5 may answer TRANSACTION_ABORTABLE (KIP-890). Clients
//! use v0–3; v4+ are sent by brokers to the coordinator to verify a transactional produce.
//!
//! Both shapes map onto one struct: a list of per-transaction results; below v4 it holds
//! exactly one entry.

use bytes::BufMut;

use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// Writes the rest of a body from its per-transaction entries: v4+ the array of entries and the
/// body's tagged fields (KIP-890); v0–3 the fields of one entry inline, which there are the
/// rest of the body (tagged fields included) for a single transaction: the first entry, or a
/// default one when there is none.
fn put_per_transaction<B: BufMut, T: Default>(
    out: &mut B,
    version: i16,
    entries: &[T],
    mut put_entry: impl FnMut(&mut B, &T),
) {
    if version >= 4 {
        out.put_array(true, entries, put_entry);
        out.put_empty_tagged_fields();
    } else {
        match entries.first() {
            Some(entry) => put_entry(out, entry),
            None => put_entry(out, &T::default()),
        }
    }
}

/// Reads the rest of a body written by [`put_per_transaction`]: below v4, a one-entry list.
fn read_per_transaction<'a, T>(
    d: &mut Decoder<'a>,
    version: i16,
    context: &'static str,
    mut read_entry: impl FnMut(&mut Decoder<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    if version >= 4 {
        let entries = d.array_of(true, context, read_entry)?;
        d.skip_tagged_fields(context)?;
        Ok(entries)
    } else {
        Ok(vec![read_entry(d)?])
    }
}

/// AddPartitionsToTxn response body, in one shape for every version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddPartitionsToTxnResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// v4+: the top-level error code (KIP-890).
    pub error_code: i16,
    /// The results, by transaction. v4+ carry the list; v0–3 carry the topic results of one
    /// transaction at the top level: they decode to a one-entry list whose transactional id
    /// is empty, and only the first entry is encoded.
    pub results_by_transaction: Vec<AddPartitionsToTxnResult>,
}

/// The results of one transaction of an [`AddPartitionsToTxnResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddPartitionsToTxnResult {
    /// v4+: the transactional id; empty below v4.
    pub transactional_id: String,
    /// The results, by topic.
    pub topic_results: Vec<TopicPartitionErrors>,
}

/// Per-partition error codes of one topic. AddPartitionsToTxn and TxnOffsetCommit responses
/// share this shape (`AddPartitionsToTxnTopicResult`, `TxnOffsetCommitResponseTopic`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicPartitionErrors {
    /// The topic name.
    pub name: String,
    /// The result of each partition.
    pub partitions: Vec<PartitionError>,
}

/// The error code of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionError {
    /// The partition index.
    pub partition_index: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
}

impl TopicPartitionErrors {
    /// Writes the topic result in the classic or flexible encoding.
    pub(crate) fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        put_topic_entry(
            out,
            flexible,
            TopicRef::Name(&self.name),
            &self.partitions,
            |out, p| {
                out.put_i32(p.partition_index);
                out.put_i16(p.error_code);
                if flexible {
                    out.put_empty_tagged_fields();
                }
            },
        );
    }

    /// Reads a topic result written by [`TopicPartitionErrors::encode`].
    pub(crate) fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        const CONTEXT: &str = "TopicPartitionErrors";
        let (name, _, partitions) = read_topic_entry(d, flexible, TopicKey::Name, CONTEXT, |d| {
            let partition = PartitionError {
                partition_index: d.i32(CONTEXT)?,
                error_code: d.i16(CONTEXT)?,
            };
            if flexible {
                d.skip_tagged_fields(CONTEXT)?;
            }
            Ok(partition)
        })?;
        Ok(Self { name, partitions })
    }
}

impl AddPartitionsToTxnResult {
    // The v4+ list entry. Without the transactional id, the topic results followed by the
    // tagged fields are exactly the rest of a v0–3 response body, so both shapes share this.
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = AddPartitionsToTxnResponse::is_flexible(version);
        if version >= 4 {
            out.put_string(flexible, &self.transactional_id);
        }
        out.put_array(flexible, &self.topic_results, |out, t| {
            t.encode(flexible, out)
        });
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = AddPartitionsToTxnResponse::is_flexible(version);
        let mut result = Self::default();
        if version >= 4 {
            result.transactional_id =
                d.string(flexible, "AddPartitionsToTxnResult.transactional_id")?;
        }
        result.topic_results =
            d.array_of(flexible, "AddPartitionsToTxnResult.topic_results", |d| {
                TopicPartitionErrors::decode(d, flexible)
            })?;
        if flexible {
            d.skip_tagged_fields("AddPartitionsToTxnResult.tagged_fields")?;
        }
        Ok(result)
    }
}

impl Message for AddPartitionsToTxnResponse {
    const API_KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        debug_assert!(
            version >= 4 || self.results_by_transaction.len() <= 1,
            "AddPartitionsToTxn v0-3 carry one transaction's results (none encodes as empty)"
        );
        out.put_i32(self.throttle_time_ms);
        if version >= 4 {
            out.put_i16(self.error_code);
        }
        put_per_transaction(out, version, &self.results_by_transaction, |out, r| {
            r.encode(version, out)
        });
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let mut response = Self {
            throttle_time_ms: d.i32("AddPartitionsToTxnResponse.throttle_time_ms")?,
            ..Self::default()
        };
        if version >= 4 {
            response.error_code = d.i16("AddPartitionsToTxnResponse.error_code")?;
        }
        response.results_by_transaction = read_per_transaction(
            d,
            version,
            "AddPartitionsToTxnResponse.results_by_transaction",
            |d| AddPartitionsToTxnResult::decode(d, version),
        )?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust_at};

    fn topic_results() -> Vec<TopicPartitionErrors> {
        vec![TopicPartitionErrors {
            name: "orders".into(),
            partitions: vec![
                PartitionError {
                    partition_index: 0,
                    error_code: 0,
                },
                PartitionError {
                    partition_index: 3,
                    error_code: 48,
                },
            ],
        }]
    }

    fn sample_response(version: i16) -> AddPartitionsToTxnResponse {
        let result = |id: &str| AddPartitionsToTxnResult {
            transactional_id: if version >= 4 {
                id.into()
            } else {
                String::new()
            },
            topic_results: topic_results(),
        };
        AddPartitionsToTxnResponse {
            throttle_time_ms: 4,
            error_code: if version >= 4 { 51 } else { 0 },
            results_by_transaction: if version >= 4 {
                vec![result("a"), result("b")]
            } else {
                vec![result("a")]
            },
        }
    }

    #[test]
    fn golden_response_v1_classic_and_v5_flexible() {
        let v1_response = AddPartitionsToTxnResponse {
            throttle_time_ms: 0,
            error_code: 0,
            results_by_transaction: vec![AddPartitionsToTxnResult {
                transactional_id: String::new(),
                topic_results: vec![TopicPartitionErrors {
                    name: "x".into(),
                    partitions: vec![PartitionError {
                        partition_index: 1,
                        error_code: 0,
                    }],
                }],
            }],
        };
        #[rustfmt::skip]
        let v1 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x00, 0x00, 0x01,       // results_by_topic_v3_and_below: 1
            0x00, 0x01, b'x',             //   name "x"
            0x00, 0x00, 0x00, 0x01,       //   results_by_partition: 1
            0x00, 0x00, 0x00, 0x01,       //     partition_index 1
            0x00, 0x00,                   //     partition_error_code 0
        ];
        assert_golden(&v1_response, 1, &v1);

        let v5_response = AddPartitionsToTxnResponse {
            throttle_time_ms: 0,
            error_code: 0,
            results_by_transaction: vec![AddPartitionsToTxnResult {
                transactional_id: "t".into(),
                topic_results: vec![TopicPartitionErrors {
                    name: "x".into(),
                    partitions: vec![PartitionError {
                        partition_index: 1,
                        error_code: 120,
                    }],
                }],
            }],
        };
        #[rustfmt::skip]
        let v5 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x00,                   // error_code 0
            0x02,                         // results_by_transaction: compact 1+1
            0x02, b't',                   //   transactional_id "t"
            0x02,                         //   topic_results: compact 1+1
            0x02, b'x',                   //     name "x"
            0x02,                         //     results_by_partition: compact 1+1
            0x00, 0x00, 0x00, 0x01,       //       partition_index 1
            0x00, 0x78,                   //       partition_error_code 120 (TRANSACTION_ABORTABLE)
            0x00,                         //       partition tagged fields
            0x00,                         //     topic tagged fields
            0x00,                         //   result tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&v5_response, 5, &v5);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        for version in
            AddPartitionsToTxnResponse::MIN_VERSION..=AddPartitionsToTxnResponse::MAX_VERSION
        {
            assert_robust_at(&sample_response(version), version);
        }
    }
}
