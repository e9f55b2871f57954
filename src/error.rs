//! The crate's one error type.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::protocol::error_code::ErrorCode;
use crate::protocol::{DecodeError, EncodeError};

/// Everything that can go wrong in `exactly`.
///
/// Classify with [`Error::is_retriable`], [`Error::is_fatal`], [`Error::is_abortable`] and
/// [`Error::is_indeterminate`]. A failed delivery that is *indeterminate* may still have been
/// written to the log (KAFKA-13574 showed a "failed" send can be committed); every other
/// delivery failure means the record is not in the log.
///
/// # The categories of KIP-1050
///
/// KIP-1050 sorts the Java producer's transactional errors into five categories. They map
/// onto this type as follows, so a handler written for the Java client carries over:
///
/// | KIP-1050 category | Here | What to do |
/// |---|---|---|
/// | Retriable (`RetriableException`, `RefreshRetriableException`) | [`Error::is_retriable`]: broker codes Kafka marks retriable, [`Error::Io`], [`Error::Timeout`], [`Error::NoBrokerAnswered`] | The client already retried within its timeouts (`delivery.timeout.ms`, `max.block.ms`); call again. |
/// | Abortable (`TransactionAbortableException`) | [`Error::is_abortable`]: [`Error::Abortable`], `TRANSACTION_ABORTABLE` | `abort_transaction`, rewind the input, go on with the same producer. |
/// | Application-recoverable (`ApplicationRecoverableException`: fenced, invalid epoch) | [`Error::is_fatal`] with a fencing cause (`PRODUCER_FENCED`, `TRANSACTION_COORDINATOR_FENCED`) inside [`Error::Fatal`] | Drop this producer, create a new one, restore the application's state from what was committed. |
/// | Invalid configuration (`InvalidConfigurationException`: authentication, authorization, unsupported) | [`Error::is_fatal`] with [`Error::Authentication`], [`Error::Tls`], [`Error::SecurityProtocolMismatch`], an authorization or `UNSUPPORTED_VERSION` code; [`Error::Config`] at build time | Fix the configuration or the broker's ACLs; retrying cannot help. |
/// | Fatal (any other `KafkaException`) | [`Error::is_fatal`] with any other cause | Close and report. |
///
/// Indeterminate errors ([`Error::is_indeterminate`]) have no KIP-1050 counterpart: Java
/// reports such a record as a plain timeout. Here a record that may be in the log says so.
///
/// # Display and causes
///
/// An error that wraps another ([`Error::Indeterminate`], [`Error::Abortable`],
/// [`Error::Fatal`], [`Error::Decode`], [`Error::Io`]) displays only its own text; the cause
/// is its [`std::error::Error::source`]. Reports that walk the chain (`anyhow`'s `{:#}`,
/// `eyre`, `tracing`'s error fields) thus print each cause once.
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
    /// the log. The cause is the [`std::error::Error::source`].
    #[error("the record may or may not have been written")]
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
    /// Brokers answered the metadata requests, and none of them knew the topic within the
    /// metadata deadline (`max.block.ms`). When no broker answered at all the error is
    /// [`Error::NoBrokerAnswered`] instead.
    #[error("topic {topic:?} not found within {waited_ms} ms (the brokers answered: {last_error})")]
    UnknownTopic {
        /// The topic.
        topic: String,
        /// How long the producer waited for its metadata.
        waited_ms: u64,
        /// What the brokers last said about it.
        last_error: ErrorCode,
    },
    /// No broker answered a metadata request within the deadline: nothing listens at the
    /// bootstrap addresses, the network drops the connections, or every attempt failed before
    /// a request could be answered. Each address's last failure says which.
    #[error(
        "no broker answered within {waited_ms} ms: {}",
        BrokerFailure::list(attempts)
    )]
    NoBrokerAnswered {
        /// How long the client waited.
        waited_ms: u64,
        /// The last failure of each address asked, in the order they were first asked.
        attempts: Vec<BrokerFailure>,
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
    /// the producer goes on. The cause (the [`std::error::Error::source`]) says what went
    /// wrong.
    #[error("the transaction cannot commit and must be aborted")]
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
    /// The producer hit an error it cannot recover from; it is unusable. The cause is the
    /// [`std::error::Error::source`].
    #[error("the producer failed fatally and cannot be used any more")]
    Fatal(#[source] Arc<Error>),
    /// A broker sent bytes that do not decode; the decoder's error is the
    /// [`std::error::Error::source`].
    #[error("malformed response from a broker")]
    Decode(#[from] DecodeError),
    /// A request could not be written at the version the broker negotiated (a field set that
    /// the version cannot carry); the encoder's error is the [`std::error::Error::source`].
    #[error("request cannot be written for this broker")]
    Encode(#[from] EncodeError),
    /// A network error talking to a broker. [`Error::io_kind`] gives its `io::ErrorKind`; the
    /// `io::Error` itself is the [`std::error::Error::source`].
    #[error("I/O error with {broker}")]
    Io {
        /// The broker's address.
        broker: String,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// SASL authentication failed: wrong credentials, a mechanism the listener does not enable,
    /// a rejected token, or a SCRAM server that could not prove it knows the password.
    /// Fatal: the same credentials cannot succeed on retry.
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
    /// `security.protocol` does not match the listener: a plaintext client got a TLS record
    /// where a Kafka response belongs, or a TLS client's ClientHello got no TLS answer from a
    /// listener that answers Kafka requests in plaintext. A configuration error found at the
    /// first connection: fatal, never retried.
    #[error("security.protocol={configured} does not match the listener at {broker}: {reason}")]
    SecurityProtocolMismatch {
        /// The listener's address.
        broker: String,
        /// The `security.protocol` the client uses.
        configured: &'static str,
        /// What the listener answered, and the setting that would match it.
        reason: String,
    },
    /// An operation did not complete within its deadline; the text says which, and what was
    /// last seen.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The consumer lost partitions whose records a copy transaction holds (its membership was
    /// fenced or expired, or it left the group after `max.poll.interval.ms`) before the
    /// transaction committed. Their offsets were not committed and the transaction was aborted:
    /// another member owns the partitions now.
    #[error("the consumer lost {} partition(s) the transaction read from (first: {}-{}); the transaction was aborted", partitions.len(), partitions.first().map_or("", |p| &*p.topic), partitions.first().map_or(-1, |p| p.partition))]
    PartitionsLost {
        /// The partitions.
        partitions: Vec<crate::types::TopicPartition>,
    },
    /// A broker refused a consumer's request for a topic (or one of its partitions) with an
    /// error no retry can fix: TOPIC_AUTHORIZATION_FAILED (the principal lacks READ, or
    /// DESCRIBE, on the topic: the Java consumer's `TopicAuthorizationException`),
    /// UNKNOWN_SERVER_ERROR and the like. Returned by `poll`; the consumer keeps the partition
    /// and asks again after `retry.backoff.ms`, so granting the access lets it go on, and
    /// until then a later `poll` may return the error again.
    #[error("{api} of {}{} refused: {code}", topic, partition.map(|p| format!("-{p}")).unwrap_or_default())]
    TopicRefused {
        /// The topic.
        topic: String,
        /// The partition, when the refusal was for one partition (`None`: the whole topic,
        /// e.g. in a Metadata answer).
        partition: Option<i32>,
        /// The request refused (`Metadata`, `OffsetFetch`, `ListOffsets`, `Fetch`,
        /// `OffsetForLeaderEpoch`).
        api: &'static str,
        /// Why, under its Kafka name.
        code: ErrorCode,
    },
    /// The group coordinator refused a consumer's request for its group with an error no retry
    /// can fix: GROUP_AUTHORIZATION_FAILED (the principal lacks READ on the group: the Java
    /// consumer's `GroupAuthorizationException`) and the like. Returned by `poll`.
    #[error("{api} for group {group:?} refused: {code}")]
    GroupRefused {
        /// The `group.id`.
        group: String,
        /// The request refused (`OffsetFetch`, `JoinGroup`, `ConsumerGroupHeartbeat`, ...).
        api: &'static str,
        /// Why, under its Kafka name.
        code: ErrorCode,
    },
    /// A fetch position is out of the partition's log and `auto.offset.reset=none` says not to
    /// move it (the Java consumer's `OffsetOutOfRangeException`): nothing more is read from the
    /// partition until the application seeks.
    #[error(
        "offset {offset} of {}-{} is out of range{} and auto.offset.reset=none: seek to go on",
        partition.topic,
        partition.partition,
        log_range(*log_start_offset, *high_watermark)
    )]
    OffsetOutOfRange {
        /// The partition.
        partition: crate::types::TopicPartition,
        /// The offset fetched from.
        offset: i64,
        /// The log's start, when the broker said.
        log_start_offset: Option<i64>,
        /// The log's high watermark, when the broker said.
        high_watermark: Option<i64>,
    },
    /// The partition's log was truncated under the consumer's position: its records from
    /// `divergent_offset` on are not the ones this consumer read (an unclean leader election
    /// gave the partition to a replica that lacked them; KIP-320, the Java consumer's
    /// `LogTruncationException`). Found by validating the position with the new leader after
    /// a leader change, or a committed offset with its leader epoch before reading from it.
    /// Returned by `poll` whatever `auto.offset.reset` says, so nobody goes on silently from
    /// records that no longer exist: under `earliest` or `latest` (`reset`) the position has
    /// already moved to where the logs diverge, as the Java consumer moves it (or, when the
    /// leader knows no epoch that old, was reset), and the next `poll` reads on from there;
    /// under `none` nothing more is read from the partition until the application seeks.
    #[error(
        "the log of {}-{} was truncated under the position {offset}: {}{}",
        partition.topic,
        partition.partition,
        divergent_offset.map_or_else(|| "the leader has no records of its epoch".to_owned(), |d| format!("its records from offset {d} on are not the ones read")),
        if *reset { "; reading on from there (auto.offset.reset)" } else { " (auto.offset.reset=none: seek to go on)" }
    )]
    LogTruncation {
        /// The partition.
        partition: crate::types::TopicPartition,
        /// The position validated: the next offset the consumer would have delivered.
        offset: i64,
        /// The first offset whose record may differ from the one read: the end, in the new
        /// leader's log, of the epoch of the position (`None`: the leader knows no epoch that
        /// old).
        divergent_offset: Option<i64>,
        /// Whether the consumer moved on by itself (`auto.offset.reset` earliest or latest:
        /// to `divergent_offset`, or reset when that is unknown); `false` under
        /// `auto.offset.reset=none`, which waits for a seek.
        reset: bool,
    },
    /// The copy loop's transform failed on a record and the loop's policy is to fail
    /// (`eos::TransformErrorPolicy::Fail`): the open transaction was aborted and the
    /// partitions rewound, so the record is read again by the next step.
    #[error("the transform failed on {}-{} at offset {offset}: {message}", partition.topic, partition.partition)]
    Transform {
        /// The source record's partition.
        partition: crate::types::TopicPartition,
        /// The source record's offset.
        offset: i64,
        /// What the transform said.
        message: String,
    },
}

