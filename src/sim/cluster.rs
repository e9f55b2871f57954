//! The model broker cluster: brokers, partitions with a leader each, a log per partition, and
//! Kafka's producer-state rules per partition (`ProducerStateManager` / `ProducerAppendInfo`
//! in the broker; KIP-98, the idempotent producer).
//!
//! Producer state is part of the partition, not of a broker: Kafka replicates it with the log,
//! so it moves with leadership. Every produce batch is decoded with the crate's own decoder
//! and its records appended with offsets; each simulated record's value starts with its
//! unique id, which is what the invariant checkers follow.
//!
//! Transactional batches are verified with the model coordinator ([`super::coordinator`],
//! which writes its markers back through [`TxnLogs`]) before they are appended, and transaction markers take offsets between records (O1);
//! [`PartitionModel::read_committed`] is what an `isolation.level=read_committed` consumer
//! reads.

use std::collections::{BTreeMap, VecDeque};

use crate::engine::{PartitionResponse, ProducerIdentity};

use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::{DecodedBatch, decode_batches, increment_sequence};
use crate::types::{BrokerId, Millis, TopicPartition};

use super::coordinator::{Coordinator, CoordinatorConfig, TxnLogs};
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::types::CoordinatorKey;

/// The transactional bit of a record batch's attributes.
const TRANSACTIONAL_ATTRIBUTE: i16 = 0x10;

/// Batches the broker remembers per producer and partition for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const CACHED_BATCHES: usize = 5;

/// How the cluster is built and which broker generation it imitates.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Broker node ids.
    pub brokers: Vec<BrokerId>,
    /// Topics and their partition counts.
    pub topics: Vec<(String, i32)>,
    /// Imitate brokers before KIP-360 (Kafka < 2.5): a producer the partition has no state
    /// for gets UNKNOWN_PRODUCER_ID unless its first sequence is 0, and retention that deletes
    /// all of a producer's batches deletes its state too. Newer brokers accept any sequence
    /// from an unknown producer and keep state until `producer.id.expiration.ms`.
    pub legacy_producer_state: bool,
    /// `producer.id.expiration.ms`: state of a producer idle this long may be expired.
    pub producer_expiration_ms: Millis,
    /// Retention only deletes records at least this old (`retention.ms`).
    pub retention_ms: Millis,
    /// The first producer id InitProducerId hands out (then +1 each time).
    pub first_producer_id: i64,
    /// The epoch of the first InitProducerId answer. Kafka answers an idempotent producer
    /// with epoch 0; a simulation may start near `i16::MAX` to reach epoch exhaustion without
    /// 32767 bumps.
    pub first_epoch: i16,
    /// A transaction coordinator and a group coordinator, for a transactional producer.
    pub transactions: Option<CoordinatorConfig>,
}

/// One record in a partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Its offset.
    pub offset: i64,
    /// The simulated record's unique id (the first 8 bytes of its value).
    pub record_id: u64,
    /// The producer id of its batch.
    pub producer_id: i64,
    /// The epoch of its batch.
    pub epoch: i16,
    /// Its sequence number.
    pub sequence: i32,
    /// When the leader appended it (virtual time).
    pub appended_ms: Millis,
    /// Whether its batch was transactional (attributes bit 4): read_committed readers see it
    /// only once a commit marker of its producer follows it.
    pub transactional: bool,
}

/// A transaction marker (control batch) in a partition log; it takes an offset (O1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Its offset.
    pub offset: i64,
    /// The producer whose transaction it ends.
    pub producer_id: i64,
    /// The epoch it was written with (TV2 and fencing: the bumped one).
    pub epoch: i16,
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
}

/// A batch in a producer's duplicate-detection cache.
#[derive(Debug, Clone)]
pub(super) struct CachedBatch {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: i64,
    record_ids: Vec<u64>,
}

