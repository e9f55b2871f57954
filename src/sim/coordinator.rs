//! The model transaction coordinator and group coordinator (KIP-98, KIP-447, KIP-890), for
//! one transactional id and one consumer group: FindCoordinator, InitProducerId with a
//! transactional id (fencing and KIP-360 bumps), AddPartitionsToTxn and AddOffsetsToTxn
//! (transactions v1), partition verification of transactional Produce (Kafka 3.6+; under
//! transactions v2 the Produce adds the partition itself), TxnOffsetCommit with generation and
//! member checks, and EndTxn writing a COMMIT or ABORT marker into every partition of the
//! transaction (KIP-890 for transactions v2, KIP-360 for epoch bumps).
//!
//! Markers are written when EndTxn is accepted; the transaction then stays "ending" for a short
//! window, during which the coordinator answers CONCURRENT_TRANSACTIONS, as Kafka does while
//! it is in PrepareCommit/PrepareAbort.
//!
//! The coordinator reaches the partition logs only through [`TxnLogs`] (a marker appended, a
//! producer id handed out), which the model cluster ([`super::cluster`]) implements: the
//! cluster depends on the coordinator, never the other way round.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::ProducerIdentity;
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::protocol::error_code::ErrorCode;
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

/// The identity of an error answer.
const NO_IDENTITY: ProducerIdentity = ProducerIdentity {
    producer_id: -1,
    epoch: -1,
};

/// What the coordinator needs of the partition logs behind it.
pub trait TxnLogs {
    /// A producer id never handed out before (InitProducerId, or a bump past the last epoch).
    fn new_producer_id(&mut self) -> i64;
    /// Appends a COMMIT (`commit`) or ABORT marker of `identity` to `partition` (a partition
    /// the cluster does not have is skipped).
    fn write_marker(
        &mut self,
        partition: &TopicPartition,
        identity: ProducerIdentity,
        commit: bool,
    );
}

/// How the model coordinators behave.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// The finalized `transaction.version` is 2 or more (KIP-890 part 2).
    pub transactions_v2: bool,
    /// How long a transaction stays "ending" after EndTxn (CONCURRENT_TRANSACTIONS meanwhile).
    pub ending_window_ms: Millis,
    /// The consumer group's current generation.
    pub generation_id: i32,
    /// The consumer group's one member.
    pub member_id: String,
}

/// Where the transaction of the transactional id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No transaction since the producer id was handed out.
    Empty,
    /// Partitions or offsets were added.
    Ongoing,
    /// EndTxn was accepted and its markers written; CONCURRENT_TRANSACTIONS until `until`.
    Ending { commit: bool, until: Millis },
    /// The last transaction ended this way.
    Complete { commit: bool },
}

/// The coordinator's state of the transactional id.
#[derive(Debug, Clone)]
struct TxnEntry {
    identity: ProducerIdentity,
    /// The identity before the last bump: a retried EndTxn (TV2) or InitProducerId (KIP-360)
    /// carrying it is recognised rather than fenced.
    previous: Option<ProducerIdentity>,
    phase: Phase,
    partitions: BTreeSet<TopicPartition>,
    /// Offsets committed in the open transaction (visible only once it commits).
    offsets: BTreeMap<TopicPartition, i64>,
}

/// The model transaction coordinator and group coordinator.
#[derive(Debug, Clone)]
pub struct Coordinator {
    config: CoordinatorConfig,
    /// The broker that is the transaction coordinator now.
    pub broker: BrokerId,
    /// The broker that is the group coordinator now.
    pub group_broker: BrokerId,
    first_epoch: i16,
    entry: Option<TxnEntry>,
    /// Offsets of committed transactions: what a consumer of the group would resume from.
    pub committed_offsets: BTreeMap<TopicPartition, i64>,
    /// Transactions ended by a commit marker / by an abort marker.
    pub commits: u64,
    /// Transactions ended by an abort marker (including fencing aborts).
    pub aborts: u64,
}