/// ", log start L, high watermark H" as far as known, for [`Error::OffsetOutOfRange`].
fn log_range(log_start_offset: Option<i64>, high_watermark: Option<i64>) -> String {
    match (log_start_offset, high_watermark) {
        (Some(start), Some(end)) => format!(" (the log holds {start}..{end})"),
        (Some(start), None) => format!(" (the log starts at {start})"),
        (None, Some(end)) => format!(" (the high watermark is {end})"),
        (None, None) => String::new(),
    }
}

/// The last failure of one broker address, in [`Error::NoBrokerAnswered`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrokerFailure {
    /// The address (`host:port`).
    pub address: String,
    /// Its last failure: refused, reset, a TLS failure, a timeout, ...
    pub error: Error,
}

impl BrokerFailure {
    /// A failure of `address`.
    pub fn new(address: impl Into<String>, error: Error) -> Self {
        Self {
            address: address.into(),
            error,
        }
    }

    /// The failures as one line, each address with what went wrong.
    fn list(failures: &[BrokerFailure]) -> String {
        if failures.is_empty() {
            return "no connection attempt finished".to_owned();
        }
        failures
            .iter()
            .map(|f| format!("{}: {}", f.address, f.error.transport_summary()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Displays an error followed by each of its causes once, separated by `: ` (what
/// `anyhow`'s `{:#}` prints), for the crate's own log lines and messages.
pub(crate) struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        // Bounded: a chain longer than this is a cycle or a bug, not information.
        for _ in 0..16 {
            let Some(cause) = next else { break };
            write!(f, ": {cause}")?;
            next = cause.source();
        }
        Ok(())
    }
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

    /// A low-cardinality name for the kind of error, for the `error.type` attribute of the
    /// OpenTelemetry semantic conventions and for metric labels: Kafka's name for an error
    /// code a broker answered with (`NOT_LEADER_OR_FOLLOWER`), else a fixed snake_case name
    /// of the client-side kind (`timeout`, `io`, `tls`, `authentication`, ...), `_OTHER` for a
    /// code this crate does not know, as the conventions ask. Never the error's text, which
    /// carries addresses, offsets and messages (unbounded in a metrics backend). A wrapping
    /// error (fatal, abortable, indeterminate) names itself: what the caller has to act on.
    pub fn type_name(&self) -> &'static str {
        let code_name = |code: &ErrorCode| code.name().unwrap_or("_OTHER");
        match self {
            Error::Broker { code, .. }
            | Error::TopicRefused { code, .. }
            | Error::GroupRefused { code, .. } => code_name(code),
            Error::UnknownTopic { .. } => "UNKNOWN_TOPIC_OR_PARTITION",
            Error::InvalidTopic { .. } => "INVALID_TOPIC_EXCEPTION",
            Error::RecordTooLarge { .. } => "RECORD_TOO_LARGE",
            Error::OffsetOutOfRange { .. } => "OFFSET_OUT_OF_RANGE",
            Error::DeliveryTimeout { .. } => "delivery_timeout",
            Error::Indeterminate { .. } => "indeterminate",
            Error::NoBrokerAnswered { .. } => "no_broker_answered",
            Error::Config { .. } => "config",
            Error::Closed => "closed",
            Error::InvalidState(_) => "invalid_state",
            Error::Abortable { .. } => "abortable",
            Error::Purged => "purged",
            Error::TransactionAborted => "transaction_aborted",
            Error::Fatal(_) => "fatal",
            Error::Decode(_) => "decode",
            Error::Encode(_) => "encode",
            Error::Io { .. } => "io",
            Error::Authentication { .. } => "authentication",
            Error::Tls { .. } => "tls",
            Error::SecurityProtocolMismatch { .. } => "security_protocol_mismatch",
            Error::Timeout(_) => "timeout",
            Error::PartitionsLost { .. } => "partitions_lost",
            Error::LogTruncation { .. } => "log_truncation",
            Error::Transform { .. } => "transform",
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
            Error::Io { .. } | Error::Timeout(_) | Error::NoBrokerAnswered { .. } => true,
            _ => false,
        }
    }

    /// Whether the client is unusable after this error.
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Fatal(_) | Error::Closed => true,
            // A request the negotiated version cannot carry is refused the same way every
            // time: retrying would stall quietly, as an UNSUPPORTED_VERSION answer would.
            Error::Authentication { .. }
            | Error::Tls { .. }
            | Error::SecurityProtocolMismatch { .. }
            | Error::Encode(_) => true,
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

    /// Whether this is a connection failure no retry can fix (authentication, a certificate,
    /// a `security.protocol` the listener does not speak), which ends the client instead of
    /// being retried.
    pub(crate) fn is_security_failure(&self) -> bool {
        matches!(
            self,
            Error::Authentication { .. }
                | Error::Tls { .. }
                | Error::SecurityProtocolMismatch { .. }
        )
    }

    /// What went wrong with a connection, in a few words: "connection refused", "connection
    /// reset", "TLS failure: ...", "timed out: ...", or the error and its causes.
    fn transport_summary(&self) -> String {
        use std::io::ErrorKind as K;
        match self {
            Error::Io { source, .. } => match source.kind() {
                kind @ (K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::TimedOut
                | K::HostUnreachable
                | K::NetworkUnreachable
                | K::AddrNotAvailable) => kind.to_string(),
                K::UnexpectedEof => "the connection was closed by the other end".to_owned(),
                _ => source.to_string(),
            },
            Error::Tls { reason, .. } => format!("TLS failure: {reason}"),
            other => ErrorChain(other).to_string(),
        }
    }

    /// The broker error code, if this error carries one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Broker { code, .. }
            | Error::TopicRefused { code, .. }
            | Error::GroupRefused { code, .. } => Some(*code),
            Error::OffsetOutOfRange { .. } => Some(ErrorCode::OFFSET_OUT_OF_RANGE),
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
    use crate::protocol::DecodeErrorKind;

    fn reset() -> Error {
        Error::io(
            "127.0.0.1:9092",
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer"),
        )
    }

    #[test]
    fn type_names_are_bounded_and_never_the_text() {
        let cases = [
            (
                Error::broker(ErrorCode::NOT_LEADER_OR_FOLLOWER),
                "NOT_LEADER_OR_FOLLOWER",
            ),
            (Error::broker(ErrorCode(-12_345)), "_OTHER"),
            (reset(), "io"),
            (
                Error::Timeout("metadata for t after 60000 ms".into()),
                "timeout",
            ),
            (Error::Fatal(Arc::new(reset())), "fatal"),
            (
                Error::Config {
                    setting: "linger.ms".into(),
                    reason: "not a number".into(),
                },
                "config",
            ),
        ];
        for (error, name) in cases {
            assert_eq!(error.type_name(), name, "{error}");
            assert!(!error.to_string().is_empty());
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{name}"
            );
        }
    }

    /// The messages of `error` and each of its causes, walked through `source()` as
    /// `anyhow`, `eyre` and `tracing` do.
    fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut chain = Vec::new();
        let mut next = Some(error);
        while let Some(e) = next {
            chain.push(e.to_string());
            next = e.source();
        }
        chain
    }