/// What a partition remembers about one producer id.
#[derive(Debug, Clone)]
pub(super) struct ProducerEntry {
    pub(super) epoch: i16,
    pub(super) last_sequence: i32,
    last_offset: i64,
    last_append_ms: Millis,
    pub(super) cached: VecDeque<CachedBatch>,
}

/// One partition: its leader, its log and its producer state.
#[derive(Debug, Clone)]
pub struct PartitionModel {
    /// The broker that leads it.
    pub leader: BrokerId,
    /// Every record ever appended, including those retention has since deleted (offsets below
    /// `log_start_offset`): the checkers judge the whole history.
    pub log: Vec<LogRecord>,
    /// The first offset still readable.
    pub log_start_offset: i64,
    /// Transaction markers, in offset order (interleaved with `log` by offset).
    pub markers: Vec<Marker>,
    pub(super) producers: BTreeMap<i64, ProducerEntry>,
}

impl PartitionModel {
    pub(super) fn next_offset(&self) -> i64 {
        let records = self.log.last().map_or(0, |r| r.offset + 1);
        let markers = self.markers.last().map_or(0, |m| m.offset + 1);
        records.max(markers)
    }

    /// The record ids a read_committed consumer sees, in offset order: non-transactional
    /// records, and transactional ones a COMMIT marker of their producer follows. Records of
    /// an aborted transaction, and of one still open (past the last stable offset), are not
    /// visible.
    pub fn read_committed(&self) -> Vec<u64> {
        self.read_committed_at()
            .into_iter()
            .map(|(_, id)| id)
            .collect()
    }

    /// What [`PartitionModel::read_committed`] sees, with each record's offset.
    pub fn read_committed_at(&self) -> Vec<(i64, u64)> {
        let mut visible = Vec::new();
        let mut open: BTreeMap<i64, Vec<(i64, u64)>> = BTreeMap::new();
        let mut markers = self.markers.iter().peekable();
        let mut records = self.log.iter().peekable();
        loop {
            let marker_first = match (records.peek(), markers.peek()) {
                (Some(r), Some(m)) => m.offset < r.offset,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => break,
            };
            if marker_first {
                if let Some(m) = markers.next()
                    && let Some(ended) = open.remove(&m.producer_id)
                    && m.commit
                {
                    visible.extend(ended);
                }
            } else if let Some(r) = records.next() {
                if r.transactional {
                    open.entry(r.producer_id)
                        .or_default()
                        .push((r.offset, r.record_id));
                } else {
                    visible.push((r.offset, r.record_id));
                }
            }
        }
        visible.sort_unstable();
        visible
    }
}

/// The broker's verdict on one batch of a Produce request.
#[derive(Debug)]
pub struct Verdict {
    /// What the broker answers for this partition.
    pub response: PartitionResponse,
    /// The records this batch appended (empty for an error or a duplicate).
    pub appended: Vec<LogRecord>,
    /// Something the producer sent that no correct producer sends (undecodable bytes, a
    /// re-used sequence carrying other records, ...): a failed invariant.
    pub violation: Option<String>,
}

/// The model cluster.
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    pub(super) partitions: BTreeMap<TopicPartition, PartitionModel>,
    up: BTreeMap<BrokerId, bool>,
    pub(super) next_producer_id: i64,
    identities_handed_out: u64,
    coordinator: Option<Coordinator>,
}

/// The partition logs and the producer id counter, lent to the coordinator (what it writes
/// through [`TxnLogs`]).
struct Logs<'a> {
    partitions: &'a mut BTreeMap<TopicPartition, PartitionModel>,
    next_producer_id: &'a mut i64,
}

