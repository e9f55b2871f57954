//! Fetch (API key 1), versions 0–18: reading records from partition leaders (consumers) or
//! followers (replicas). The records come back as raw bytes; a RecordBatch decoder reads them.
//!
//! Schema: `FetchRequest.json` / `FetchResponse.json`. v1 adds the response's throttle time;
//! v3 `MaxBytes` (KIP-74); v4 `IsolationLevel`, the last stable offset and aborted
//! transactions (KIP-98); v5 log start offsets (KIP-107); v7 incremental fetch sessions
//! (KIP-227); v9 `CurrentLeaderEpoch` (KIP-320); v11 `RackId` and the preferred read replica
//! (KIP-392); v12 is the first flexible version, with `LastFetchedEpoch` and the tagged
//! `ClusterId`, `DivergingEpoch`, `CurrentLeader` and `SnapshotId` (KIP-595); v13 names topics
//! by id instead of by name (KIP-516); v15 moves the follower's id into the tagged
//! `ReplicaState` (KIP-903); v16 adds the tagged `NodeEndpoints` (KIP-951); v17 the tagged
//! `ReplicaDirectoryId` (KIP-853); v18 the tagged follower `HighWatermark` (KAFKA-14145, Kafka
//! 4.1). Kafka 4.0 dropped v0–3 (KIP-896); 3.x brokers still accept them.

use bytes::{BufMut, Bytes};

use super::fields::{TopicKey, put_topic_entry, read_topic_entry};
use super::metadata::BrokerEndpoint;
use super::produce::LeaderIdAndEpoch;
use super::tagged::TaggedFields;
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// How a version names topics: by id from v13 (KIP-516), by name before.
fn topic_key(version: i16) -> TopicKey {
    TopicKey::from_version(version, 13)
}

/// FetchRequest: the partitions to read, from which offsets, and how long to wait for data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// v12+, tagged 0: the cluster id if known, so a broker can reject a fetch meant for
    /// another cluster (KIP-595); null otherwise.
    pub cluster_id: Option<String>,
    /// v0–14: the follower's broker id, or -1 for a consumer (moved into `replica_state` in
    /// v15, KIP-903).
    pub replica_id: i32,
    /// v15+, tagged 1: the follower's id and broker epoch (KIP-903); the default (-1, -1)
    /// for a consumer, and then not written.
    pub replica_state: ReplicaState,
    /// How long the broker may wait for `min_bytes` of data, in milliseconds.
    pub max_wait_ms: i32,
    /// The least data to wait for, in bytes.
    pub min_bytes: i32,
    /// v3+: the most data to return, in bytes (KIP-74; the first batch is returned whole
    /// even if larger).
    pub max_bytes: i32,
    /// v4+: 0 read uncommitted, 1 read committed (KIP-98).
    pub isolation_level: i8,
    /// v7+: the fetch session id, 0 for none (KIP-227).
    pub session_id: i32,
    /// v7+: the fetch session epoch; -1 (the default) for a full fetch without a session.
    pub session_epoch: i32,
    /// The topics to fetch.
    pub topics: Vec<FetchTopic>,
    /// v7+: in an incremental fetch, the partitions to drop from the session (KIP-227).
    pub forgotten_topics_data: Vec<ForgottenTopic>,
    /// v11+: the consumer's rack, for fetching from the closest replica (KIP-392).
    pub rack_id: String,
}

impl Default for FetchRequest {
    /// The schema's defaults (`ReplicaId` -1, `MaxBytes` `i32::MAX`, `SessionEpoch` -1).
    fn default() -> Self {
        Self {
            cluster_id: None,
            replica_id: -1,
            replica_state: ReplicaState::default(),
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: i32::MAX,
            isolation_level: 0,
            session_id: 0,
            session_epoch: -1,
            topics: Vec::new(),
            forgotten_topics_data: Vec::new(),
            rack_id: String::new(),
        }
    }
}

/// The fetching follower's identity (v15+, KIP-903).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaState {
    /// The follower's broker id, or -1 for a consumer.
    pub replica_id: i32,
    /// The follower's broker epoch, or -1 if not available.
    pub replica_epoch: i64,
}

impl Default for ReplicaState {
    /// The schema's defaults (-1, -1): a consumer.
    fn default() -> Self {
        Self {
            replica_id: -1,
            replica_epoch: -1,
        }
    }
}