    /// One error of every variant, each wrapper around a cause with a message of its own.
    fn one_of_each() -> Vec<Error> {
        let cause = || Arc::new(Error::broker(ErrorCode::NOT_LEADER_OR_FOLLOWER));
        vec![
            Error::broker(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
            Error::DeliveryTimeout {
                elapsed_ms: 5,
                indeterminate: true,
            },
            Error::Indeterminate { cause: cause() },
            Error::RecordTooLarge {
                size: 2,
                max: 1,
                setting: "max.request.size",
            },
            Error::InvalidTopic {
                topic: "a b".into(),
                reason: "space",
            },
            Error::UnknownTopic {
                topic: "t".into(),
                waited_ms: 1,
                last_error: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            },
            Error::NoBrokerAnswered {
                waited_ms: 1,
                attempts: vec![BrokerFailure::new("127.0.0.1:1", reset())],
            },
            Error::Config {
                setting: "linger.ms".into(),
                reason: "negative".into(),
            },
            Error::Closed,
            Error::InvalidState("x".into()),
            Error::Abortable { cause: cause() },
            Error::Purged,
            Error::TransactionAborted,
            Error::Fatal(cause()),
            Error::Decode(DecodeError {
                context: "MetadataResponse.brokers",
                offset: 7,
                kind: DecodeErrorKind::InvalidLength(-2),
            }),
            reset(),
            Error::Authentication {
                broker: "b:1".into(),
                mechanism: "PLAIN".into(),
                reason: "bad credentials".into(),
            },
            Error::Tls {
                broker: "b:1".into(),
                reason: "untrusted".into(),
            },
            Error::SecurityProtocolMismatch {
                broker: "b:1".into(),
                configured: "PLAINTEXT",
                reason: "TLS answered".into(),
            },
            Error::Timeout("x".into()),
            Error::TopicRefused {
                topic: "t".into(),
                partition: Some(0),
                api: "Fetch",
                code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            },
            Error::GroupRefused {
                group: "g".into(),
                api: "OffsetFetch",
                code: ErrorCode::GROUP_AUTHORIZATION_FAILED,
            },
            Error::OffsetOutOfRange {
                partition: crate::types::TopicPartition::new("t", 0),
                offset: 9,
                log_start_offset: Some(0),
                high_watermark: Some(5),
            },
            Error::LogTruncation {
                partition: crate::types::TopicPartition::new("t", 0),
                offset: 9,
                divergent_offset: Some(5),
                reset: false,
            },
            Error::Encode(EncodeError {
                api_key: 11,
                version: 4,
                reason: "group instance id needs v5".into(),
            }),
        ]
    }

    #[test]
    fn every_error_displays_its_own_text_without_its_source() {
        let mut wrappers = 0;
        for error in one_of_each() {
            let text = error.to_string();
            let Some(source) = std::error::Error::source(&error) else {
                continue;
            };
            wrappers += 1;
            let cause = source.to_string();
            assert!(
                !text.contains(&cause),
                "{error:?} displays its source: {text:?} contains {cause:?}"
            );
            assert!(!text.is_empty(), "{error:?}");
        }
        // Indeterminate, Abortable, Fatal, Decode, Io and Encode.
        assert_eq!(wrappers, 6);
    }

    #[test]
    fn a_request_its_version_cannot_carry_is_fatal_not_retried() {
        let error = Error::Encode(EncodeError {
            api_key: 9,
            version: 6,
            reason: "require_stable needs v7".into(),
        });
        assert!(error.is_fatal() && !error.is_retriable());
    }

    #[test]
    fn an_error_chain_prints_each_cause_once() {
        let wrapped = Error::Indeterminate {
            cause: Arc::new(Error::Fatal(Arc::new(reset()))),
        };
        let chain = chain(&wrapped);
        assert_eq!(
            chain,
            vec![
                "the record may or may not have been written",
                "the producer failed fatally and cannot be used any more",
                "I/O error with 127.0.0.1:9092",
                "reset by peer",
            ]
        );
        // What `anyhow`'s `{:#}` prints: every message, each once.
        let report = chain.join(": ");
        for cause in &chain {
            assert_eq!(report.matches(cause.as_str()).count(), 1, "{report}");
        }
        assert_eq!(ErrorChain(&wrapped).to_string(), report);
    }

    #[test]
    fn io_errors_keep_their_kind_through_wrappers() {
        let wrapped = Error::Indeterminate {
            cause: Arc::new(Error::Fatal(Arc::new(reset()))),
        };
        assert_eq!(wrapped.io_kind(), Some(std::io::ErrorKind::ConnectionReset));
    }

    #[test]
    fn no_broker_answered_names_each_address_and_what_failed() {
        let refused = Error::io(
            "127.0.0.1:1",
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "os error 111"),
        );
        let tls = Error::Tls {
            broker: "127.0.0.1:2".into(),
            reason: "invalid peer certificate: UnknownIssuer".into(),
        };
        let error = Error::NoBrokerAnswered {
            waited_ms: 20_001,
            attempts: vec![
                BrokerFailure::new("127.0.0.1:1", refused),
                BrokerFailure::new("127.0.0.1:2", tls),
                BrokerFailure::new("127.0.0.1:3", Error::Timeout("no answer".into())),
            ],
        };
        assert_eq!(
            error.to_string(),
            "no broker answered within 20001 ms: 127.0.0.1:1: connection refused; \
             127.0.0.1:2: TLS failure: invalid peer certificate: UnknownIssuer; \
             127.0.0.1:3: timed out: no answer"
        );
        assert!(error.is_retriable() && !error.is_fatal());
    }

