//! Produce (API key 0): writes record batches to partition leaders.
//!
//! Schemas `ProduceRequest.json` / `ProduceResponse.json`: versions 3–13, flexible from v9.
//! v0–2 (message formats 0 and 1) were removed in Kafka 4.0 (KIP-896) and are not implemented.
//!
//! Version history: v3 adds the transactional id and record batch v2 (KIP-98); v4 may answer
//! KAFKA_STORAGE_ERROR; v5 adds the log start offset to the response (KIP-107, used to tell
//! UNKNOWN_PRODUCER_ID after retention from data loss); v6 is the same as v5; v7 allows zstd
//! (KIP-110); v8 adds per-record errors and an error message to the response (KIP-467); v9 is
//! the first flexible version; v10 adds the `CurrentLeader` / `NodeEndpoints` tagged fields
//! to the response (KIP-951); v11 may answer TRANSACTION_ABORTABLE (KIP-890 part 1); v12 adds
//! the partition to the transaction implicitly under transactions v2 (KIP-890 part 2); v13
//! (Kafka 4.1) names topics by id instead of by name (KIP-516).

use bytes::{BufMut, Bytes};

use super::fields::{TopicKey, put_topic_entry, read_topic_entry};
use super::metadata::BrokerEndpoint;
use super::tagged::TaggedFields;
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// The first Produce version that may carry zstd-compressed batches (KIP-110): a broker
/// answers UNSUPPORTED_COMPRESSION_TYPE to zstd in an older version.
pub const ZSTD_MIN_VERSION: i16 = 7;

impl ProduceRequest {
    /// Encodes the request, each partition's records through `records` (copied, or
    /// referenced by a spliced frame).
    pub fn encode_records_with<B: BufMut>(
        &self,
        version: i16,
        out: &mut B,
        records: &mut impl RecordsOut<B>,
    ) {
        let flexible = Self::is_flexible(version);
        out.put_nullable_string(flexible, self.transactional_id.as_deref());
        out.put_i16(self.acks);
        out.put_i32(self.timeout_ms);
        out.put_array(flexible, &self.topic_data, |out, t| {
            t.encode(version, out, records)
        });
        if flexible {
            out.put_empty_tagged_fields();
        }
    }
}

/// Produce request body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceRequest {
    /// The transactional id, or null when the producer is not transactional (v3+, KIP-98).
    pub transactional_id: Option<String>,
    /// How many acknowledgements the leader waits for: 0, 1 or -1 (all in-sync replicas).
    pub acks: i16,
    /// How long the leader waits for the acknowledgements, in milliseconds.
    pub timeout_ms: i32,
    /// The data, by topic.
    pub topic_data: Vec<TopicProduceData>,
}

/// The data for one topic of a [`ProduceRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicProduceData {
    /// v3–12: the topic name.
    pub name: String,
    /// v13+: the topic id, replacing the name (KIP-516).
    pub topic_id: [u8; 16],
    /// The data, by partition.
    pub partition_data: Vec<PartitionProduceData>,
}

/// The data for one partition of a [`ProduceRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionProduceData {
    /// The partition index.
    pub index: i32,
    /// Already encoded RecordBatch v2 bytes (exactly one batch from v3), or null. The codec
    /// does not look inside them.
    pub records: Option<ProduceRecords>,
}

/// A partition's records in a Produce request: byte strings written back to back under one
/// length prefix. The producer passes a stamped batch's 61-byte header and its body as two
/// parts, so the body reaches the socket without being copied into one buffer first
/// ([`crate::protocol::frame::RequestFrame::produce`]).
#[derive(Debug, Clone, Default)]
pub struct ProduceRecords {
    parts: Vec<Bytes>,
    len: usize,
}

impl ProduceRecords {
    /// Records made of `parts`, in order.
    pub fn from_parts(parts: Vec<Bytes>) -> Self {
        let len = parts.iter().map(Bytes::len).sum();
        Self { parts, len }
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    #[cfg(feature = "internals")]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The records in one buffer.
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }
}