impl ReplicaState {
    /// Tagged fields exist only in flexible versions, so this is always flexible.
    fn encode<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.replica_id);
        out.put_i64(self.replica_epoch);
        out.put_empty_tagged_fields();
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let state = Self {
            replica_id: d.i32("FetchRequest.replica_state.replica_id")?,
            replica_epoch: d.i64("FetchRequest.replica_state.replica_epoch")?,
        };
        d.skip_tagged_fields("FetchRequest.replica_state.tagged_fields")?;
        Ok(state)
    }
}

/// One topic of a [`FetchRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchTopic {
    /// v0–12: the topic name.
    pub topic: String,
    /// v13+: the topic id (KIP-516).
    pub topic_id: [u8; 16],
    /// The partitions to fetch.
    pub partitions: Vec<FetchPartition>,
}

/// One partition of a [`FetchTopic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    /// The partition index.
    pub partition: i32,
    /// v9+: the leader epoch the fetcher knows, for fencing (KIP-320); -1 if unknown.
    pub current_leader_epoch: i32,
    /// The offset to read from.
    pub fetch_offset: i64,
    /// v12+: the epoch of the last fetched record, for divergence detection (KIP-595); -1 if
    /// none.
    pub last_fetched_epoch: i32,
    /// v5+: the follower's log start offset; -1 for a consumer (KIP-107).
    pub log_start_offset: i64,
    /// The most data to return for this partition, in bytes.
    pub partition_max_bytes: i32,
    /// v17+, tagged 0: the follower's log directory id (KIP-853); all zero when not set.
    pub replica_directory_id: [u8; 16],
    /// v18+, tagged 1: the KRaft follower's high watermark (KAFKA-14145); `i64::MAX` when not
    /// set.
    pub high_watermark: i64,
}

impl Default for FetchPartition {
    /// The schema's defaults (epochs and log start offset -1, `HighWatermark` `i64::MAX`).
    fn default() -> Self {
        Self {
            partition: 0,
            current_leader_epoch: -1,
            fetch_offset: 0,
            last_fetched_epoch: -1,
            log_start_offset: -1,
            partition_max_bytes: 0,
            replica_directory_id: [0; 16],
            high_watermark: i64::MAX,
        }
    }
}

/// One topic of [`FetchRequest::forgotten_topics_data`] (v7+).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForgottenTopic {
    /// v7–12: the topic name.
    pub topic: String,
    /// v13+: the topic id (KIP-516).
    pub topic_id: [u8; 16],
    /// The partition indexes to drop from the session.
    pub partitions: Vec<i32>,
}

impl FetchPartition {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        out.put_i32(self.partition);
        if version >= 9 {
            out.put_i32(self.current_leader_epoch);
        }
        out.put_i64(self.fetch_offset);
        if version >= 12 {
            out.put_i32(self.last_fetched_epoch);
        }
        if version >= 5 {
            out.put_i64(self.log_start_offset);
        }
        out.put_i32(self.partition_max_bytes);
        if FetchRequest::is_flexible(version) {
            let mut tagged = TaggedFields::default();
            if version >= 17 && self.replica_directory_id != [0; 16] {
                tagged.add(0, |b| b.put_uuid(&self.replica_directory_id));
            }
            if version >= 18 && self.high_watermark != i64::MAX {
                tagged.add(1, |b| b.put_i64(self.high_watermark));
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let mut partition = Self {
            partition: d.i32("FetchRequest.partitions.partition")?,
            ..Self::default()
        };
        if version >= 9 {
            partition.current_leader_epoch =
                d.i32("FetchRequest.partitions.current_leader_epoch")?;
        }
        partition.fetch_offset = d.i64("FetchRequest.partitions.fetch_offset")?;
        if version >= 12 {
            partition.last_fetched_epoch = d.i32("FetchRequest.partitions.last_fetched_epoch")?;
        }
        if version >= 5 {
            partition.log_start_offset = d.i64("FetchRequest.partitions.log_start_offset")?;
        }
        partition.partition_max_bytes = d.i32("FetchRequest.partitions.partition_max_bytes")?;
        if FetchRequest::is_flexible(version) {
            d.tagged_fields("FetchRequest.partitions.tagged_fields", |tag, f| {
                match tag {
                    0 if version >= 17 => {
                        partition.replica_directory_id =
                            f.uuid("FetchRequest.partitions.replica_directory_id")?;
                    }
                    1 if version >= 18 => {
                        partition.high_watermark =
                            f.i64("FetchRequest.partitions.high_watermark")?;
                    }
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
        }
        Ok(partition)
    }
}

impl FetchTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            FetchRequest::is_flexible(version),
            topic_key(version).pick(&self.topic, &self.topic_id),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (topic, topic_id, partitions) = read_topic_entry(
            d,
            FetchRequest::is_flexible(version),
            topic_key(version),
            "FetchRequest.topics",
            |d| FetchPartition::decode(d, version),
        )?;
        Ok(Self {
            topic,
            topic_id,
            partitions,
        })
    }
}

impl ForgottenTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            FetchRequest::is_flexible(version),
            topic_key(version).pick(&self.topic, &self.topic_id),
            &self.partitions,
            |out, p| out.put_i32(*p),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        const CONTEXT: &str = "FetchRequest.forgotten_topics_data";
        let (topic, topic_id, partitions) = read_topic_entry(
            d,
            FetchRequest::is_flexible(version),
            topic_key(version),
            CONTEXT,
            |d| d.i32(CONTEXT),
        )?;
        Ok(Self {
            topic,
            topic_id,
            partitions,
        })
    }
}