impl TxnLogs for Logs<'_> {
    fn new_producer_id(&mut self) -> i64 {
        let producer_id = *self.next_producer_id;
        *self.next_producer_id += 1;
        producer_id
    }

    /// A marker of a newer epoch moves the partition's producer state to it with the
    /// sequence reset (as Kafka's `appendEndTxnMarker`).
    fn write_marker(
        &mut self,
        partition: &TopicPartition,
        identity: ProducerIdentity,
        commit: bool,
    ) {
        let Some(p) = self.partitions.get_mut(partition) else {
            return;
        };
        let offset = p.next_offset();
        p.markers.push(Marker {
            offset,
            producer_id: identity.producer_id,
            epoch: identity.epoch,
            commit,
        });
        if let Some(entry) = p.producers.get_mut(&identity.producer_id)
            && entry.epoch < identity.epoch
        {
            entry.epoch = identity.epoch;
            entry.last_sequence = -1;
            entry.cached.clear();
        }
    }
}

/// Whether `next` follows `last` in the sequence space, wrapping from `i32::MAX` to 0
/// (Kafka's `ProducerAppendInfo.inSequence`).
pub fn in_sequence(last: i32, next: i32) -> bool {
    increment_sequence(last, 1) == next
}

impl Cluster {
    /// A cluster with every broker up and partition `p` of each topic led by broker
    /// `brokers[p % brokers.len()]`.
    pub fn new(config: ClusterConfig) -> Self {
        let mut partitions = BTreeMap::new();
        for (topic, count) in &config.topics {
            for partition in 0..*count {
                let index = usize::try_from(partition).unwrap_or(0) % config.brokers.len().max(1);
                let leader = config.brokers.get(index).copied().unwrap_or(0);
                partitions.insert(
                    TopicPartition::new(topic.as_str(), partition),
                    PartitionModel {
                        leader,
                        log: Vec::new(),
                        log_start_offset: 0,
                        markers: Vec::new(),
                        producers: BTreeMap::new(),
                    },
                );
            }
        }
        let up = config.brokers.iter().map(|&b| (b, true)).collect();
        let first_broker = config.brokers.first().copied().unwrap_or(0);
        Self {
            coordinator: config
                .transactions
                .clone()
                .map(|c| Coordinator::new(c, first_broker, config.first_epoch)),
            next_producer_id: config.first_producer_id,
            config,
            partitions,
            up,
            identities_handed_out: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Every partition, in order.
    pub fn partitions(&self) -> &BTreeMap<TopicPartition, PartitionModel> {
        &self.partitions
    }

    /// Whether `broker` is running.
    pub fn is_up(&self, broker: BrokerId) -> bool {
        self.up.get(&broker).copied().unwrap_or(false)
    }

    /// Brokers that are running, in id order.
    pub fn live_brokers(&self) -> Vec<BrokerId> {
        self.up
            .iter()
            .filter(|(_, up)| **up)
            .map(|(b, _)| *b)
            .collect()
    }

    /// Starts or stops `broker`.
    pub fn set_up(&mut self, broker: BrokerId, up: bool) {
        if let Some(state) = self.up.get_mut(&broker) {
            *state = up;
        }
    }

    /// The current leader of every partition.
    pub fn leaders(&self) -> Vec<(TopicPartition, BrokerId)> {
        self.partitions
            .iter()
            .map(|(tp, p)| (tp.clone(), p.leader))
            .collect()
    }

    /// Moves `partition`'s leadership to `to`; its log and producer state go with it, as
    /// replicated state does.
    pub fn move_leader(&mut self, partition: &TopicPartition, to: BrokerId) {
        if let Some(p) = self.partitions.get_mut(partition) {
            p.leader = to;
        }
    }

    /// Answers InitProducerId for an idempotent producer: a new producer id, epoch 0 (the
    /// first answer uses [`ClusterConfig::first_epoch`]).
    pub fn init_producer_id(&mut self) -> ProducerIdentity {
        let epoch = if self.identities_handed_out == 0 {
            self.config.first_epoch
        } else {
            0
        };
        self.identities_handed_out += 1;
        let producer_id = self.next_producer_id;
        self.next_producer_id += 1;
        ProducerIdentity { producer_id, epoch }
    }

    /// Gives `partition` state for `identity` as if it had written up to `last_sequence`
    /// (a run that starts near the sequence wrap).
    pub fn seed_producer_state(
        &mut self,
        partition: &TopicPartition,
        identity: ProducerIdentity,
        last_sequence: i32,
        now: Millis,
    ) {
        if let Some(p) = self.partitions.get_mut(partition) {
            let last_offset = p.next_offset() - 1;
            p.producers.insert(
                identity.producer_id,
                ProducerEntry {
                    epoch: identity.epoch,
                    last_sequence,
                    last_offset,
                    last_append_ms: now,
                    cached: VecDeque::new(),
                },
            );
        }
    }

    /// Expires the state of producers idle for `producer.id.expiration.ms` (Kafka's
    /// `ProducerStateManager.removeExpiredProducers`). Returns how many entries went.
    pub fn expire_producers(&mut self, now: Millis) -> usize {
        let expiration = self.config.producer_expiration_ms;
        let mut removed = 0;
        for p in self.partitions.values_mut() {
            let before = p.producers.len();
            p.producers
                .retain(|_, e| e.last_append_ms.saturating_add(expiration) > now);
            removed += before - p.producers.len();
        }
        removed
    }

    /// Moves `partition`'s log start offset forward over records older than `retention.ms`,
    /// by up to `max_records` records (time retention or DeleteRecords). Legacy brokers also
    /// forget producers whose last batch is now below the log start. Returns the new log
    /// start offset.
    pub fn advance_log_start(
        &mut self,
        partition: &TopicPartition,
        max_records: usize,
        now: Millis,
    ) -> Option<i64> {
        let retention = self.config.retention_ms;
        let legacy = self.config.legacy_producer_state;
        let p = self.partitions.get_mut(partition)?;
        let start = usize::try_from(p.log_start_offset).unwrap_or(0);
        let old_enough = p
            .log
            .iter()
            .skip(start)
            .take(max_records)
            .take_while(|r| r.appended_ms.saturating_add(retention) <= now)
            .count();
        p.log_start_offset += i64::try_from(old_enough).unwrap_or(0);
        if legacy {
            let log_start = p.log_start_offset;
            p.producers.retain(|_, e| e.last_offset >= log_start);
        }
        Some(p.log_start_offset)
    }

    /// The model coordinators, for a transactional run.
    pub fn coordinator(&self) -> Option<&Coordinator> {
        self.coordinator.as_ref()
    }

    /// Runs `f` with `coordinator` in place of the cluster's own, then puts both back: the
    /// copy loop keeps one coordinator state per transactional id over shared logs.
    pub fn with_coordinator<T>(
        &mut self,
        coordinator: &mut Option<Coordinator>,
        f: impl FnOnce(&mut Cluster) -> T,
    ) -> T {
        std::mem::swap(&mut self.coordinator, coordinator);
        let out = f(self);
        std::mem::swap(&mut self.coordinator, coordinator);
        out
    }

    /// The coordinator and the logs it writes to, borrowed apart.
    fn coordinator_and_logs(&mut self) -> Option<(&mut Coordinator, Logs<'_>)> {
        let coordinator = self.coordinator.as_mut()?;
        let logs = Logs {
            partitions: &mut self.partitions,
            next_producer_id: &mut self.next_producer_id,
        };
        Some((coordinator, logs))
    }

    /// Moves the transaction coordinator (or the group coordinator) to `to`: requests to the
    /// old one get NOT_COORDINATOR.
    pub fn move_coordinator(&mut self, group: bool, to: BrokerId) {
        if let Some(c) = &mut self.coordinator {
            c.move_to(group, to);
        }
    }

    /// FindCoordinator, answered by any live broker.
    pub fn find_coordinator(&self, key: &CoordinatorKey) -> Option<BrokerId> {
        self.coordinator.as_ref().map(|c| c.find(key))
    }

    /// Another producer instance with the same transactional id initialises (a zombie's
    /// successor): the epoch is bumped, fencing the current one, and its open transaction is
    /// aborted. Returns the new identity.
    pub fn fence_transactional_id(&mut self, now: Millis) -> Option<ProducerIdentity> {
        let (coordinator, mut logs) = self.coordinator_and_logs()?;
        coordinator.fence(now, &mut logs)
    }

    /// A coordinator request that reached `broker`.
    pub fn coordinator_request(
        &mut self,
        broker: BrokerId,
        request: &TxnRequest,
        now: Millis,
    ) -> TxnResponse {
        match self.coordinator_and_logs() {
            Some((coordinator, mut logs)) => coordinator.request(broker, request, now, &mut logs),
            None => TxnResponse::AddOffsets(ErrorCode::NOT_COORDINATOR),
        }
    }

    /// Handles one partition's batch of a Produce request that reached `broker`.
    pub fn produce(
        &mut self,
        broker: BrokerId,
        partition: &TopicPartition,
        batch_bytes: &[u8],
        now: Millis,
    ) -> Verdict {
        let legacy = self.config.legacy_producer_state;
        let Some(p) = self.partitions.get_mut(partition) else {
            return reject(partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1);
        };
        if p.leader != broker {
            return reject(partition, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1);
        }
        let log_start = p.log_start_offset;
        let batch = match decode_one(batch_bytes) {
            Ok(batch) => batch,
            Err(violation) => {
                let mut verdict = reject(partition, ErrorCode::CORRUPT_MESSAGE, log_start);
                verdict.violation = Some(violation);
                return verdict;
            }
        };
        let record_ids = match record_ids(&batch) {
            Ok(ids) => ids,
            Err(violation) => {
                let mut verdict = reject(partition, ErrorCode::CORRUPT_MESSAGE, log_start);
                verdict.violation = Some(violation);
                return verdict;
            }
        };
        let pid = batch.producer_id;
        let epoch = batch.producer_epoch;
        let first = batch.base_sequence;
        let last = batch.last_sequence();
        if pid < 0 || epoch < 0 || first < 0 {
            let mut verdict = reject(partition, ErrorCode::INVALID_RECORD, log_start);
            verdict.violation = Some(format!(
                "{partition:?}: a batch without producer id, epoch or sequence ({pid}, {epoch}, {first}) from an idempotent producer"
            ));
            return verdict;
        }
        let transactional = batch.attributes & TRANSACTIONAL_ATTRIBUTE != 0;
        if transactional {
            let verdict = self
                .coordinator
                .as_mut()
                .map_or(ErrorCode::INVALID_TXN_STATE, |c| {
                    c.verify_produce(partition, pid, epoch, now)
                });
            if !verdict.is_ok() {
                return reject(partition, verdict, log_start);
            }
        }
        let Some(p) = self.partitions.get_mut(partition) else {
            return reject(partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1);
        };
        match p.producers.get(&pid) {
            Some(entry) if epoch < entry.epoch => {
                // Kafka 2.7+ answers a stale epoch with INVALID_PRODUCER_EPOCH (not the fatal
                // PRODUCER_FENCED) on produce.
                return reject(partition, ErrorCode::INVALID_PRODUCER_EPOCH, log_start);
            }
            Some(entry) if epoch == entry.epoch => {
                if let Some(cached) = entry
                    .cached
                    .iter()
                    .find(|c| c.first_sequence == first && c.last_sequence == last)
                {
                    // A duplicate: not appended, answered NONE with the original offsets.
                    let violation = (cached.record_ids != record_ids).then(|| {
                        format!(
                            "{partition:?}: producer {pid} epoch {epoch} re-used sequences {first}..={last} for other records ({:?} were appended, {:?} re-sent): the broker takes them for a duplicate and they are lost (P2)",
                            cached.record_ids, record_ids
                        )
                    });
                    return Verdict {
                        response: response(
                            partition,
                            ErrorCode::NONE,
                            cached.base_offset,
                            log_start,
                        ),
                        appended: Vec::new(),
                        violation,
                    };
                }
                if !in_sequence(entry.last_sequence, first) {
                    return reject(
                        partition,
                        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                        log_start,
                    );
                }
            }
            Some(_) => {
                // A newer epoch must start at sequence 0.
                if first != 0 {
                    return reject(
                        partition,
                        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                        log_start,
                    );
                }
            }
            None => {
                if legacy && first != 0 {
                    return reject(partition, ErrorCode::UNKNOWN_PRODUCER_ID, log_start);
                }
            }
        }
        let base_offset = p.next_offset();
        let appended: Vec<LogRecord> = batch
            .records
            .iter()
            .zip(&record_ids)
            .map(|(record, &record_id)| LogRecord {
                offset: base_offset + i64::from(record.offset_delta),
                record_id,
                producer_id: pid,
                epoch,
                sequence: batch.record_sequence(record),
                appended_ms: now,
                transactional,
            })
            .collect();
        p.log.extend(appended.iter().cloned());
        let entry = p.producers.entry(pid).or_insert_with(|| ProducerEntry {
            epoch,
            last_sequence: last,
            last_offset: -1,
            last_append_ms: now,
            cached: VecDeque::new(),
        });
        if entry.epoch != epoch {
            entry.cached.clear();
        }
        entry.epoch = epoch;
        entry.last_sequence = last;
        entry.last_offset = batch_last_offset(&appended, base_offset);
        entry.last_append_ms = now;
        entry.cached.push_back(CachedBatch {
            first_sequence: first,
            last_sequence: last,
            base_offset,
            record_ids,
        });
        while entry.cached.len() > CACHED_BATCHES {
            entry.cached.pop_front();
        }
        Verdict {
            response: response(partition, ErrorCode::NONE, base_offset, log_start),
            appended,
            violation: None,
        }
    }
}

fn batch_last_offset(appended: &[LogRecord], base_offset: i64) -> i64 {
    appended.last().map_or(base_offset - 1, |r| r.offset)
}

fn response(
    partition: &TopicPartition,
    error: ErrorCode,
    base_offset: i64,
    log_start_offset: i64,
) -> PartitionResponse {
    PartitionResponse {
        partition: partition.clone(),
        error,
        base_offset,
        log_append_time: -1,
        log_start_offset,
        message: None,
    }
}

/// A verdict that appends nothing.
pub fn reject(partition: &TopicPartition, error: ErrorCode, log_start_offset: i64) -> Verdict {
    Verdict {
        response: response(partition, error, -1, log_start_offset),
        appended: Vec::new(),
        violation: None,
    }
}

/// Produce v3+ carries exactly one magic-2 batch per partition.
fn decode_one(bytes: &[u8]) -> Result<DecodedBatch, String> {
    let mut batches = decode_batches(bytes).map_err(|e| format!("undecodable batch: {e}"))?;
    match (batches.pop(), batches.is_empty()) {
        (Some(batch), true) => Ok(batch),
        (None, _) => Err("a partition entry without a whole batch".into()),
        (Some(_), false) => Err("more than one batch for one partition".into()),
    }
}

/// The ids of the batch's records: the first 8 bytes of each value, big-endian.
fn record_ids(batch: &DecodedBatch) -> Result<Vec<u64>, String> {
    batch
        .records
        .iter()
        .map(|record| {
            record
                .value
                .as_deref()
                .and_then(|v| v.get(..8))
                .and_then(|v| <[u8; 8]>::try_from(v).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| "a record whose value carries no record id".to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::BatchBuilder;

    fn cluster(legacy: bool) -> Cluster {
        Cluster::new(ClusterConfig {
            brokers: vec![1, 2],
            topics: vec![("t".into(), 2)],
            legacy_producer_state: legacy,
            producer_expiration_ms: 1000,
            retention_ms: 1000,
            first_producer_id: 7,
            first_epoch: 0,
            transactions: None,
        })
    }

    fn batch(ids: &[u64], pid: i64, epoch: i16, sequence: i32) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, 256);
        for id in ids {
            builder.append(0, None, Some(&id.to_be_bytes()), &[]);
        }
        let mut sealed = builder.seal(false);
        sealed.stamp(pid, epoch, sequence);
        sealed.to_bytes().to_vec()
    }

    fn code(c: &mut Cluster, bytes: &[u8]) -> (ErrorCode, i64) {
        let tp = TopicPartition::new("t", 0);
        let v = c.produce(1, &tp, bytes, 0);
        assert!(v.violation.is_none(), "{:?}", v.violation);
        (v.response.error, v.response.base_offset)
    }

    #[test]
    fn producer_state_rules() {
        let mut c = cluster(false);
        assert_eq!(code(&mut c, &batch(&[1, 2], 7, 0, 0)), (ErrorCode::NONE, 0));
        // A re-send of the cached batch: NONE with the original offset, nothing appended.
        assert_eq!(code(&mut c, &batch(&[1, 2], 7, 0, 0)), (ErrorCode::NONE, 0));
        assert_eq!(c.partitions()[&TopicPartition::new("t", 0)].log.len(), 2);
        assert_eq!(
            code(&mut c, &batch(&[3], 7, 0, 3)).0,
            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
        );
        assert_eq!(code(&mut c, &batch(&[3], 7, 0, 2)), (ErrorCode::NONE, 2));
        assert_eq!(
            code(&mut c, &batch(&[4], 7, 1, 3)).0,
            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            "a new epoch starts at 0"
        );
        assert_eq!(code(&mut c, &batch(&[4], 7, 1, 0)), (ErrorCode::NONE, 3));
        assert_eq!(
            code(&mut c, &batch(&[5], 7, 0, 3)).0,
            ErrorCode::INVALID_PRODUCER_EPOCH
        );
        // Unknown producer: a modern broker accepts any sequence.
        assert_eq!(code(&mut c, &batch(&[6], 8, 0, 42)), (ErrorCode::NONE, 4));
        let other = c.produce(2, &TopicPartition::new("t", 0), &batch(&[9], 7, 1, 1), 0);
        assert_eq!(other.response.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    }

    #[test]
    fn sequences_wrap_and_legacy_brokers_reject_unknown_producers() {
        let mut c = cluster(true);
        assert_eq!(
            code(&mut c, &batch(&[1], 7, 0, 5)).0,
            ErrorCode::UNKNOWN_PRODUCER_ID
        );
        let tp = TopicPartition::new("t", 0);
        let identity = ProducerIdentity {
            producer_id: 7,
            epoch: 0,
        };
        c.seed_producer_state(&tp, identity, i32::MAX - 1, 0);
        assert_eq!(
            code(&mut c, &batch(&[1, 2], 7, 0, i32::MAX)).0,
            ErrorCode::NONE
        );
        assert_eq!(code(&mut c, &batch(&[3], 7, 0, 1)).0, ErrorCode::NONE);
        assert!(in_sequence(i32::MAX, 0));
    }

    #[test]
    fn a_reused_sequence_with_other_records_is_a_violation() {
        let mut c = cluster(false);
        let tp = TopicPartition::new("t", 0);
        assert!(
            c.produce(1, &tp, &batch(&[1], 7, 0, 0), 0)
                .violation
                .is_none()
        );
        assert!(
            c.produce(1, &tp, &batch(&[2], 7, 0, 0), 0)
                .violation
                .is_some()
        );
    }

    fn transactional_cluster(v2: bool) -> Cluster {
        Cluster::new(ClusterConfig {
            brokers: vec![1],
            topics: vec![("t".into(), 1)],
            legacy_producer_state: false,
            producer_expiration_ms: 1000,
            retention_ms: 1000,
            first_producer_id: 7,
            first_epoch: 0,
            transactions: Some(CoordinatorConfig {
                transactions_v2: v2,
                ending_window_ms: 10,
                generation_id: 2,
                member_id: "m".into(),
            }),
        })
    }

    fn produce_transactional(
        c: &mut Cluster,
        id: u64,
        identity: ProducerIdentity,
        now: Millis,
    ) -> ErrorCode {
        let mut builder = BatchBuilder::new(0, 256);
        builder.append(0, None, Some(&id.to_be_bytes()), &[]);
        let mut sealed = builder.seal(true);
        sealed.stamp(identity.producer_id, identity.epoch, 0);
        let tp = TopicPartition::new("t", 0);
        c.produce(1, &tp, &sealed.to_bytes(), now).response.error
    }

    /// A fresh transactional producer id from the coordinator (no earlier identity).
    fn init_transactional(c: &mut Cluster) -> ProducerIdentity {
        let init = TxnRequest::InitProducerId { current: None };
        let TxnResponse::InitProducerId { identity, .. } = c.coordinator_request(1, &init, 0)
        else {
            panic!("InitProducerId answer expected");
        };
        identity
    }

    fn end(c: &mut Cluster, identity: ProducerIdentity, commit: bool, now: Millis) -> TxnResponse {
        c.coordinator_request(1, &TxnRequest::EndTxn { identity, commit }, now)
    }

    #[test]
    fn v2_end_txn_bumps_and_recognises_its_retry() {
        let mut c = transactional_cluster(true);
        let identity = init_transactional(&mut c);
        assert_eq!(
            produce_transactional(&mut c, 1, identity, 0),
            ErrorCode::NONE
        );
        let TxnResponse::EndTxn {
            error,
            identity: Some(next),
        } = end(&mut c, identity, true, 0)
        else {
            panic!("EndTxn v5 answers the new identity");
        };
        assert_eq!((error, next.epoch), (ErrorCode::NONE, identity.epoch + 1));
        assert!(matches!(
            end(&mut c, identity, true, 5),
            TxnResponse::EndTxn {
                error: ErrorCode::CONCURRENT_TRANSACTIONS,
                ..
            }
        ));
        assert!(matches!(
            end(&mut c, identity, true, 20),
            TxnResponse::EndTxn { error: ErrorCode::NONE, identity: Some(i) } if i == next
        ));
        assert!(matches!(
            end(&mut c, identity, false, 20),
            TxnResponse::EndTxn {
                error: ErrorCode::INVALID_TXN_STATE,
                ..
            }
        ));
        // The next transaction (its first batch at sequence 0 of the new epoch) is aborted:
        // only the first record is visible.
        assert_eq!(produce_transactional(&mut c, 2, next, 25), ErrorCode::NONE);
        assert!(matches!(
            end(&mut c, next, false, 30),
            TxnResponse::EndTxn {
                error: ErrorCode::NONE,
                ..
            }
        ));
        let tp = TopicPartition::new("t", 0);
        assert_eq!(c.partitions()[&tp].read_committed(), vec![1]);
        // Commit and abort markers took offsets 1 and 3 (O1).
        let offsets: Vec<i64> = c.partitions()[&tp]
            .markers
            .iter()
            .map(|m| m.offset)
            .collect();
        assert_eq!(offsets, vec![1, 3]);
    }

    #[test]
    fn v1_verifies_partitions_and_fences_a_zombie() {
        let mut c = transactional_cluster(false);
        let identity = init_transactional(&mut c);
        assert_eq!(
            produce_transactional(&mut c, 1, identity, 0),
            ErrorCode::TRANSACTION_ABORTABLE,
            "not added to the transaction"
        );
        let tp = TopicPartition::new("t", 0);
        let add = TxnRequest::AddPartitions {
            identity,
            partitions: vec![tp.clone()],
        };
        c.coordinator_request(1, &add, 0);
        assert_eq!(
            produce_transactional(&mut c, 1, identity, 0),
            ErrorCode::NONE
        );
        assert!(c.fence_transactional_id(1).is_some());
        assert!(matches!(
            end(&mut c, identity, true, 50),
            TxnResponse::EndTxn {
                error: ErrorCode::PRODUCER_FENCED,
                ..
            }
        ));
        assert!(c.partitions()[&tp].read_committed().is_empty());
    }
}