impl From<Bytes> for ProduceRecords {
    fn from(records: Bytes) -> Self {
        Self::from_parts(vec![records])
    }
}

// Equal when the bytes are, however they are cut into parts.
impl PartialEq for ProduceRecords {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.to_bytes() == other.to_bytes()
    }
}

impl Eq for ProduceRecords {}

/// Where an encoder puts a partition's records, after their length prefix: copied into the
/// buffer ([`CopyRecords`]), or handed over as parts of a spliced frame.
pub trait RecordsOut<B> {
    /// Writes (or references) `records` at the current end of `out`.
    fn put(&mut self, out: &mut B, records: &ProduceRecords);
}

/// Copies the records into the buffer, as every other field is.
pub struct CopyRecords;

impl<B: BufMut> RecordsOut<B> for CopyRecords {
    fn put(&mut self, out: &mut B, records: &ProduceRecords) {
        for part in records.parts() {
            out.put_slice(part);
        }
    }
}

/// How a version names topics: by id from v13, by name before (KIP-516).
fn topic_key(version: i16) -> TopicKey {
    TopicKey::from_version(version, 13)
}

impl PartitionProduceData {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B, records: &mut impl RecordsOut<B>) {
        out.put_i32(self.index);
        out.put_nullable_len(flexible, self.records.as_ref().map(ProduceRecords::len));
        if let Some(r) = &self.records {
            records.put(out, r);
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let partition = Self {
            index: d.i32("PartitionProduceData.index")?,
            records: d
                .nullable_bytes(flexible, "PartitionProduceData.records")?
                .map(ProduceRecords::from),
        };
        if flexible {
            d.skip_tagged_fields("PartitionProduceData.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl TopicProduceData {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B, records: &mut impl RecordsOut<B>) {
        let flexible = ProduceRequest::is_flexible(version);
        put_topic_entry(
            out,
            flexible,
            topic_key(version).pick(&self.name, &self.topic_id),
            &self.partition_data,
            |out, p| p.encode(flexible, out, records),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = ProduceRequest::is_flexible(version);
        let (name, topic_id, partition_data) =
            read_topic_entry(d, flexible, topic_key(version), "TopicProduceData", |d| {
                PartitionProduceData::decode(d, flexible)
            })?;
        Ok(Self {
            name,
            topic_id,
            partition_data,
        })
    }
}

impl Message for ProduceRequest {
    const API_KEY: ApiKey = ApiKey::Produce;
    const MIN_VERSION: i16 = 3;
    const MAX_VERSION: i16 = 13;
    const FLEXIBLE_FROM: i16 = 9;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        self.encode_records_with(version, out, &mut CopyRecords);
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let request = Self {
            transactional_id: d.nullable_string(flexible, "ProduceRequest.transactional_id")?,
            acks: d.i16("ProduceRequest.acks")?,
            timeout_ms: d.i32("ProduceRequest.timeout_ms")?,
            topic_data: d.array_of(flexible, "ProduceRequest.topic_data", |d| {
                TopicProduceData::decode(d, version)
            })?,
        };
        if flexible {
            d.skip_tagged_fields("ProduceRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for ProduceRequest {
    type Response = ProduceResponse;
}

/// Produce response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceResponse {
    /// The results, by topic.
    pub responses: Vec<TopicProduceResponse>,
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// v10+, tag 0: the endpoints of the leaders named in `current_leader` of partitions that
    /// failed with NOT_LEADER_OR_FOLLOWER (KIP-951), so the client can redirect without a
    /// metadata round trip.
    pub node_endpoints: Vec<BrokerEndpoint>,
}

/// The results for one topic of a [`ProduceResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicProduceResponse {
    /// v3–12: the topic name.
    pub name: String,
    /// v13+: the topic id, replacing the name (KIP-516).
    pub topic_id: [u8; 16],
    /// The results, by partition.
    pub partition_responses: Vec<PartitionProduceResponse>,
}

/// The result for one partition of a [`ProduceResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceResponse {
    /// The partition index.
    pub index: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
    /// The offset of the first record written.
    pub base_offset: i64,
    /// The broker's append time when the topic uses LogAppendTime, else -1 (the default).
    pub log_append_time_ms: i64,
    /// v5+: the partition's log start offset (KIP-107); -1 (the default) when unknown.
    pub log_start_offset: i64,
    /// v8+: the records that made the broker drop the whole batch (KIP-467).
    pub record_errors: Vec<BatchIndexAndErrorMessage>,
    /// v8+: a message summarising why the batch was dropped (KIP-467).
    pub error_message: Option<String>,
    /// v10+, tag 0: the current leader when the error is NOT_LEADER_OR_FOLLOWER or
    /// FENCED_LEADER_EPOCH (KIP-951); `{-1, -1}` (the default, not written) otherwise.
    pub current_leader: LeaderIdAndEpoch,
}

impl Default for PartitionProduceResponse {
    fn default() -> Self {
        Self {
            index: 0,
            error_code: 0,
            base_offset: 0,
            log_append_time_ms: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            error_message: None,
            current_leader: LeaderIdAndEpoch::default(),
        }
    }
}

/// A record that made the broker reject its batch (KIP-467).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchIndexAndErrorMessage {
    /// The index of the record within its batch.
    pub batch_index: i32,
    /// Why the record was rejected, or null.
    pub batch_index_error_message: Option<String>,
}

/// A partition's current leader and its epoch: the `CurrentLeader` tagged field of Produce
/// v10+ (KIP-951) and Fetch v12+ (KIP-595) responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    /// The leader's broker id, -1 when unknown.
    pub leader_id: i32,
    /// The leader epoch, -1 when unknown.
    pub leader_epoch: i32,
}