impl Message for FetchRequest {
    const API_KEY: ApiKey = ApiKey::Fetch;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 18;
    const FLEXIBLE_FROM: i16 = 12;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version <= 14 {
            out.put_i32(self.replica_id);
        }
        out.put_i32(self.max_wait_ms);
        out.put_i32(self.min_bytes);
        if version >= 3 {
            out.put_i32(self.max_bytes);
        }
        if version >= 4 {
            out.put_i8(self.isolation_level);
        }
        if version >= 7 {
            out.put_i32(self.session_id);
            out.put_i32(self.session_epoch);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if version >= 7 {
            out.put_array(flexible, &self.forgotten_topics_data, |out, t| {
                t.encode(version, out)
            });
        }
        if version >= 11 {
            out.put_string(flexible, &self.rack_id);
        }
        if flexible {
            let mut tagged = TaggedFields::default();
            if let Some(cluster_id) = &self.cluster_id {
                tagged.add(0, |b| b.put_string(true, cluster_id));
            }
            if version >= 15 && self.replica_state != ReplicaState::default() {
                tagged.add(1, |b| self.replica_state.encode(b));
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut request = Self::default();
        if version <= 14 {
            request.replica_id = d.i32("FetchRequest.replica_id")?;
        }
        request.max_wait_ms = d.i32("FetchRequest.max_wait_ms")?;
        request.min_bytes = d.i32("FetchRequest.min_bytes")?;
        if version >= 3 {
            request.max_bytes = d.i32("FetchRequest.max_bytes")?;
        }
        if version >= 4 {
            request.isolation_level = d.i8("FetchRequest.isolation_level")?;
        }
        if version >= 7 {
            request.session_id = d.i32("FetchRequest.session_id")?;
            request.session_epoch = d.i32("FetchRequest.session_epoch")?;
        }
        request.topics = d.array_of(flexible, "FetchRequest.topics", |d| {
            FetchTopic::decode(d, version)
        })?;
        if version >= 7 {
            request.forgotten_topics_data =
                d.array_of(flexible, "FetchRequest.forgotten_topics_data", |d| {
                    ForgottenTopic::decode(d, version)
                })?;
        }
        if version >= 11 {
            request.rack_id = d.string(flexible, "FetchRequest.rack_id")?;
        }
        if flexible {
            d.tagged_fields("FetchRequest.tagged_fields", |tag, f| {
                match tag {
                    0 => request.cluster_id = f.nullable_string(true, "FetchRequest.cluster_id")?,
                    1 if version >= 15 => request.replica_state = ReplicaState::decode(f)?,
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
        }
        Ok(request)
    }
}

impl Request for FetchRequest {
    type Response = FetchResponse;
}

/// FetchResponse: per partition, the records read (raw) and the partition's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponse {
    /// v1+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// v7+: the top-level error code (fetch-session errors), 0 for none.
    pub error_code: i16,
    /// v7+: the fetch session id, 0 if the fetch is not part of a session (KIP-227).
    pub session_id: i32,
    /// The topics fetched.
    pub responses: Vec<FetchTopicResponse>,
    /// v16+, tagged 0: the endpoints of the leaders named in partitions that answered
    /// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (KIP-951).
    pub node_endpoints: Vec<BrokerEndpoint>,
}

/// One topic of a [`FetchResponse`] (`FetchableTopicResponse` in the schema).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchTopicResponse {
    /// v0–12: the topic name.
    pub topic: String,
    /// v13+: the topic id (KIP-516).
    pub topic_id: [u8; 16],
    /// The partitions fetched.
    pub partitions: Vec<FetchPartitionResponse>,
}

/// One partition of a [`FetchTopicResponse`] (`PartitionData` in the schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionResponse {
    /// The partition index.
    pub partition_index: i32,
    /// The partition's error code, 0 for none.
    pub error_code: i16,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// v4+: the last stable offset: every transaction before it is decided (KIP-98); -1 if
    /// unknown.
    pub last_stable_offset: i64,
    /// v5+: the log start offset (KIP-107); -1 if unknown.
    pub log_start_offset: i64,
    /// v12+, tagged 0: where the fetcher's log diverges from the leader's (KIP-595).
    pub diverging_epoch: EpochEndOffset,
    /// v12+, tagged 1: the current leader, when the fetch went to the wrong broker (KIP-595,
    /// KIP-951).
    pub current_leader: LeaderIdAndEpoch,
    /// v12+, tagged 2: the snapshot to fetch when the offset is before the log start
    /// (KIP-630).
    pub snapshot_id: SnapshotId,
    /// v4+: the aborted transactions among the records, for read-committed fetches (KIP-98);
    /// null when there are none to report.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// v11+: the replica the consumer should fetch from next, or -1 (KIP-392).
    pub preferred_read_replica: i32,
    /// The record data, unparsed (a sequence of RecordBatches; the last may be partial).
    pub records: Option<Bytes>,
}

impl Default for FetchPartitionResponse {
    /// The schema's defaults (offsets, epochs and replica -1; `AbortedTransactions` nullable
    /// without a declared default, so empty).
    fn default() -> Self {
        Self {
            partition_index: 0,
            error_code: 0,
            high_watermark: 0,
            last_stable_offset: -1,
            log_start_offset: -1,
            diverging_epoch: EpochEndOffset::default(),
            current_leader: LeaderIdAndEpoch::default(),
            snapshot_id: SnapshotId::default(),
            aborted_transactions: Some(Vec::new()),
            preferred_read_replica: -1,
            records: None,
        }
    }
}

/// The largest epoch and its end offset where the logs agree (v12+, KIP-595).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The epoch, -1 if none.
    pub epoch: i32,
    /// The end offset, -1 if none.
    pub end_offset: i64,
}

impl Default for EpochEndOffset {
    /// The schema's defaults (-1, -1): no divergence.
    fn default() -> Self {
        Self {
            epoch: -1,
            end_offset: -1,
        }
    }
}

/// The snapshot to fetch instead of the log (v12+, KIP-630).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotId {
    /// The snapshot's end offset, -1 if none.
    pub end_offset: i64,
    /// The snapshot's epoch, -1 if none.
    pub epoch: i32,
}

