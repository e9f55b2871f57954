//! The sans-I/O producer core: the accumulator, per-partition sequence state, retries, epoch
//! bumps. Deterministic: no sockets, no tokio, no clock, no global RNG. It consumes
//! [`Event`]s and produces [`Action`]s; the producer's tokio driver (`crate::producer`) and the
//! simulation in `sim` both drive this same code, so every retry path the driver can hit is
//! reachable in a millisecond test with a chosen fault schedule (ARCHITECTURE.md, layers).

pub mod accumulator;
mod backoff;
pub mod completion;
pub mod metrics;
mod partition;
mod producer;
pub mod spans;
pub mod transaction;
pub(crate) mod wire;

pub use producer::{Counters, Engine, EngineConfig};
pub use transaction::{CallId, TransactionConfig};

use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::SealedBatch;
use crate::types::TopicPartition;
pub use crate::types::{BrokerId, Millis};

/// Identifies one request the engine asked the driver to send.
pub type RequestId = u64;

/// Hands out request ids, from 1 up: one sequence for the engine's own requests and its
/// transaction manager's, so an answer names exactly one of them.
#[derive(Debug)]
pub(crate) struct RequestIds {
    next: RequestId,
}

impl Default for RequestIds {
    fn default() -> Self {
        Self { next: 1 }
    }
}

impl RequestIds {
    /// The next unused id.
    pub fn allocate(&mut self) -> RequestId {
        let id = self.next;
        self.next += 1;
        id
    }
}

/// The producer id and epoch every batch is stamped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    /// The producer id the broker assigned.
    pub producer_id: i64,
    /// The epoch of that id.
    pub epoch: i16,
}

/// What the broker said about one partition of a Produce request.
#[derive(Debug, Clone)]
pub struct PartitionResponse {
    /// The partition.
    pub partition: TopicPartition,
    /// The error, or NONE.
    pub error: ErrorCode,
    /// The offset of the batch's first record (on NONE).
    pub base_offset: i64,
    /// LogAppendTime if the topic uses it, else -1.
    pub log_append_time: i64,
    /// The partition's log start offset (-1 if unknown).
    pub log_start_offset: i64,
    /// The broker's error message, if any.
    pub message: Option<String>,
}

/// Something that happened, for the engine to take into account.
#[derive(Debug)]
pub enum Event {
    /// Partition leaders from fresh metadata (`None`: no leader right now).
    Leaders(Vec<(TopicPartition, Option<BrokerId>)>),
    /// The answer to an [`Action::InitProducerId`].
    ProducerId {
        /// The request it answers.
        request: RequestId,
        /// The identity, or why there is none.
        result: Result<ProducerIdentity, Error>,
    },
    /// The answer to an [`Action::Produce`].
    ProduceResponse {
        /// The request it answers.
        request: RequestId,
        /// One entry per partition of the request.
        partitions: Vec<PartitionResponse>,
        /// How long the broker asks us not to send to it, for a quota (KIP-219); 0 if none.
        throttle_ms: Millis,
    },
    /// The answer to an [`Action::FindCoordinator`] or [`Action::Coordinator`].
    Txn {
        /// The request it answers.
        request: RequestId,
        /// The answer, or why there is none.
        result: Result<transaction::TxnResponse, Error>,
    },
    /// The driver met a failure no retry can fix (a broker rejected our credentials or we
    /// rejected its certificate): the producer fails fatally (T5).
    Fatal(Error),
    /// A request got no answer: the connection failed or was closed.
    RequestFailed {
        /// The request.
        request: RequestId,
        /// Whether any of it may have reached the broker. `false` only when the driver knows
        /// it never wrote the request (the connection failed before the write).
        written: bool,
        /// What went wrong.
        error: Error,
    },
}

/// Something the engine asks its driver to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// Send a Produce request to `broker` carrying one batch per partition, each stamped.
    Produce {
        /// Identifies the request in the answering event.
        request: RequestId,
        /// The partition leader to send to.
        broker: BrokerId,
        /// The stamped batches, all of one producer id and epoch (rule P2).
        batches: Vec<(TopicPartition, SealedBatch)>,
        /// The request's tracing span (`kafka.produce_request`; disabled unless a subscriber
        /// wants DEBUG spans of `exactly`), which each batch's span follows from. The driver
        /// enters it while it writes the request and reads the answer.
        span: tracing::Span,
    },
    /// Ask any broker for a producer id (idempotent: InitProducerId without transactional id).
    InitProducerId {
        /// Identifies the request in the answering event.
        request: RequestId,
    },
    /// Metadata is stale (a leader moved or is unknown): fetch it and send [`Event::Leaders`].
    RefreshMetadata,
    /// Find the coordinator of a transactional id or group; answer with
    /// [`transaction::TxnResponse::Coordinator`].
    FindCoordinator {
        /// Identifies the request in the answering event.
        request: RequestId,
        /// Whose coordinator.
        key: crate::types::CoordinatorKey,
    },
    /// Send a request to a coordinator; answer with the matching [`transaction::TxnResponse`].
    Coordinator {
        /// Identifies the request in the answering event.
        request: RequestId,
        /// The coordinator.
        broker: BrokerId,
        /// What to send.
        body: transaction::TxnRequest,
    },
    /// Close the connection to `broker`: a request on it timed out, and responses on a Kafka
    /// connection come in order, so nothing later on it can be trusted to arrive.
    Disconnect {
        /// The broker.
        broker: BrokerId,
    },
}

#[cfg(test)]
mod tests;