impl Default for LeaderIdAndEpoch {
    /// The schema's defaults (-1, -1): unknown, and then not written.
    fn default() -> Self {
        Self {
            leader_id: -1,
            leader_epoch: -1,
        }
    }
}

impl LeaderIdAndEpoch {
    /// Writes the struct. It only exists in tagged fields, so it is always flexible.
    pub(super) fn encode<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.leader_id);
        out.put_i32(self.leader_epoch);
        out.put_empty_tagged_fields();
    }

    /// Reads a struct written by [`LeaderIdAndEpoch::encode`].
    pub(super) fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let leader = Self {
            leader_id: d.i32("LeaderIdAndEpoch.leader_id")?,
            leader_epoch: d.i32("LeaderIdAndEpoch.leader_epoch")?,
        };
        d.skip_tagged_fields("LeaderIdAndEpoch.tagged_fields")?;
        Ok(leader)
    }
}

impl BatchIndexAndErrorMessage {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_i32(self.batch_index);
        out.put_nullable_string(flexible, self.batch_index_error_message.as_deref());
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let record_error = Self {
            batch_index: d.i32("BatchIndexAndErrorMessage.batch_index")?,
            batch_index_error_message: d.nullable_string(
                flexible,
                "BatchIndexAndErrorMessage.batch_index_error_message",
            )?,
        };
        if flexible {
            d.skip_tagged_fields("BatchIndexAndErrorMessage.tagged_fields")?;
        }
        Ok(record_error)
    }
}

