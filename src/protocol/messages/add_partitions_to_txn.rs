//! AddPartitionsToTxn (API key 24): adds partitions to a transaction before the producer writes
//! to them (KIP-98, transactions v1).
//!
//! Schemas `AddPartitionsToTxnRequest.json` / `AddPartitionsToTxnResponse.json`: versions 0–5,
//! flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 may answer PRODUCER_FENCED (KIP-588); v3 is the
//! first flexible version; v4 batches several transactions, adds `VerifyOnly` and a top-level
//! response error code (KIP-890 part 1); v5 may answer TRANSACTION_ABORTABLE (KIP-890). Clients
//! use v0–3; v4+ are sent by brokers to the coordinator to verify a transactional produce.
//!
//! Both shapes map onto one pair of structs: the request is a list of transactions and the
//! response a list of per-transaction results; below v4 each list holds exactly one entry.

use bytes::BufMut;

use super::fields::{TopicKey, TopicRef, put_topic_entry, read_topic_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// AddPartitionsToTxn request body, in one shape for every version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddPartitionsToTxnRequest {
    /// The transactions. v4+ send the list (KIP-890); v0–3 carry the fields of exactly one
    /// transaction at the top level: only the first is encoded (an empty list as a default
    /// transaction), and decoding gives a one-entry list.
    pub transactions: Vec<AddPartitionsToTxnTransaction>,
}

/// One transaction of an [`AddPartitionsToTxnRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddPartitionsToTxnTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// v4+: only check that the partitions are in the transaction, do not add them (KIP-890).
    pub verify_only: bool,
    /// The partitions to add, by topic.
    pub topics: Vec<AddPartitionsToTxnTopic>,
}

/// The partitions of one topic to add to a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddPartitionsToTxnTopic {
    /// The topic name.
    pub name: String,
    /// The partition indexes.
    pub partitions: Vec<i32>,
}

impl AddPartitionsToTxnTopic {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        put_topic_entry(
            out,
            flexible,
            TopicRef::Name(&self.name),
            &self.partitions,
            |out, p| out.put_i32(*p),
        );
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        const CONTEXT: &str = "AddPartitionsToTxnTopic";
        let (name, _, partitions) =
            read_topic_entry(d, flexible, TopicKey::Name, CONTEXT, |d| d.i32(CONTEXT))?;
        Ok(Self { name, partitions })
    }
}

impl AddPartitionsToTxnTransaction {
    // The v4+ list entry. Without `verify_only`, the same fields followed by the tagged fields
    // are exactly the v0–3 request body, so both shapes share this code.
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = AddPartitionsToTxnRequest::is_flexible(version);
        out.put_string(flexible, &self.transactional_id);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        if version >= 4 {
            out.put_bool(self.verify_only);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(flexible, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = AddPartitionsToTxnRequest::is_flexible(version);
        let mut transaction = Self {
            transactional_id: d
                .string(flexible, "AddPartitionsToTxnTransaction.transactional_id")?,
            producer_id: d.i64("AddPartitionsToTxnTransaction.producer_id")?,
            producer_epoch: d.i16("AddPartitionsToTxnTransaction.producer_epoch")?,
            ..Self::default()
        };
        if version >= 4 {
            transaction.verify_only = d.bool("AddPartitionsToTxnTransaction.verify_only")?;
        }
        transaction.topics = d.array_of(flexible, "AddPartitionsToTxnTransaction.topics", |d| {
            AddPartitionsToTxnTopic::decode(d, flexible)
        })?;
        if flexible {
            d.skip_tagged_fields("AddPartitionsToTxnTransaction.tagged_fields")?;
        }
        Ok(transaction)
    }
}

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

impl Message for AddPartitionsToTxnRequest {
    const API_KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        debug_assert!(
            version >= 4 || self.transactions.len() == 1,
            "AddPartitionsToTxn v0-3 carry exactly one transaction"
        );
        put_per_transaction(out, version, &self.transactions, |out, t| {
            t.encode(version, out)
        });
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let transactions =
            read_per_transaction(d, version, "AddPartitionsToTxnRequest.transactions", |d| {
                AddPartitionsToTxnTransaction::decode(d, version)
            })?;
        Ok(Self { transactions })
    }
}

