//! Transaction vocabulary: the state machine's states and valid transitions (rule T1),
//! the calls a user makes, the consumer group metadata offsets are committed with (T3), and
//! the coordinator requests and answers the engine exchanges with its driver.

use super::ProducerIdentity;

use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::types::{BrokerId, TopicPartition};
use crate::types::{ConsumerGroupMetadata, OffsetToCommit};

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
}