impl PartitionProduceResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = ProduceResponse::is_flexible(version);
        out.put_i32(self.index);
        out.put_i16(self.error_code);
        out.put_i64(self.base_offset);
        out.put_i64(self.log_append_time_ms);
        if version >= 5 {
            out.put_i64(self.log_start_offset);
        }
        if version >= 8 {
            out.put_array(flexible, &self.record_errors, |out, e| {
                e.encode(flexible, out)
            });
            out.put_nullable_string(flexible, self.error_message.as_deref());
        }
        if flexible {
            let mut tagged = TaggedFields::default();
            // v10+, tag 0: CurrentLeader (KIP-951).
            if version >= 10 && self.current_leader != LeaderIdAndEpoch::default() {
                tagged.add(0, |b| self.current_leader.encode(b));
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = ProduceResponse::is_flexible(version);
        let mut partition = Self {
            index: d.i32("PartitionProduceResponse.index")?,
            error_code: d.i16("PartitionProduceResponse.error_code")?,
            base_offset: d.i64("PartitionProduceResponse.base_offset")?,
            log_append_time_ms: d.i64("PartitionProduceResponse.log_append_time_ms")?,
            ..Self::default()
        };
        if version >= 5 {
            partition.log_start_offset = d.i64("PartitionProduceResponse.log_start_offset")?;
        }
        if version >= 8 {
            partition.record_errors =
                d.array_of(flexible, "PartitionProduceResponse.record_errors", |d| {
                    BatchIndexAndErrorMessage::decode(d, flexible)
                })?;
            partition.error_message =
                d.nullable_string(flexible, "PartitionProduceResponse.error_message")?;
        }
        if flexible {
            d.tagged_fields("PartitionProduceResponse.tagged_fields", |tag, f| {
                if tag != 0 || version < 10 {
                    return Ok(false);
                }
                partition.current_leader = LeaderIdAndEpoch::decode(f)?;
                Ok(true)
            })?;
        }
        Ok(partition)
    }
}

impl TopicProduceResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            ProduceResponse::is_flexible(version),
            topic_key(version).pick(&self.name, &self.topic_id),
            &self.partition_responses,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (name, topic_id, partition_responses) = read_topic_entry(
            d,
            ProduceResponse::is_flexible(version),
            topic_key(version),
            "TopicProduceResponse",
            |d| PartitionProduceResponse::decode(d, version),
        )?;
        Ok(Self {
            name,
            topic_id,
            partition_responses,
        })
    }
}

