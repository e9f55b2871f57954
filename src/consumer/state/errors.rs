//! The errors waiting for the application's next polls: each answer that goes wrong for a
//! partition, a topic or the group adds one, and `poll` hands them out oldest first, one per
//! call. One per cause: a request that fails again the same way before the application saw
//! the first report adds nothing, so a refusal retried every `retry.backoff.ms` cannot crowd
//! out another partition's error, and one partition's error never overwrites another's.

use std::collections::VecDeque;

use tracing::warn;

use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::types::TopicPartition;

/// At most this many errors wait (distinct causes: more would be a flood nobody reads; the
/// dropped ones are logged, and their requests fail again after the back-off).
const MAX_PENDING: usize = 64;

/// The errors for the application's next polls.
#[derive(Debug, Default)]
pub(crate) struct PendingErrors {
    queue: VecDeque<Error>,
}

/// What an error is about, for telling two reports of the same failure apart from two
/// failures.
#[derive(Debug, PartialEq, Eq)]
enum Cause<'a> {
    Topic(&'a str, Option<i32>, &'static str, ErrorCode),
    Group(&'a str, &'static str, ErrorCode),
    Partition(&'static str, &'a TopicPartition),
    Other(String),
}

fn cause(error: &Error) -> Cause<'_> {
    match error {
        Error::TopicRefused {
            topic,
            partition,
            api,
            code,
        } => Cause::Topic(topic, *partition, api, *code),
        Error::GroupRefused { group, api, code } => Cause::Group(group, api, *code),
        Error::OffsetOutOfRange { partition, .. } => Cause::Partition("out of range", partition),
        Error::LogTruncation { partition, .. } => Cause::Partition("truncated", partition),
        other => Cause::Other(other.to_string()),
    }
}

impl PendingErrors {
    /// Queues `error` unless one of the same cause already waits.
    pub fn push(&mut self, error: Error) {
        let new = cause(&error);
        if self.queue.iter().any(|queued| cause(queued) == new) {
            return;
        }
        if self.queue.len() >= MAX_PENDING {
            warn!("{MAX_PENDING} consumer errors wait for a poll: dropping {error}");
            return;
        }
        self.queue.push_back(error);
    }

    /// The oldest error waiting.
    pub fn pop(&mut self) -> Option<Error> {
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(partition: i32) -> Error {
        Error::TopicRefused {
            topic: "t".into(),
            partition: Some(partition),
            api: "Fetch",
            code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        }
    }

    #[test]
    fn one_error_per_cause_in_order_and_none_overwritten() {
        let mut errors = PendingErrors::default();
        errors.push(refused(0));
        errors.push(refused(1));
        errors.push(refused(0));
        errors.push(Error::GroupRefused {
            group: "g".into(),
            api: "OffsetFetch",
            code: ErrorCode::GROUP_AUTHORIZATION_FAILED,
        });
        let queued: Vec<Error> = std::iter::from_fn(|| errors.pop()).collect();
        assert!(
            matches!(
                &queued[..],
                [
                    Error::TopicRefused {
                        partition: Some(0),
                        ..
                    },
                    Error::TopicRefused {
                        partition: Some(1),
                        ..
                    },
                    Error::GroupRefused { .. },
                ]
            ),
            "{queued:?}"
        );
        // Handed out, the same failure is reported again when it happens again.
        errors.push(refused(0));
        assert!(errors.pop().is_some());
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut errors = PendingErrors::default();
        for p in 0..200 {
            errors.push(refused(p));
        }
        assert_eq!(std::iter::from_fn(|| errors.pop()).count(), MAX_PENDING);
    }
}
