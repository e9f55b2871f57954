//! The model transaction coordinator and group coordinator (KIP-98, KIP-447, KIP-890), for
//! one transactional id and one consumer group: FindCoordinator, InitProducerId with a
//! transactional id (fencing and KIP-360 bumps), AddPartitionsToTxn and AddOffsetsToTxn
//! (transactions v1), partition verification of transactional Produce (Kafka 3.6+; under
//! transactions v2 the Produce adds the partition itself), TxnOffsetCommit with generation and
//! member checks, and EndTxn writing a COMMIT or ABORT marker into every partition of the
//! transaction (see KAFKA-NOTES "Transactions v2" and "KIP-360").
//!
//! Markers are written when EndTxn is accepted; the transaction then stays "ending" for a short
//! window, during which the coordinator answers CONCURRENT_TRANSACTIONS, as Kafka does while
//! it is in PrepareCommit/PrepareAbort.

use std::collections::{BTreeMap, BTreeSet};

use super::cluster::{Cluster, Marker};
use crate::engine::ProducerIdentity;
use crate::engine::transaction::{CoordinatorKey, TxnRequest, TxnResponse};
use crate::protocol::error_code::ErrorCode;
use crate::types::{BrokerId, Millis, TopicPartition};

/// The identity of an error answer.
const NO_IDENTITY: ProducerIdentity = ProducerIdentity {
    producer_id: -1,
    epoch: -1,
};

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
fn bumped(identity: ProducerIdentity, next_producer_id: &mut i64) -> ProducerIdentity {
    if identity.epoch >= i16::MAX - 1 {
        let producer_id = *next_producer_id;
        *next_producer_id += 1;
        ProducerIdentity {
            producer_id,
            epoch: 0,
        }
    } else {
        ProducerIdentity {
            producer_id: identity.producer_id,
            epoch: identity.epoch + 1,
        }
    }
}

impl Cluster {
    /// The model coordinators, for a transactional run.
    pub fn coordinator(&self) -> Option<&Coordinator> {
        self.coordinator.as_ref()
    }

    /// Moves the transaction coordinator (or the group coordinator) to `to`: requests to the
    /// old one get NOT_COORDINATOR.
    pub fn move_coordinator(&mut self, group: bool, to: BrokerId) {
        if let Some(c) = &mut self.coordinator {
            if group {
                c.group_broker = to;
            } else {
                c.broker = to;
            }
        }
    }

    /// FindCoordinator, answered by any live broker.
    pub fn find_coordinator(&self, key: &CoordinatorKey) -> Option<BrokerId> {
        let c = self.coordinator.as_ref()?;
        Some(match key {
            CoordinatorKey::Transaction(_) => c.broker,
            CoordinatorKey::Group(_) => c.group_broker,
        })
    }

    /// Another producer instance with the same transactional id initialises (a zombie's
    /// successor): the epoch is bumped, fencing the current one, and its open transaction is
    /// aborted. Returns the new identity.
    pub fn fence_transactional_id(&mut self, now: Millis) -> Option<ProducerIdentity> {
        self.coordinator.as_ref()?.identity()?;
        let (code, identity) = self.init_transactional(None, now, true);
        code.is_ok().then_some(identity)
    }