impl Request for AddPartitionsToTxnRequest {
    type Response = AddPartitionsToTxnResponse;
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

    fn transaction(version: i16, id: &str) -> AddPartitionsToTxnTransaction {
        AddPartitionsToTxnTransaction {
            transactional_id: id.into(),
            producer_id: 12,
            producer_epoch: 1,
            verify_only: version >= 4,
            topics: vec![AddPartitionsToTxnTopic {
                name: "orders".into(),
                partitions: vec![0, 3],
            }],
        }
    }

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

    fn sample_request(version: i16) -> AddPartitionsToTxnRequest {
        AddPartitionsToTxnRequest {
            transactions: if version >= 4 {
                vec![transaction(version, "a"), transaction(version, "b")]
            } else {
                vec![transaction(version, "a")]
            },
        }
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

    /// Transaction "t" of producer 5 (epoch 0) adding partition 1 of topic "x".
    fn golden_request() -> AddPartitionsToTxnRequest {
        AddPartitionsToTxnRequest {
            transactions: vec![AddPartitionsToTxnTransaction {
                transactional_id: "t".into(),
                producer_id: 5,
                producer_epoch: 0,
                verify_only: false,
                topics: vec![AddPartitionsToTxnTopic {
                    name: "x".into(),
                    partitions: vec![1],
                }],
            }],
        }
    }

    #[test]
    fn golden_request_v2_classic() {
        let request = golden_request();
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x01, b't',             // v3_and_below_transactional_id "t"
            0, 0, 0, 0, 0, 0, 0, 0x05,    // v3_and_below_producer_id 5
            0x00, 0x00,                   // v3_and_below_producer_epoch 0
            0x00, 0x00, 0x00, 0x01,       // v3_and_below_topics: 1
            0x00, 0x01, b'x',             //   name "x"
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00, 0x00, 0x01,       //     1
        ];
        assert_golden(&request, 2, &v2);
    }

    #[test]
    fn golden_request_v3_and_v4_flexible() {
        let mut request = golden_request();
        #[rustfmt::skip]
        let v3 = [
            0x02, b't',                   // v3_and_below_transactional_id "t"
            0, 0, 0, 0, 0, 0, 0, 0x05,    // v3_and_below_producer_id 5
            0x00, 0x00,                   // v3_and_below_producer_epoch 0
            0x02,                         // v3_and_below_topics: compact 1+1
            0x02, b'x',                   //   name "x"
            0x02, 0x00, 0x00, 0x00, 0x01, //   partitions: compact 1+1, [1]
            0x00,                         //   topic tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&request, 3, &v3);

        request.transactions[0].verify_only = true;
        #[rustfmt::skip]
        let v4 = [
            0x02,                         // transactions: compact 1+1
            0x02, b't',                   //   transactional_id "t"
            0, 0, 0, 0, 0, 0, 0, 0x05,    //   producer_id 5
            0x00, 0x00,                   //   producer_epoch 0
            0x01,                         //   verify_only true
            0x02,                         //   topics: compact 1+1
            0x02, b'x',                   //     name "x"
            0x02, 0x00, 0x00, 0x00, 0x01, //     partitions: [1]
            0x00,                         //     topic tagged fields
            0x00,                         //   transaction tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&request, 4, &v4);
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
            AddPartitionsToTxnRequest::MIN_VERSION..=AddPartitionsToTxnRequest::MAX_VERSION
        {
            assert_robust_at(&sample_request(version), version);
            assert_robust_at(&sample_response(version), version);
        }
    }
}
