//! What the copy loop's transform may give back, what the loop does when it fails, and the
//! loop's counters.

use std::fmt::Display;

use bytes::Bytes;

use crate::{ConsumerRecord, Record};

/// What a [`CopyLoop`](super::CopyLoop) transform's future resolves to: `Vec<Record>` (a
/// transform that cannot fail), or `Result<Vec<Record>, E>` for any `E: Display` (a transform
/// that can, handled by the loop's [`TransformErrorPolicy`]).
///
/// The error only has to display: `anyhow::Error` and `eyre::Report` (which are not
/// `std::error::Error`), a `String`, or any `std::error::Error` all fit without wrapping, and
/// the loop needs nothing but the message (for [`crate::Error::Transform`] and the dead
/// letter's `__connect.errors.exception.message` header). Sealed: only these two shapes.
pub trait TransformOutput: sealed::Sealed {}

impl TransformOutput for Vec<Record> {}

impl<E: Display> TransformOutput for Result<Vec<Record>, E> {}

pub(super) mod sealed {
    use super::Display;
    use crate::Record;

    /// The outputs, or the transform's message.
    pub trait Sealed {
        fn into_outputs(self) -> Result<Vec<Record>, String>;
    }

    impl Sealed for Vec<Record> {
        fn into_outputs(self) -> Result<Vec<Record>, String> {
            Ok(self)
        }
    }

    impl<E: Display> Sealed for Result<Vec<Record>, E> {
        fn into_outputs(self) -> Result<Vec<Record>, String> {
            self.map_err(|e| e.to_string())
        }
    }
}

/// What the copy loop does with a record its transform failed on
/// ([`CopyLoop::on_transform_error`](super::CopyLoop::on_transform_error)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransformErrorPolicy {
    /// The loop aborts the open transaction, rewinds its partitions as after any abort, and
    /// `step` returns [`crate::Error::Transform`] naming the record. The next step reads the
    /// record again (a transform that fails the same way fails again: fix it, or choose
    /// another policy). The default.
    #[default]
    Fail,
    /// The record's offset is consumed and committed with the transaction, nothing is
    /// produced for it, and it counts in [`CopyLoopCounters::records_skipped`].
    Skip,
    /// The source record (key, value and headers kept) goes to `topic`, in the same
    /// transaction as the good output: an aborted transaction loses both, a committed one has
    /// both exactly once. Kafka Connect's dead-letter headers (KIP-298) are added: see
    /// [`TransformErrorPolicy::dead_letter`].
    DeadLetter {
        /// The dead-letter topic (it must exist; the producer's partitioner picks the
        /// partition, by key as for any record).
        topic: String,
    },
}

/// Kafka Connect's names for the dead-letter headers (KIP-298, `DeadLetterQueueReporter`):
/// tools written for Connect's dead-letter queues read ours.
const ERRORS_TOPIC: &str = "__connect.errors.topic";
const ERRORS_PARTITION: &str = "__connect.errors.partition";
const ERRORS_OFFSET: &str = "__connect.errors.offset";
const ERRORS_STAGE: &str = "__connect.errors.stage";
const ERRORS_MESSAGE: &str = "__connect.errors.exception.message";
/// Connect's `Stage` for a failure in a transformation.
const STAGE_TRANSFORMATION: &str = "TRANSFORMATION";

impl TransformErrorPolicy {
    /// [`TransformErrorPolicy::DeadLetter`] to `topic`. Each dead letter carries the source
    /// record's key, value and headers, then Kafka Connect's headers (KIP-298), as UTF-8
    /// text: `__connect.errors.topic`, `__connect.errors.partition`,
    /// `__connect.errors.offset` (decimal), `__connect.errors.stage` (`TRANSFORMATION`) and
    /// `__connect.errors.exception.message` (the transform's error, displayed).
    ///
    /// The message is written as the transform displayed it, for anyone who can read the
    /// dead-letter topic: an error that may hold a secret (a credential in a URL, a token)
    /// must not display it.
    pub fn dead_letter(topic: impl Into<String>) -> Self {
        Self::DeadLetter {
            topic: topic.into(),
        }
    }
}

/// The dead letter of `record`, which the transform failed on with `message`.
pub(super) fn dead_letter(topic: &str, record: ConsumerRecord, message: &str) -> Record {
    let mut letter = Record::to(topic);
    letter.key = record.key;
    letter.value = record.value;
    letter.headers = record.headers;
    letter
        .header(
            ERRORS_TOPIC,
            Bytes::copy_from_slice(record.topic.as_bytes()),
        )
        .header(ERRORS_PARTITION, record.partition.to_string())
        .header(ERRORS_OFFSET, record.offset.to_string())
        .header(ERRORS_STAGE, STAGE_TRANSFORMATION)
        .header(ERRORS_MESSAGE, message.to_string())
}

/// What a [`CopyLoop`](super::CopyLoop) has done since it was made
/// ([`CopyLoop::counters`](super::CopyLoop::counters)). Records count only once their
/// transaction committed (an aborted transaction's records are read and counted again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopyLoopCounters {
    /// Transactions committed.
    pub transactions_committed: u64,
    /// Transactions aborted (a failed commit or send, lost partitions, a failed transform
    /// under [`TransformErrorPolicy::Fail`], a step interrupted mid-copy).
    pub transactions_aborted: u64,
    /// Records sent to the dead-letter topic in committed transactions.
    pub records_dead_lettered: u64,
    /// Records skipped in committed transactions.
    pub records_skipped: u64,
    /// Source records consumed in committed transactions (copied, filtered, skipped or
    /// dead-lettered).
    pub records_in: u64,
    /// Records written to the destination in committed transactions (dead letters not
    /// included).
    pub records_out: u64,
}