    /// A coordinator request that reached `broker`.
    pub fn coordinator_request(
        &mut self,
        broker: BrokerId,
        request: &TxnRequest,
        now: Millis,
    ) -> TxnResponse {
        let Some(c) = &self.coordinator else {
            return TxnResponse::AddOffsets(ErrorCode::NOT_COORDINATOR);
        };
        let group = matches!(request, TxnRequest::TxnOffsetCommit { .. });
        let here = if group { c.group_broker } else { c.broker };
        let transactions_v2 = c.config.transactions_v2;
        let not_here = (here != broker).then_some(ErrorCode::NOT_COORDINATOR);
        match request {
            TxnRequest::InitProducerId { current } => {
                let (error, identity) = match not_here {
                    Some(code) => (code, NO_IDENTITY),
                    None => self.init_transactional(*current, now, false),
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
                None => self.end_txn(*identity, *commit, now),
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
    ) -> (ErrorCode, ProducerIdentity) {
        let none = NO_IDENTITY;
        let Some(c) = &self.coordinator else {
            return (ErrorCode::NOT_COORDINATOR, none);
        };
        let phase = c.phase(now);
        let first_epoch = c.first_epoch;
        if matches!(phase, Some(Phase::Ending { .. })) && !fencer {
            return (ErrorCode::CONCURRENT_TRANSACTIONS, none);
        }
        let Some(entry) = c.entry.clone() else {
            let identity = ProducerIdentity {
                producer_id: self.next_producer_id,
                epoch: first_epoch,
            };
            self.next_producer_id += 1;
            if let Some(c) = &mut self.coordinator {
                c.entry = Some(TxnEntry {
                    identity,
                    previous: None,
                    phase: Phase::Empty,
                    partitions: BTreeSet::new(),
                    offsets: BTreeMap::new(),
                });
            }
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
        let identity = bumped(entry.identity, &mut self.next_producer_id);
        if phase == Some(Phase::Ongoing) {
            // The open transaction of the old epoch is aborted, with markers of the new one.
            self.write_markers(&entry.partitions, entry.identity, true, false);
        }
        let Some(c) = &mut self.coordinator else {
            return (ErrorCode::NOT_COORDINATOR, none);
        };
        if phase == Some(Phase::Ongoing) {
            c.aborts += 1;
        }
        c.entry = Some(TxnEntry {
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
        let c = self
            .coordinator
            .as_ref()
            .ok_or(ErrorCode::NOT_COORDINATOR)?;
        let entry = c
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
        c.phase(now).ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)
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
        if let Some(entry) = self.coordinator.as_mut().and_then(|c| c.entry.as_mut()) {
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
        let Some(c) = &self.coordinator else {
            return ErrorCode::NOT_COORDINATOR;
        };
        if generation_id >= 0 && generation_id != c.config.generation_id {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        if !member_id.is_empty() && member_id != c.config.member_id {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        }
        let v2 = c.config.transactions_v2;
        let phase = match self.check_identity(identity, now) {
            Ok(phase) => phase,
            Err(ErrorCode::PRODUCER_FENCED) => return ErrorCode::INVALID_PRODUCER_EPOCH,
            Err(code) => return code,
        };
        let Some(entry) = self.coordinator.as_mut().and_then(|c| c.entry.as_mut()) else {
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
    fn end_txn(&mut self, identity: ProducerIdentity, commit: bool, now: Millis) -> TxnResponse {
        let answer = |error: ErrorCode, identity: Option<ProducerIdentity>| TxnResponse::EndTxn {
            error,
            identity,
        };
        let Some(c) = &self.coordinator else {
            return answer(ErrorCode::NOT_COORDINATOR, None);
        };
        let v2 = c.config.transactions_v2;
        let window = c.config.ending_window_ms;
        let Some(entry) = c.entry.clone() else {
            return answer(ErrorCode::INVALID_PRODUCER_ID_MAPPING, None);
        };
        let phase = c.phase(now);
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
                    bumped(entry.identity, &mut self.next_producer_id)
                } else {
                    entry.identity
                };
                let partitions = if phase == Phase::Ongoing {
                    entry.partitions.clone()
                } else {
                    BTreeSet::new()
                };
                self.write_markers(&partitions, entry.identity, v2, commit);
                let Some(c) = &mut self.coordinator else {
                    return answer(ErrorCode::NOT_COORDINATOR, None);
                };
                if commit {
                    c.commits += 1;
                    let offsets = entry.offsets.clone();
                    c.committed_offsets.extend(offsets);
                } else {
                    c.aborts += 1;
                }
                c.entry = Some(TxnEntry {
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

    /// Writes a marker of `identity`'s producer id into each partition, with the next epoch
    /// when the transaction ends with a bump (TV2, fencing; on epoch exhaustion the marker
    /// still carries the old producer id, at the last epoch). A marker of a newer epoch moves
    /// the partition's producer state to it with the sequence reset (as Kafka's
    /// `appendEndTxnMarker`).
    fn write_markers(
        &mut self,
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
            let Some(p) = self.partitions.get_mut(tp) else {
                continue;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::BatchBuilder;
    use crate::sim::cluster::ClusterConfig;

    fn cluster(v2: bool) -> Cluster {
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

    fn produce(c: &mut Cluster, id: u64, identity: ProducerIdentity, now: Millis) -> ErrorCode {
        let mut builder = BatchBuilder::new(0, 256);
        builder.append(0, None, Some(&id.to_be_bytes()), &[]);
        let mut sealed = builder.seal(true);
        sealed.stamp(identity.producer_id, identity.epoch, 0);
        let tp = TopicPartition::new("t", 0);
        c.produce(1, &tp, &sealed.to_bytes(), now).response.error
    }

    fn end(c: &mut Cluster, identity: ProducerIdentity, commit: bool, now: Millis) -> TxnResponse {
        c.coordinator_request(1, &TxnRequest::EndTxn { identity, commit }, now)
    }

    #[test]
    fn v2_end_txn_bumps_and_recognises_its_retry() {
        let mut c = cluster(true);
        let init = TxnRequest::InitProducerId { current: None };
        let TxnResponse::InitProducerId { identity, .. } = c.coordinator_request(1, &init, 0)
        else {
            panic!("InitProducerId answer expected");
        };
        assert_eq!(produce(&mut c, 1, identity, 0), ErrorCode::NONE);
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
        assert_eq!(produce(&mut c, 2, next, 25), ErrorCode::NONE);
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
        let mut c = cluster(false);
        let init = TxnRequest::InitProducerId { current: None };
        let TxnResponse::InitProducerId { identity, .. } = c.coordinator_request(1, &init, 0)
        else {
            panic!("InitProducerId answer expected");
        };
        assert_eq!(
            produce(&mut c, 1, identity, 0),
            ErrorCode::TRANSACTION_ABORTABLE,
            "not added to the transaction"
        );
        let tp = TopicPartition::new("t", 0);
        let add = TxnRequest::AddPartitions {
            identity,
            partitions: vec![tp.clone()],
        };
        c.coordinator_request(1, &add, 0);
        assert_eq!(produce(&mut c, 1, identity, 0), ErrorCode::NONE);
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