impl Coordinator {
    /// Coordinators on `broker`; the first producer id gets `first_epoch`.
    pub fn new(config: CoordinatorConfig, broker: BrokerId, first_epoch: i16) -> Self {
        Self {
            config,
            broker,
            group_broker: broker,
            first_epoch,
            entry: None,
            committed_offsets: BTreeMap::new(),
            commits: 0,
            aborts: 0,
        }
    }

    /// Whether this models transactions v2.
    pub fn transactions_v2(&self) -> bool {
        self.config.transactions_v2
    }

    /// The current producer identity of the transactional id.
    pub fn identity(&self) -> Option<ProducerIdentity> {
        self.entry.as_ref().map(|e| e.identity)
    }

    /// Partitions with offsets in the open transaction, not yet committed: a consumer asking
    /// for stable offsets (KIP-447 `require_stable`) of these gets UNSTABLE_OFFSET_COMMIT.
    pub fn pending_offsets(&self) -> Vec<TopicPartition> {
        self.entry
            .as_ref()
            .filter(|e| e.phase == Phase::Ongoing)
            .map(|e| e.offsets.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The group coordinator of a multi-member group (the copy loop's) validated the member
    /// of a TxnOffsetCommit: this coordinator's own one-member check then lets it through.
    pub fn admit_member(&mut self, generation_id: i32, member_id: &str) {
        self.config.generation_id = generation_id;
        self.config.member_id = member_id.to_string();
    }

    fn phase(&self, now: Millis) -> Option<Phase> {
        self.entry.as_ref().map(|e| match e.phase {
            Phase::Ending { commit, until } if now >= until => Phase::Complete { commit },
            phase => phase,
        })
    }

    /// Partition verification of a transactional Produce (Kafka 3.6+): the batch's producer
    /// must be the current one and the partition in its transaction; under transactions v2
    /// the Produce adds the partition (KIP-890).
    pub(super) fn verify_produce(
        &mut self,
        partition: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        now: Millis,
    ) -> ErrorCode {
        let v2 = self.config.transactions_v2;
        let phase = self.phase(now);
        let Some(entry) = &mut self.entry else {
            return ErrorCode::INVALID_PRODUCER_ID_MAPPING;
        };
        if entry.identity.producer_id != producer_id || epoch < entry.identity.epoch {
            return ErrorCode::INVALID_PRODUCER_EPOCH;
        }
        match phase {
            Some(Phase::Ongoing) if entry.partitions.contains(partition) => ErrorCode::NONE,
            // The broker retries CONCURRENT_TRANSACTIONS of its verification and then answers
            // a retriable error.
            Some(Phase::Ending { .. }) if v2 => ErrorCode::NOT_ENOUGH_REPLICAS,
            Some(_) if v2 => {
                start_transaction(entry, phase);
                entry.partitions.insert(partition.clone());
                ErrorCode::NONE
            }
            _ => ErrorCode::TRANSACTION_ABORTABLE,
        }
    }
}

/// Opens a new transaction when the last one is over.
fn start_transaction(entry: &mut TxnEntry, phase: Option<Phase>) {
    if phase != Some(Phase::Ongoing) {
        entry.phase = Phase::Ongoing;
        entry.partitions.clear();
        entry.offsets.clear();
    }
}

/// The identity after `identity`: epoch + 1, or a new producer id at epoch 0 when the epoch
/// is exhausted.
fn bumped(identity: ProducerIdentity, logs: &mut dyn TxnLogs) -> ProducerIdentity {
    if identity.epoch >= i16::MAX - 1 {
        ProducerIdentity {
            producer_id: logs.new_producer_id(),
            epoch: 0,
        }
    } else {
        ProducerIdentity {
            producer_id: identity.producer_id,
            epoch: identity.epoch + 1,
        }
    }
}
impl Coordinator {
    /// Moves the transaction coordinator (or the group coordinator) to `to`: requests to the
    /// old one get NOT_COORDINATOR.
    pub fn move_to(&mut self, group: bool, to: BrokerId) {
        if group {
            self.group_broker = to;
        } else {
            self.broker = to;
        }
    }

    /// FindCoordinator, answered by any live broker.
    pub fn find(&self, key: &CoordinatorKey) -> BrokerId {
        match key {
            CoordinatorKey::Transaction(_) => self.broker,
            CoordinatorKey::Group(_) => self.group_broker,
        }
    }

    /// Another producer instance with the same transactional id initialises (a zombie's
    /// successor): the epoch is bumped, fencing the current one, and its open transaction is
    /// aborted. Returns the new identity.
    pub fn fence(&mut self, now: Millis, logs: &mut dyn TxnLogs) -> Option<ProducerIdentity> {
        self.identity()?;
        let (code, identity) = self.init_transactional(None, now, true, logs);
        code.is_ok().then_some(identity)
    }

    /// A coordinator request that reached `broker`.
    pub fn request(
        &mut self,
        broker: BrokerId,
        request: &TxnRequest,
        now: Millis,
        logs: &mut dyn TxnLogs,
    ) -> TxnResponse {
        let group = matches!(request, TxnRequest::TxnOffsetCommit { .. });
        let here = if group {
            self.group_broker
        } else {
            self.broker
        };
        let transactions_v2 = self.config.transactions_v2;
        let not_here = (here != broker).then_some(ErrorCode::NOT_COORDINATOR);
        match request {
            TxnRequest::InitProducerId { current } => {
                let (error, identity) = match not_here {
                    Some(code) => (code, NO_IDENTITY),
                    None => self.init_transactional(*current, now, false, logs),
                };
                TxnResponse::InitProducerId {
                    error,
                    identity,
                    transactions_v2,
                }
            }
            TxnRequest::AddPartitions {
                identity,
                partitions,
            } => {
                let code =
                    not_here.unwrap_or_else(|| self.add_to_transaction(*identity, partitions, now));
                TxnResponse::AddPartitions(partitions.iter().map(|p| (p.clone(), code)).collect())
            }
            TxnRequest::AddOffsets { identity, .. } => TxnResponse::AddOffsets(
                not_here.unwrap_or_else(|| self.add_to_transaction(*identity, &[], now)),
            ),
            TxnRequest::TxnOffsetCommit {
                identity,
                group,
                offsets,
            } => {
                let code = not_here.unwrap_or_else(|| {
                    self.txn_offset_commit(
                        *identity,
                        group.generation_id,
                        &group.member_id,
                        offsets,
                        now,
                    )
                });
                TxnResponse::TxnOffsetCommit(
                    offsets
                        .iter()
                        .map(|o| (o.partition.clone(), code))
                        .collect(),
                )
            }
            TxnRequest::EndTxn { identity, commit } => match not_here {
                Some(error) => TxnResponse::EndTxn {
                    error,
                    identity: None,
                },
                None => self.end_txn(*identity, *commit, now, logs),
            },
        }
    }

    /// InitProducerId with the transactional id. `current` is the caller's identity for a
    /// KIP-360 bump; `fencer` marks another instance's init (the zombie scenario), which
    /// does not wait for an ending transaction.
    fn init_transactional(
        &mut self,
        current: Option<ProducerIdentity>,
        now: Millis,
        fencer: bool,
        logs: &mut dyn TxnLogs,
    ) -> (ErrorCode, ProducerIdentity) {
        let none = NO_IDENTITY;
        let phase = self.phase(now);
        if matches!(phase, Some(Phase::Ending { .. })) && !fencer {
            return (ErrorCode::CONCURRENT_TRANSACTIONS, none);
        }
        let Some(entry) = self.entry.clone() else {
            let identity = ProducerIdentity {
                producer_id: logs.new_producer_id(),
                epoch: self.first_epoch,
            };
            self.entry = Some(TxnEntry {
                identity,
                previous: None,
                phase: Phase::Empty,
                partitions: BTreeSet::new(),
                offsets: BTreeMap::new(),
            });
            return (ErrorCode::NONE, identity);
        };
        if let Some(current) = current {
            // KIP-360: only the current producer may bump; the retry of a bump whose answer was
            // lost carries the previous identity and gets the current one back.
            if entry.previous == Some(current) && phase != Some(Phase::Ongoing) {
                return (ErrorCode::NONE, entry.identity);
            }
            if current != entry.identity {
                return (ErrorCode::PRODUCER_FENCED, none);
            }
        }
        let identity = bumped(entry.identity, logs);
        if phase == Some(Phase::Ongoing) {
            // The open transaction of the old epoch is aborted, with markers of the new one.
            write_markers(logs, &entry.partitions, entry.identity, true, false);
            self.aborts += 1;
        }
        self.entry = Some(TxnEntry {
            identity,
            // Only the producer's own bump can be retried with the identity it replaced; after
            // a fencing init (another instance) the old identity is fenced for good.
            previous: current.map(|_| entry.identity),
            phase: match phase {
                Some(Phase::Ongoing) => Phase::Complete { commit: false },
                Some(Phase::Complete { commit }) => Phase::Complete { commit },
                _ => Phase::Empty,
            },
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
        });
        (ErrorCode::NONE, identity)
    }

    /// Checks the identity of a request inside a transaction: the current producer id and
    /// epoch, else fenced.
    fn check_identity(&self, identity: ProducerIdentity, now: Millis) -> Result<Phase, ErrorCode> {
        let entry = self
            .entry
            .as_ref()
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)?;
        if identity.producer_id != entry.identity.producer_id {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if identity.epoch < entry.identity.epoch {
            return Err(ErrorCode::PRODUCER_FENCED);
        }
        if identity.epoch > entry.identity.epoch {
            return Err(ErrorCode::INVALID_PRODUCER_EPOCH);
        }
        self.phase(now)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (transactions v1).
    fn add_to_transaction(
        &mut self,
        identity: ProducerIdentity,
        partitions: &[TopicPartition],
        now: Millis,
    ) -> ErrorCode {
        let phase = match self.check_identity(identity, now) {
            Ok(phase) => phase,
            Err(code) => return code,
        };
        if matches!(phase, Phase::Ending { .. }) {
            return ErrorCode::CONCURRENT_TRANSACTIONS;
        }
        if let Some(entry) = self.entry.as_mut() {
            start_transaction(entry, Some(phase));
            entry.partitions.extend(partitions.iter().cloned());
        }
        ErrorCode::NONE
    }

    /// TxnOffsetCommit to the group coordinator: the member and generation must be current
    /// (KIP-447); the producer must be the current one. Under transactions v2 it joins the
    /// transaction itself.
    fn txn_offset_commit(
        &mut self,
        identity: ProducerIdentity,
        generation_id: i32,
        member_id: &str,
        offsets: &[crate::types::OffsetToCommit],
        now: Millis,
    ) -> ErrorCode {
        if generation_id >= 0 && generation_id != self.config.generation_id {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        if !member_id.is_empty() && member_id != self.config.member_id {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        }
        let v2 = self.config.transactions_v2;
        let phase = match self.check_identity(identity, now) {
            Ok(phase) => phase,
            Err(ErrorCode::PRODUCER_FENCED) => return ErrorCode::INVALID_PRODUCER_EPOCH,
            Err(code) => return code,
        };
        let Some(entry) = self.entry.as_mut() else {
            return ErrorCode::INVALID_PRODUCER_ID_MAPPING;
        };
        match phase {
            Phase::Ending { .. } => return ErrorCode::CONCURRENT_TRANSACTIONS,
            Phase::Ongoing => {}
            _ if v2 => start_transaction(entry, Some(phase)),
            // Transactions v1: AddOffsetsToTxn must have opened the transaction.
            _ => return ErrorCode::INVALID_TXN_STATE,
        }
        for o in offsets {
            entry.offsets.insert(o.partition.clone(), o.offset);
        }
        ErrorCode::NONE
    }

    /// EndTxn: markers into every partition of the transaction, offsets made visible on
    /// commit; transactions v2 bumps the epoch and answers the new identity. A retry finding
    /// the transaction already ended the same way gets NONE, the other way INVALID_TXN_STATE.
    fn end_txn(
        &mut self,
        identity: ProducerIdentity,
        commit: bool,
        now: Millis,
        logs: &mut dyn TxnLogs,
    ) -> TxnResponse {
        let answer = |error: ErrorCode, identity: Option<ProducerIdentity>| TxnResponse::EndTxn {
            error,
            identity,
        };
        let v2 = self.config.transactions_v2;
        let window = self.config.ending_window_ms;
        let Some(entry) = self.entry.clone() else {
            return answer(ErrorCode::INVALID_PRODUCER_ID_MAPPING, None);
        };
        let phase = self.phase(now);
        let same_outcome = |phase: Option<Phase>| match phase {
            Some(Phase::Complete { commit: ended }) => Some(ended == commit),
            _ => None,
        };
        if v2 && entry.previous == Some(identity) && entry.identity != identity {
            // TV2: the retry of an EndTxn that bumped the epoch.
            if matches!(phase, Some(Phase::Ending { .. })) {
                return answer(ErrorCode::CONCURRENT_TRANSACTIONS, None);
            }
            return match same_outcome(phase) {
                Some(true) => answer(ErrorCode::NONE, Some(entry.identity)),
                _ => answer(ErrorCode::INVALID_TXN_STATE, None),
            };
        }
        let phase = match self.check_identity(identity, now) {
            Ok(phase) => phase,
            Err(code) => return answer(code, None),
        };
        match phase {
            Phase::Ending { .. } => answer(ErrorCode::CONCURRENT_TRANSACTIONS, None),
            Phase::Complete { .. } | Phase::Empty if !v2 || commit => {
                match same_outcome(Some(phase)) {
                    Some(true) if !v2 => answer(ErrorCode::NONE, None),
                    _ => answer(ErrorCode::INVALID_TXN_STATE, None),
                }
            }
            _ => {
                let new_identity = if v2 {
                    bumped(entry.identity, logs)
                } else {
                    entry.identity
                };
                let partitions = if phase == Phase::Ongoing {
                    entry.partitions.clone()
                } else {
                    BTreeSet::new()
                };
                write_markers(logs, &partitions, entry.identity, v2, commit);
                if commit {
                    self.commits += 1;
                    let offsets = entry.offsets.clone();
                    self.committed_offsets.extend(offsets);
                } else {
                    self.aborts += 1;
                }
                self.entry = Some(TxnEntry {
                    identity: new_identity,
                    previous: if v2 {
                        Some(entry.identity)
                    } else {
                        entry.previous
                    },
                    phase: Phase::Ending {
                        commit,
                        until: now + window,
                    },
                    partitions: BTreeSet::new(),
                    offsets: BTreeMap::new(),
                });
                answer(ErrorCode::NONE, v2.then_some(new_identity))
            }
        }
    }
}

/// Writes a marker of `identity`'s producer id into each partition, with the next epoch when
/// the transaction ends with a bump (TV2, fencing; on epoch exhaustion the marker still
/// carries the old producer id, at the last epoch).
fn write_markers(
    logs: &mut dyn TxnLogs,
    partitions: &BTreeSet<TopicPartition>,
    identity: ProducerIdentity,
    bump: bool,
    commit: bool,
) {
    let identity = ProducerIdentity {
        producer_id: identity.producer_id,
        epoch: if bump {
            identity.epoch.saturating_add(1)
        } else {
            identity.epoch
        },
    };
    for tp in partitions {
        logs.write_marker(tp, identity, commit);
    }
}