impl Default for SnapshotId {
    /// The schema's defaults (-1, -1): no snapshot.
    fn default() -> Self {
        Self {
            end_offset: -1,
            epoch: -1,
        }
    }
}

/// An aborted transaction among the fetched records (v4+, KIP-98).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AbortedTransaction {
    /// The producer id of the aborted transaction.
    pub producer_id: i64,
    /// The offset of the transaction's first record.
    pub first_offset: i64,
}

impl EpochEndOffset {
    /// Tagged fields exist only in flexible versions, so this is always flexible.
    fn encode<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.epoch);
        out.put_i64(self.end_offset);
        out.put_empty_tagged_fields();
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let value = Self {
            epoch: d.i32("FetchResponse.diverging_epoch.epoch")?,
            end_offset: d.i64("FetchResponse.diverging_epoch.end_offset")?,
        };
        d.skip_tagged_fields("FetchResponse.diverging_epoch.tagged_fields")?;
        Ok(value)
    }
}

impl SnapshotId {
    /// Tagged fields exist only in flexible versions, so this is always flexible.
    fn encode<B: BufMut>(&self, out: &mut B) {
        out.put_i64(self.end_offset);
        out.put_i32(self.epoch);
        out.put_empty_tagged_fields();
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let value = Self {
            end_offset: d.i64("FetchResponse.snapshot_id.end_offset")?,
            epoch: d.i32("FetchResponse.snapshot_id.epoch")?,
        };
        d.skip_tagged_fields("FetchResponse.snapshot_id.tagged_fields")?;
        Ok(value)
    }
}

impl AbortedTransaction {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_i64(self.producer_id);
        out.put_i64(self.first_offset);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let value = Self {
            producer_id: d.i64("FetchResponse.aborted_transactions.producer_id")?,
            first_offset: d.i64("FetchResponse.aborted_transactions.first_offset")?,
        };
        if flexible {
            d.skip_tagged_fields("FetchResponse.aborted_transactions.tagged_fields")?;
        }
        Ok(value)
    }
}