impl Message for ProduceResponse {
    const API_KEY: ApiKey = ApiKey::Produce;
    const MIN_VERSION: i16 = 3;
    const MAX_VERSION: i16 = 13;
    const FLEXIBLE_FROM: i16 = 9;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_array(flexible, &self.responses, |out, t| t.encode(version, out));
        out.put_i32(self.throttle_time_ms);
        if flexible {
            let mut tagged = TaggedFields::default();
            // v10+, tag 0: NodeEndpoints (KIP-951).
            if version >= 10 && !self.node_endpoints.is_empty() {
                tagged.add(0, |b| {
                    BrokerEndpoint::put_node_endpoints(b, &self.node_endpoints)
                });
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self {
            responses: d.array_of(flexible, "ProduceResponse.responses", |d| {
                TopicProduceResponse::decode(d, version)
            })?,
            throttle_time_ms: d.i32("ProduceResponse.throttle_time_ms")?,
            node_endpoints: Vec::new(),
        };
        if flexible {
            d.tagged_fields("ProduceResponse.tagged_fields", |tag, f| {
                if tag != 0 || version < 10 {
                    return Ok(false);
                }
                response.node_endpoints =
                    BrokerEndpoint::read_node_endpoints(f, "ProduceResponse.node_endpoints")?;
                Ok(true)
            })?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_request() -> ProduceRequest {
        ProduceRequest {
            transactional_id: Some("txn".into()),
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![TopicProduceData {
                name: "orders".into(),
                topic_id: [4; 16],
                partition_data: vec![
                    PartitionProduceData {
                        index: 0,
                        records: Some(Bytes::from_static(b"batch-bytes").into()),
                    },
                    PartitionProduceData {
                        index: 1,
                        records: None,
                    },
                ],
            }],
        }
    }

    fn sample_response() -> ProduceResponse {
        ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "orders".into(),
                topic_id: [4; 16],
                partition_responses: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: 6,
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: 10,
                    record_errors: vec![BatchIndexAndErrorMessage {
                        batch_index: 2,
                        batch_index_error_message: Some("bad".into()),
                    }],
                    error_message: Some("dropped".into()),
                    current_leader: LeaderIdAndEpoch {
                        leader_id: 3,
                        leader_epoch: 8,
                    },
                }],
            }],
            throttle_time_ms: 1,
            node_endpoints: vec![BrokerEndpoint {
                node_id: 3,
                host: "b3".into(),
                port: 9094,
                rack: None,
            }],
        }
    }

    #[test]
    fn golden_request_v3_classic() {
        let request = ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(Bytes::from_static(&[0xaa, 0xbb]).into()),
                }],
                ..Default::default()
            }],
        };
        #[rustfmt::skip]
        let v3 = [
            0xff, 0xff,                   // transactional_id null
            0x00, 0x01,                   // acks 1
            0x00, 0x00, 0x03, 0xe8,       // timeout_ms 1000
            0x00, 0x00, 0x00, 0x01,       // topic_data: 1
            0x00, 0x01, b't',             //   name "t"
            0x00, 0x00, 0x00, 0x01,       //   partition_data: 1
            0x00, 0x00, 0x00, 0x00,       //     index 0
            0x00, 0x00, 0x00, 0x02,       //     records: int32 length 2
            0xaa, 0xbb,                   //     (opaque batch bytes)
        ];
        assert_golden(&request, 3, &v3);
    }

    #[test]
    fn golden_request_v12_flexible_and_v13_topic_id() {
        let mut request = ProduceRequest {
            transactional_id: Some("x".into()),
            acks: -1,
            timeout_ms: 5,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 1,
                    records: None,
                }],
                ..Default::default()
            }],
        };
        #[rustfmt::skip]
        let v12 = [
            0x02, b'x',                   // transactional_id "x" (compact)
            0xff, 0xff,                   // acks -1
            0x00, 0x00, 0x00, 0x05,       // timeout_ms 5
            0x02,                         // topic_data: compact 1+1
            0x02, b't',                   //   name "t"
            0x02,                         //   partition_data: compact 1+1
            0x00, 0x00, 0x00, 0x01,       //     index 1
            0x00,                         //     records: compact null
            0x00,                         //     partition tagged fields
            0x00,                         //   topic tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&request, 12, &v12);

        request.topic_data[0].name = String::new();
        request.topic_data[0].topic_id = [0x11; 16];
        #[rustfmt::skip]
        let v13 = [
            0x02, b'x', 0xff, 0xff, 0x00, 0x00, 0x00, 0x05, 0x02,
            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, // topic_id instead of the name
            0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        ];
        assert_golden(&request, 13, &v13);
    }

    #[test]
    fn golden_response_v8_classic() {
        let response = ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: 0,
                    base_offset: 5,
                    log_append_time_ms: -1,
                    log_start_offset: 0,
                    record_errors: vec![],
                    error_message: None,
                    current_leader: LeaderIdAndEpoch::default(),
                }],
                ..Default::default()
            }],
            throttle_time_ms: 0,
            node_endpoints: vec![],
        };
        #[rustfmt::skip]
        let v8 = [
            0x00, 0x00, 0x00, 0x01,       // responses: 1
            0x00, 0x01, b't',             //   name "t"
            0x00, 0x00, 0x00, 0x01,       //   partition_responses: 1
            0x00, 0x00, 0x00, 0x00,       //     index 0
            0x00, 0x00,                   //     error_code 0
            0, 0, 0, 0, 0, 0, 0, 5,       //     base_offset 5
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_append_time_ms -1
            0, 0, 0, 0, 0, 0, 0, 0,       //     log_start_offset 0
            0x00, 0x00, 0x00, 0x00,       //     record_errors: 0
            0xff, 0xff,                   //     error_message null
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
        ];
        assert_golden(&response, 8, &v8);
    }

    #[test]
    fn golden_response_v10_flexible_with_leader_hints() {
        let response = ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: 6, // NOT_LEADER_OR_FOLLOWER
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: -1,
                    record_errors: vec![],
                    error_message: None,
                    current_leader: LeaderIdAndEpoch {
                        leader_id: 2,
                        leader_epoch: 7,
                    },
                }],
                ..Default::default()
            }],
            throttle_time_ms: 0,
            node_endpoints: vec![BrokerEndpoint {
                node_id: 2,
                host: "h".into(),
                port: 9093,
                rack: None,
            }],
        };
        #[rustfmt::skip]
        let v10 = [
            0x02,                         // responses: compact 1+1
            0x02, b't',                   //   name "t"
            0x02,                         //   partition_responses: compact 1+1
            0x00, 0x00, 0x00, 0x00,       //     index 0
            0x00, 0x06,                   //     error_code 6
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // base_offset -1
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_append_time_ms -1
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1
            0x01,                         //     record_errors: compact 0+1
            0x00,                         //     error_message: compact null
            0x01,                         //     tagged fields: 1
            0x00, 0x09,                   //     tag 0 (CurrentLeader), 9 bytes:
            0x00, 0x00, 0x00, 0x02,       //       leader_id 2
            0x00, 0x00, 0x00, 0x07,       //       leader_epoch 7
            0x00,                         //       tagged fields
            0x00,                         //   topic tagged fields
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x01,                         // tagged fields: 1
            0x00, 0x0d,                   // tag 0 (NodeEndpoints), 13 bytes:
            0x02,                         //   compact 1+1
            0x00, 0x00, 0x00, 0x02,       //   node_id 2
            0x02, b'h',                   //   host "h"
            0x00, 0x00, 0x23, 0x85,       //   port 9093
            0x00,                         //   rack: compact null
            0x00,                         //   tagged fields
        ];
        assert_golden(&response, 10, &v10);
    }

    #[test]
    fn current_leader_is_read_from_v10_and_unknown_tags_are_skipped() {
        #[rustfmt::skip]
        let body = |tag: u8| vec![
            0x02, 0x02, b't', 0x02,       // one topic "t", one partition:
            0x00, 0x00, 0x00, 0x00,       //   index 0
            0x00, 0x06,                   //   error_code 6
            0, 0, 0, 0, 0, 0, 0, 0,       //   base_offset 0
            0, 0, 0, 0, 0, 0, 0, 0,       //   log_append_time_ms 0
            0, 0, 0, 0, 0, 0, 0, 0,       //   log_start_offset 0
            0x01, 0x00,                   //   record_errors empty, error_message null
            0x02,                         //   tagged fields: 2
            0x05, 0x01, 0xee,             //   tag 5, 1 byte: unknown, skipped
            tag, 0x09,                    //   tag `tag`, 9 bytes:
            0, 0, 0, 0x02, 0, 0, 0, 0x07, 0x00, // leader 2, epoch 7, no tagged fields
            0x00,                         //   topic tagged fields
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00,                         // tagged fields
        ];
        let leader = |bytes: &[u8], version| {
            let response = ProduceResponse::decode(&mut Decoder::new(bytes), version).unwrap();
            response.responses[0].partition_responses[0].current_leader
        };
        let hinted = LeaderIdAndEpoch {
            leader_id: 2,
            leader_epoch: 7,
        };
        assert_eq!(leader(&body(0), 10), hinted);
        // Tag 0 means nothing at v9 (KIP-951 added it in v10), nor does tag 1 at v10.
        assert_eq!(leader(&body(0), 9), LeaderIdAndEpoch::default());
        assert_eq!(leader(&body(1), 10), LeaderIdAndEpoch::default());
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        assert_robust(&sample_request());
        assert_robust(&sample_response());
    }
}
