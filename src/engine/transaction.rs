//! Transaction vocabulary: the state machine's states and valid transitions (rule T1),
//! the calls a user makes, the consumer group metadata offsets are committed with (T3), and
//! the coordinator requests and answers the engine exchanges with its driver.

use std::collections::BTreeMap;

use super::{BrokerId, ProducerIdentity, TopicPartition};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;

/// Where a transactional producer stands (rule T1).
///
/// ```text
/// Uninitialized --init--> Ready --begin--> InTransaction --commit--> Committing --> Ready
///                           ^                   |    \--abort--> Aborting ---------> Ready
///                           |                   v                    ^
///                           |            AbortableError --abort------/
///  any state --fenced / unauthorized / unsupported--> FatalError (terminal)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxnState {
    /// `init_transactions` has not completed.
    Uninitialized,
    /// Initialised, no transaction open.
    Ready,
    /// `begin_transaction` was called; sends are part of the transaction.
    InTransaction,
    /// `commit_transaction` is flushing and ending the transaction.
    Committing,
    /// `abort_transaction` is failing unsent records and ending the transaction.
    Aborting,
    /// Something failed inside the transaction; only `abort_transaction` is allowed.
    AbortableError,
    /// The producer cannot go on (fenced, unauthorized, unsupported); nothing is allowed.
    FatalError,
}

/// A call on the transactional API that talks to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnCall {
    /// `init_transactions`: find the coordinator, get the producer id and epoch (fencing
    /// any earlier producer with the same transactional id).
    Init,
    /// `commit_transaction`.
    Commit,
    /// `abort_transaction`.
    Abort,
    /// `send_offsets_to_transaction`.
    SendOffsets {
        /// The offsets (the next offset to consume per partition).
        offsets: Vec<OffsetToCommit>,
        /// The consumer group the offsets belong to.
        group: ConsumerGroupMetadata,
    },
}

impl TxnCall {
    /// The states in which this call may start (T1); any other state is an invalid-state
    /// error and nothing is sent.
    pub fn allowed_in(&self, state: &TxnState) -> bool {
        match self {
            TxnCall::Init => *state == TxnState::Uninitialized,
            TxnCall::Commit | TxnCall::SendOffsets { .. } => *state == TxnState::InTransaction,
            TxnCall::Abort => matches!(state, TxnState::InTransaction | TxnState::AbortableError),
        }
    }

    /// The call's name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            TxnCall::Init => "init_transactions",
            TxnCall::Commit => "commit_transaction",
            TxnCall::Abort => "abort_transaction",
            TxnCall::SendOffsets { .. } => "send_offsets_to_transaction",
        }
    }
}

/// A consumer group member's identity, sent with transactional offset commits so the group
/// coordinator fences a member that no longer owns the partitions (KIP-447; the librdkafka
/// rewind incident in the project's seeds).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The generation the member joined in (-1 if unknown: then no fencing by generation).
    pub generation_id: i32,
    /// The member id the coordinator assigned ("" if unknown).
    pub member_id: String,
    /// The static membership id, if the consumer uses one (KIP-345).
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// A member's metadata as its consumer reports it (KIP-447): the group, the generation
    /// it joined in (under KIP-848 the member epoch), its member id and its static instance
    /// id if any.
    pub fn new(
        group_id: impl Into<String>,
        generation_id: i32,
        member_id: impl Into<String>,
        group_instance_id: Option<String>,
    ) -> Self {
        Self {
            group_id: group_id.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id,
        }
    }

    /// Metadata with only a group id: offsets commit without generation fencing (the
    /// pre-KIP-447 behaviour; prefer the full metadata from your consumer).
    pub fn group_only(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// One partition's offset to commit with a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffsetToCommit {
    /// The consumed partition.
    pub partition: TopicPartition,
    /// The next offset to consume (last processed + 1).
    pub offset: i64,
    /// Optional metadata stored with the offset.
    pub metadata: Option<String>,
}

impl OffsetToCommit {
    /// The next offset to consume of `partition` (last processed + 1), without metadata.
    pub fn new(partition: TopicPartition, offset: i64) -> Self {
        Self {
            partition,
            offset,
            metadata: None,
        }
    }

    /// The same, with metadata stored beside the offset.
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = Some(metadata.into());
        self
    }
}

/// The offsets a consume-transform-produce loop has processed and not yet committed, per
/// partition. A revoked partition's entry is dropped, so a rebalance never commits offsets
/// for partitions this member no longer owns (the librdkafka rewind incident).
#[derive(Debug, Clone, Default)]
pub struct PendingOffsets {
    next: BTreeMap<TopicPartition, i64>,
}

impl PendingOffsets {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the record at `offset` of `partition` was processed.
    pub fn processed(&mut self, partition: TopicPartition, offset: i64) {
        let next = self.next.entry(partition).or_insert(offset + 1);
        *next = (*next).max(offset + 1);
    }

    /// Drops the entries of partitions taken away by a rebalance.
    pub fn revoke<'a>(&mut self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        for p in partitions {
            self.next.remove(p);
        }
    }

    /// The offsets to send with the transaction, emptying the helper.
    pub fn take(&mut self) -> Vec<OffsetToCommit> {
        std::mem::take(&mut self.next)
            .into_iter()
            .map(|(partition, offset)| OffsetToCommit {
                partition,
                offset,
                metadata: None,
            })
            .collect()
    }

    /// Whether there is nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
}

