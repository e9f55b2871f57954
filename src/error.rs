//! The crate's one error type.

use std::sync::Arc;

use thiserror::Error;

use crate::protocol::DecodeError;
use crate::protocol::error_code::ErrorCode;

/// Everything that can go wrong in `exactly`.
///
/// Classify with [`Error::is_retriable`], [`Error::is_fatal`], [`Error::is_abortable`] and
/// [`Error::is_indeterminate`]. A failed delivery that is *indeterminate* may still have been
/// written to the log (KAFKA-13574 showed a "failed" send can be committed); every other
/// delivery failure means the record is not in the log (DESIGN rule P6).
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum Error {
    /// A broker answered with an error code.
    #[error("broker error {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The code, under its Kafka name.
        code: ErrorCode,
        /// The broker's message, if it sent one.
        message: Option<String>,
    },
    /// The record was not acknowledged within `delivery.timeout.ms`.
    #[error(
        "delivery timed out after {elapsed_ms} ms{}",
        if *indeterminate { " (the record may have been written)" } else { " (the record was not written)" }
    )]
    DeliveryTimeout {
        /// How long the record waited.
        elapsed_ms: u64,
        /// Whether the record may have been written (its batch was sent and its answer lost).
        indeterminate: bool,
    },
    /// The record's batch went out and then failed in a way that leaves its outcome unknown
    /// (e.g. a retry was rejected after an earlier attempt's answer was lost): it may be in
    /// the log (P6).
    #[error("the record may or may not have been written: {cause}")]
    Indeterminate {
        /// What ended the attempts.
        #[source]
        cause: Arc<Error>,
    },
    /// A record larger than `max.request.size` (or than the buffer) was rejected at `send`.
    #[error("record of {size} bytes is larger than the limit of {max} bytes ({setting})")]
    RecordTooLarge {
        /// Encoded size of the record.
        size: usize,
        /// The limit it broke.
        max: usize,
        /// The setting that sets the limit.
        setting: &'static str,
    },
    /// A topic name Kafka would reject.
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic {
        /// The name.
        topic: String,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// The topic does not exist (or its metadata did not arrive) within the metadata deadline.
    #[error("topic {topic:?} not found within {waited_ms} ms (last error: {last_error})")]
    UnknownTopic {
        /// The topic.
        topic: String,
        /// How long the producer waited for its metadata.
        waited_ms: u64,
        /// What the broker last said about it.
        last_error: ErrorCode,
    },
    /// A configuration setting is unknown, malformed or contradicts another.
    #[error("invalid configuration {setting}: {reason}")]
    Config {
        /// The setting, by its Kafka property name.
        setting: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The producer was closed (or failed fatally) before the operation.
    #[error("the producer is closed")]
    Closed,
    /// A call made in a state that does not allow it (e.g. `send` outside a transaction on a
    /// transactional producer). Nothing was sent.
    #[error("invalid state: {0}")]
    InvalidState(String),
    /// The transaction cannot commit any more; `abort_transaction` is the way on, after which
    /// the producer goes on (DESIGN rule T4). The cause says what went wrong.
    #[error("the transaction must be aborted: {cause}")]
    Abortable {
        /// What made the transaction abortable.
        #[source]
        cause: Arc<Error>,
    },
    /// `Producer::purge` failed the record before it was sent: it was not written.
    #[error("the record was purged before it was sent; it was not written")]
    Purged,
    /// The record was part of a transaction that was aborted before it was written.
    #[error("the transaction was aborted; the record was not written")]
    TransactionAborted,
    /// The producer hit an error it cannot recover from; it is unusable. The cause is kept.
    #[error("fatal: {0}")]
    Fatal(#[source] Arc<Error>),
    /// A broker sent bytes that do not decode.
    #[error("malformed response: {0}")]
    Decode(#[from] DecodeError),
    /// A network error talking to a broker. [`Error::io_kind`] gives its `io::ErrorKind`; the
    /// `io::Error` itself is the [`std::error::Error::source`].
    #[error("I/O error with {broker}: {source}")]
    Io {
        /// The broker's address.
        broker: String,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// SASL authentication failed: wrong credentials, a mechanism the listener does not enable,
    /// a rejected token, or a SCRAM server that could not prove it knows the password.
    /// Fatal: the same credentials cannot succeed on retry (DESIGN "Connections and security").
    #[error("SASL {mechanism} authentication with {broker} failed: {reason}")]
    Authentication {
        /// The broker's address.
        broker: String,
        /// The SASL mechanism.
        mechanism: String,
        /// What went wrong (never a credential).
        reason: String,
    },
    /// TLS failed for a reason a retry cannot fix: the broker's certificate is not trusted,
    /// expired, or does not name the host; or the broker refused our certificate. Fatal. (A
    /// handshake cut by the network is an [`Error::Io`], retriable.)
    #[error("TLS with {broker} failed: {reason}")]
    Tls {
        /// The broker's address.
        broker: String,
        /// What went wrong.
        reason: String,
    },
    /// No broker could be reached, or none answered, within the deadline.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The consumer lost partitions whose records a copy transaction holds (its membership was
    /// fenced or expired, or it left the group after `max.poll.interval.ms`) before the
    /// transaction committed. Their offsets were not committed and the transaction was aborted:
    /// another member owns the partitions now.
    #[error("the consumer lost {} partition(s) the transaction read from (first: {}-{}); the transaction was aborted", partitions.len(), partitions.first().map_or("", |p| &*p.topic), partitions.first().map_or(-1, |p| p.partition))]
    PartitionsLost {
        /// The partitions.
        partitions: Vec<crate::engine::TopicPartition>,
    },
}

impl Error {
    /// A network error with `broker` (its address).
    pub fn io(broker: impl Into<String>, error: std::io::Error) -> Self {
        Error::Io {
            broker: broker.into(),
            source: Arc::new(error),
        }
    }

    /// The `io::ErrorKind` of a network error, looking through the errors that wrap one.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            Error::Fatal(cause) => cause.io_kind(),
            Error::Indeterminate { cause } | Error::Abortable { cause } => cause.io_kind(),
            _ => None,
        }
    }

    /// A broker error without a message.
    pub fn broker(code: ErrorCode) -> Self {
        Error::Broker {
            code,
            message: None,
        }
    }

    /// Whether the same operation may succeed if tried again.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Broker { code, .. } => code.is_retriable(),
            Error::Io { .. } | Error::Timeout(_) => true,
            _ => false,
        }
    }

    /// Whether the producer is unusable after this error (DESIGN rule T5).
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Fatal(_) | Error::Closed => true,
            Error::Authentication { .. } | Error::Tls { .. } => true,
            Error::Broker { code, .. } => matches!(
                *code,
                ErrorCode::PRODUCER_FENCED
                    | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                    | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
                    | ErrorCode::UNSUPPORTED_VERSION
                    | ErrorCode::TRANSACTION_COORDINATOR_FENCED
            ),
            _ => false,
        }
    }

    /// Whether the current transaction must be aborted, after which the producer can go on.
    pub fn is_abortable(&self) -> bool {
        match self {
            Error::Broker { code, .. } => *code == ErrorCode::TRANSACTION_ABORTABLE,
            Error::Abortable { .. } => true,
            _ => false,
        }
    }

    /// Whether a failed delivery may nonetheless have been written to the log.
    pub fn is_indeterminate(&self) -> bool {
        matches!(
            self,
            Error::DeliveryTimeout {
                indeterminate: true,
                ..
            } | Error::Indeterminate { .. }
        )
    }

    /// Whether this is an authentication or certificate failure of a connection, which ends the
    /// producer instead of being retried (DESIGN "Connections and security").
    pub(crate) fn is_security_failure(&self) -> bool {
        matches!(self, Error::Authentication { .. } | Error::Tls { .. })
    }

    /// The broker error code, if this error carries one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Broker { code, .. } => Some(*code),
            Error::Fatal(inner) => inner.code(),
            Error::Abortable { cause } => cause.code(),
            _ => None,
        }
    }
}

/// `Result` with [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_keep_their_kind_and_chain_their_causes() {
        let reset = Error::io(
            "127.0.0.1:9092",
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer"),
        );
        let wrapped = Error::Indeterminate {
            cause: Arc::new(Error::Fatal(Arc::new(reset))),
        };
        assert_eq!(wrapped.io_kind(), Some(std::io::ErrorKind::ConnectionReset));
        let mut chain = Vec::new();
        let mut next: Option<&dyn std::error::Error> = Some(&wrapped);
        while let Some(e) = next {
            chain.push(e.to_string());
            next = e.source();
        }
        assert_eq!(chain.len(), 4, "{chain:?}");
        assert_eq!(chain[3], "reset by peer");
    }
}