impl FetchPartitionResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = FetchResponse::is_flexible(version);
        out.put_i32(self.partition_index);
        out.put_i16(self.error_code);
        out.put_i64(self.high_watermark);
        if version >= 4 {
            out.put_i64(self.last_stable_offset);
        }
        if version >= 5 {
            out.put_i64(self.log_start_offset);
        }
        if version >= 4 {
            match &self.aborted_transactions {
                None => out.put_array_len(flexible, None),
                Some(aborted) => out.put_array(flexible, aborted, |out, t| t.encode(flexible, out)),
            }
        }
        if version >= 11 {
            out.put_i32(self.preferred_read_replica);
        }
        out.put_nullable_bytes(flexible, self.records.as_deref());
        if flexible {
            let mut tagged = TaggedFields::default();
            if self.diverging_epoch != EpochEndOffset::default() {
                tagged.add(0, |b| self.diverging_epoch.encode(b));
            }
            if self.current_leader != LeaderIdAndEpoch::default() {
                tagged.add(1, |b| self.current_leader.encode(b));
            }
            if self.snapshot_id != SnapshotId::default() {
                tagged.add(2, |b| self.snapshot_id.encode(b));
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = FetchResponse::is_flexible(version);
        let mut partition = Self {
            partition_index: d.i32("FetchResponse.partitions.partition_index")?,
            error_code: d.i16("FetchResponse.partitions.error_code")?,
            high_watermark: d.i64("FetchResponse.partitions.high_watermark")?,
            ..Self::default()
        };
        if version >= 4 {
            partition.last_stable_offset = d.i64("FetchResponse.partitions.last_stable_offset")?;
        }
        if version >= 5 {
            partition.log_start_offset = d.i64("FetchResponse.partitions.log_start_offset")?;
        }
        if version >= 4 {
            partition.aborted_transactions =
                d.nullable_array_of(flexible, "FetchResponse.aborted_transactions", |d| {
                    AbortedTransaction::decode(d, flexible)
                })?;
        }
        if version >= 11 {
            partition.preferred_read_replica =
                d.i32("FetchResponse.partitions.preferred_read_replica")?;
        }
        partition.records = d.nullable_bytes(flexible, "FetchResponse.partitions.records")?;
        if flexible {
            d.tagged_fields("FetchResponse.partitions.tagged_fields", |tag, f| {
                match tag {
                    0 => partition.diverging_epoch = EpochEndOffset::decode(f)?,
                    1 => partition.current_leader = LeaderIdAndEpoch::decode(f)?,
                    2 => partition.snapshot_id = SnapshotId::decode(f)?,
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
        }
        Ok(partition)
    }
}

impl FetchTopicResponse {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        put_topic_entry(
            out,
            FetchResponse::is_flexible(version),
            topic_key(version).pick(&self.topic, &self.topic_id),
            &self.partitions,
            |out, p| p.encode(version, out),
        );
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let (topic, topic_id, partitions) = read_topic_entry(
            d,
            FetchResponse::is_flexible(version),
            topic_key(version),
            "FetchResponse.responses",
            |d| FetchPartitionResponse::decode(d, version),
        )?;
        Ok(Self {
            topic,
            topic_id,
            partitions,
        })
    }
}

impl Message for FetchResponse {
    const API_KEY: ApiKey = ApiKey::Fetch;
    const MIN_VERSION: i16 = FetchRequest::MIN_VERSION;
    const MAX_VERSION: i16 = FetchRequest::MAX_VERSION;
    const FLEXIBLE_FROM: i16 = FetchRequest::FLEXIBLE_FROM;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        if version >= 7 {
            out.put_i16(self.error_code);
            out.put_i32(self.session_id);
        }
        out.put_array(flexible, &self.responses, |out, t| t.encode(version, out));
        if flexible {
            let mut tagged = TaggedFields::default();
            if version >= 16 && !self.node_endpoints.is_empty() {
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
        let mut response = Self::default();
        if version >= 1 {
            response.throttle_time_ms = d.i32("FetchResponse.throttle_time_ms")?;
        }
        if version >= 7 {
            response.error_code = d.i16("FetchResponse.error_code")?;
            response.session_id = d.i32("FetchResponse.session_id")?;
        }
        response.responses = d.array_of(flexible, "FetchResponse.responses", |d| {
            FetchTopicResponse::decode(d, version)
        })?;
        if flexible {
            d.tagged_fields("FetchResponse.tagged_fields", |tag, f| {
                if tag == 0 && version >= 16 {
                    response.node_endpoints =
                        BrokerEndpoint::read_node_endpoints(f, "FetchResponse.node_endpoints")?;
                    return Ok(true);
                }
                Ok(false)
            })?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests;