/// Which coordinator a lookup is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorKey {
    /// The transaction coordinator of a transactional id.
    Transaction(String),
    /// The group coordinator of a consumer group.
    Group(String),
}

/// A request to a coordinator, for the driver to encode at the version the broker supports
/// (capped for transactions v1: EndTxn and TxnOffsetCommit ≤ 4).
#[derive(Debug, Clone)]
pub enum TxnRequest {
    /// InitProducerId with the transactional id; `current` is the id/epoch to bump (KIP-360).
    InitProducerId {
        /// The current identity, when re-initialising to bump the epoch.
        current: Option<ProducerIdentity>,
    },
    /// Add partitions to the transaction (transactions v1 only).
    AddPartitions {
        /// The identity.
        identity: ProducerIdentity,
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
    /// Add the group's offsets topic partition to the transaction (transactions v1 only).
    AddOffsets {
        /// The identity.
        identity: ProducerIdentity,
        /// The group.
        group_id: String,
    },
    /// Commit offsets as part of the transaction, to the group coordinator.
    TxnOffsetCommit {
        /// The identity.
        identity: ProducerIdentity,
        /// The group member committing.
        group: ConsumerGroupMetadata,
        /// The offsets.
        offsets: Vec<OffsetToCommit>,
    },
    /// End the transaction.
    EndTxn {
        /// The identity.
        identity: ProducerIdentity,
        /// Commit (true) or abort (false).
        commit: bool,
    },
}

/// A coordinator's answer, reduced to what the engine decides on.
#[derive(Debug, Clone)]
pub enum TxnResponse {
    /// The coordinator's node id.
    Coordinator(BrokerId),
    /// The producer id and epoch, and whether the coordinator speaks transactions v2
    /// (finalized `transaction.version >= 2` with Produce v12, EndTxn v5 and
    /// TxnOffsetCommit v5: KIP-890).
    InitProducerId {
        /// The error, or NONE.
        error: ErrorCode,
        /// The identity on success.
        identity: ProducerIdentity,
        /// Transactions v2.
        transactions_v2: bool,
    },
    /// Per-partition results of AddPartitionsToTxn (or the top-level error for all).
    AddPartitions(Vec<(TopicPartition, ErrorCode)>),
    /// AddOffsetsToTxn's error.
    AddOffsets(ErrorCode),
    /// Per-partition results of TxnOffsetCommit.
    TxnOffsetCommit(Vec<(TopicPartition, ErrorCode)>),
    /// EndTxn's error and, under transactions v2, the new identity (id/epoch bumped by the
    /// coordinator at every EndTxn; a new id when the epoch overflowed).
    EndTxn {
        /// The error, or NONE.
        error: ErrorCode,
        /// The new identity (v5), if the response carried one.
        identity: Option<ProducerIdentity>,
    },
}

/// Errors that end the producer (rule T5).
pub fn is_fatal_txn_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::PRODUCER_FENCED
            | ErrorCode::INVALID_PRODUCER_EPOCH
            | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
            | ErrorCode::UNSUPPORTED_VERSION
            | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
            | ErrorCode::INVALID_PRODUCER_ID_MAPPING
            | ErrorCode::TRANSACTION_COORDINATOR_FENCED
            | ErrorCode::INVALID_TRANSACTION_TIMEOUT
    )
}

/// Errors after which the coordinator must be looked up again.
pub fn needs_new_coordinator(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
    )
}

/// Errors a coordinator call is simply retried on (after a backoff).
pub fn is_retriable_txn_error(code: ErrorCode) -> bool {
    needs_new_coordinator(code)
        || matches!(
            code,
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | ErrorCode::CONCURRENT_TRANSACTIONS
                | ErrorCode::REQUEST_TIMED_OUT
                | ErrorCode::NETWORK_EXCEPTION
                | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                | ErrorCode::OPERATION_NOT_ATTEMPTED
                | ErrorCode::UNSTABLE_OFFSET_COMMIT
        )
}

/// The error a call gets when a broker error ends it.
pub(crate) fn call_error(code: ErrorCode, message: &str) -> Error {
    Error::Broker {
        code,
        message: Some(message.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_allowed_only_in_their_states() {
        assert!(TxnCall::Init.allowed_in(&TxnState::Uninitialized));
        assert!(!TxnCall::Init.allowed_in(&TxnState::Ready));
        assert!(!TxnCall::Commit.allowed_in(&TxnState::Ready));
        assert!(TxnCall::Commit.allowed_in(&TxnState::InTransaction));
        assert!(!TxnCall::Commit.allowed_in(&TxnState::AbortableError));
        assert!(TxnCall::Abort.allowed_in(&TxnState::AbortableError));
        assert!(!TxnCall::Abort.allowed_in(&TxnState::FatalError));
    }

    #[test]
    fn pending_offsets_drop_revoked_partitions() {
        let mut pending = PendingOffsets::new();
        let a = TopicPartition::new("in", 0);
        let b = TopicPartition::new("in", 1);
        pending.processed(a.clone(), 10);
        pending.processed(a.clone(), 12);
        pending.processed(b.clone(), 3);
        pending.revoke([&b]);
        let offsets = pending.take();
        assert_eq!(offsets.len(), 1);
        assert_eq!((offsets[0].partition.clone(), offsets[0].offset), (a, 13));
        assert!(pending.is_empty());
    }
}