    #[test]
    fn consumer_errors_name_what_they_concern_and_are_not_retried_as_such() {
        let texts: Vec<String> = one_of_each()
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    Error::TopicRefused { .. }
                        | Error::GroupRefused { .. }
                        | Error::OffsetOutOfRange { .. }
                        | Error::LogTruncation { .. }
                )
            })
            .inspect(|e| assert!(!e.is_retriable() && !e.is_fatal(), "{e:?}"))
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            texts,
            vec![
                "Fetch of t-0 refused: TOPIC_AUTHORIZATION_FAILED (29)",
                "OffsetFetch for group \"g\" refused: GROUP_AUTHORIZATION_FAILED (30)",
                "offset 9 of t-0 is out of range (the log holds 0..5) and auto.offset.reset=none: \
                 seek to go on",
                "the log of t-0 was truncated under the position 9: its records from offset 5 on \
                 are not the ones read (auto.offset.reset=none: seek to go on)",
            ]
        );
    }

    #[test]
    fn a_security_protocol_mismatch_is_fatal_and_names_the_setting() {
        let error = Error::SecurityProtocolMismatch {
            broker: "127.0.0.1:9093".into(),
            configured: "PLAINTEXT",
            reason: "it answered with a TLS record".into(),
        };
        assert!(error.is_fatal() && error.is_security_failure() && !error.is_retriable());
        let text = error.to_string();
        assert!(
            text.contains("security.protocol") && text.contains("127.0.0.1:9093"),
            "{text}"
        );
    }
}
