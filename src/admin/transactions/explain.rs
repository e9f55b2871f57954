//! Why a partition's last stable offset is where it is: every open transaction on it, what
//! its coordinator says, and what an operator can safely do. The verdict is a pure decision
//! over what the partition's leader (DescribeProducers) and the coordinators
//! (ListTransactions, DescribeTransactions) said, so every case is a unit test; the safe
//! [`Admin::abort_transaction`](crate::Admin::abort_transaction) refuses on the same verdict.
//!
//! The clocks: a producer's last write is its last record's timestamp (the producer's
//! clock), a transaction's start is the coordinator's, and "now" is this client's. On one
//! host, or with synchronised clocks, the ages are exact; otherwise they are off by the skew.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::hanging::coordinator_tracks;
use super::{AbortTransactionSpec, ActiveProducer, TransactionDescription, TransactionState};
use crate::types::TopicPartition;

/// What an open transaction's coordinator will do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionVerdict {
    /// Its coordinator holds it open on this partition: its producer may still write and
    /// commit, and the coordinator aborts it when its timeout passes, `time_left` from now.
    /// Aborting it here alone would break its atomicity.
    Live {
        /// Until the coordinator times it out.
        time_left: Duration,
    },
    /// Its coordinator holds it open past its timeout: the coordinator aborts it at its next
    /// check (every `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    TimedOut,
    /// Its coordinator is ending it (PrepareCommit or PrepareAbort): the markers are being
    /// written.
    Completing,
    /// No coordinator will end it on this partition (KIP-664): only an abort written here
    /// moves the last stable offset.
    Hanging,
}

/// One open transaction on the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenTransaction {
    /// The producer as the partition's leader knows it (id, epoch, last write, the offset its
    /// transaction started at).
    pub producer: ActiveProducer,
    /// The offset the transaction started at: the last stable offset cannot pass it.
    pub first_offset: i64,
    /// How long ago the producer last wrote to the partition.
    pub silent_for: Duration,
    /// The transactional id a coordinator holds the producer id under, if any.
    pub transactional_id: Option<String>,
    /// What that coordinator says about the id, if it describes it.
    pub coordinator: Option<TransactionDescription>,
    /// How long the coordinator's transaction has been open, if it has one.
    pub open_for: Option<Duration>,
    /// What the coordinator will do.
    pub verdict: TransactionVerdict,
}

impl OpenTransaction {
    /// What aborting it on this partition needs.
    pub fn abort_spec(&self, partition: &TopicPartition) -> AbortTransactionSpec {
        AbortTransactionSpec::for_producer(partition.clone(), &self.producer)
    }
}

/// What an operator can do to move the last stable offset on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SuggestedAction {
    /// Wait: the coordinator ends the transaction itself, at most `within` from now (`None`:
    /// at its next check, or as soon as its markers are written).
    Wait {
        /// The transactional id.
        transactional_id: String,
        /// The most it takes.
        within: Option<Duration>,
    },
    /// Fence the transactional id ([`Admin::fence_producers`](crate::Admin::fence_producers),
    /// as initialising a new producer with it would): the coordinator aborts the whole
    /// transaction, on every partition, at once, and the old producer is fenced.
    Fence {
        /// The transactional id.
        transactional_id: String,
    },
    /// Abort the hanging transaction on this partition
    /// ([`Admin::abort_transaction`](crate::Admin::abort_transaction)).
    Abort(AbortTransactionSpec),
}

/// Why a partition's last stable offset is where it is
/// ([`Admin::explain_last_stable_offset`](crate::Admin::explain_last_stable_offset)). Its
/// `Display` is the explanation an operator reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LastStableOffsetExplanation {
    /// The partition.
    pub partition: TopicPartition,
    /// Its last stable offset: `read_committed` readers see nothing at or after it.
    pub last_stable_offset: i64,
    /// Its high watermark.
    pub high_watermark: i64,
    /// Its open transactions, by the offset they started at (the first holds the last
    /// stable offset).
    pub open_transactions: Vec<OpenTransaction>,
}

impl LastStableOffsetExplanation {
    /// The open transaction the last stable offset waits for, if any.
    pub fn blocking(&self) -> Option<&OpenTransaction> {
        self.open_transactions
            .iter()
            .find(|t| t.first_offset == self.last_stable_offset)
    }

    /// What can be done, transaction by transaction, in the order of
    /// [`Self::open_transactions`]: wait for a live or ending one (or fence its id to end it
    /// now), abort a hanging one.
    pub fn actions(&self) -> Vec<SuggestedAction> {
        let mut actions = Vec::new();
        for open in &self.open_transactions {
            match (open.verdict, &open.transactional_id) {
                (TransactionVerdict::Hanging, _) | (_, None) => {
                    actions.push(SuggestedAction::Abort(open.abort_spec(&self.partition)));
                }
                (TransactionVerdict::Live { time_left }, Some(id)) => {
                    actions.push(SuggestedAction::Wait {
                        transactional_id: id.clone(),
                        within: Some(time_left),
                    });
                    actions.push(SuggestedAction::Fence {
                        transactional_id: id.clone(),
                    });
                }
                (TransactionVerdict::TimedOut | TransactionVerdict::Completing, Some(id)) => {
                    actions.push(SuggestedAction::Wait {
                        transactional_id: id.clone(),
                        within: None,
                    });
                }
            }
        }
        actions
    }
}

/// The open transactions of `producers` (the partition's, as its leader describes them),
/// judged against the coordinators: `transactional_ids` maps producer ids to the ids the
/// coordinators hold them under, `descriptions` those ids' descriptions. Sorted by first
/// offset.
pub(crate) fn open_transactions(
    partition: &TopicPartition,
    producers: &[ActiveProducer],
    transactional_ids: &BTreeMap<i64, String>,
    descriptions: &BTreeMap<String, TransactionDescription>,
    now_ms: i64,
) -> Vec<OpenTransaction> {
    let ago =
        |then_ms: i64| Duration::from_millis(now_ms.saturating_sub(then_ms).max(0).unsigned_abs());
    let mut open: Vec<OpenTransaction> = producers
        .iter()
        .filter_map(|producer| {
            let first_offset = producer.current_txn_start_offset?;
            let transactional_id = transactional_ids.get(&producer.producer_id).cloned();
            let coordinator = transactional_id
                .as_ref()
                .and_then(|id| descriptions.get(id))
                .cloned();
            let tracking = coordinator
                .as_ref()
                .filter(|d| coordinator_tracks(partition, producer, d));
            let verdict = match tracking {
                None => TransactionVerdict::Hanging,
                Some(d) if d.state == TransactionState::Ongoing => {
                    let started = d.start_time_ms.unwrap_or(now_ms);
                    let timeout_ms = i64::try_from(d.timeout.as_millis()).unwrap_or(i64::MAX);
                    let left_ms = started.saturating_add(timeout_ms).saturating_sub(now_ms);
                    if left_ms > 0 {
                        TransactionVerdict::Live {
                            time_left: Duration::from_millis(left_ms.unsigned_abs()),
                        }
                    } else {
                        TransactionVerdict::TimedOut
                    }
                }
                Some(_) => TransactionVerdict::Completing,
            };
            let open_for = coordinator
                .as_ref()
                .filter(|d| d.state == TransactionState::Ongoing)
                .and_then(|d| d.start_time_ms)
                .map(ago);
            Some(OpenTransaction {
                producer: producer.clone(),
                first_offset,
                silent_for: ago(producer.last_timestamp_ms),
                transactional_id,
                coordinator,
                open_for,
                verdict,
            })
        })
        .collect();
    open.sort_by_key(|t| t.first_offset);
    open
}

/// Seconds with one decimal, as an operator reads them.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl fmt::Display for OpenTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "producer {} (epoch {}",
            self.producer.producer_id, self.producer.producer_epoch
        )?;
        if let Some(id) = &self.transactional_id {
            write!(f, ", transactional id {id:?}")?;
        }
        write!(
            f,
            ") open since offset {}, last write {} ago",
            self.first_offset,
            secs(self.silent_for)
        )?;
        match &self.coordinator {
            Some(d) => {
                write!(f, "; coordinator {}: {}", d.coordinator, d.state.name())?;
                if let Some(open_for) = self.open_for {
                    write!(f, ", open {}", secs(open_for))?;
                }
                write!(f, " of its {} timeout", secs(d.timeout))?;
            }
            None => write!(f, "; no coordinator knows this producer")?,
        }
        match self.verdict {
            TransactionVerdict::Live { time_left } => write!(
                f,
                "; live: the coordinator ends it (commit, or abort at its timeout in {})",
                secs(time_left)
            ),
            TransactionVerdict::TimedOut => {
                write!(
                    f,
                    "; timed out: the coordinator aborts it at its next check"
                )
            }
            TransactionVerdict::Completing => write!(f, "; its markers are being written"),
            TransactionVerdict::Hanging => {
                write!(f, "; hanging: no coordinator will end it on this partition")
            }
        }
    }
}

impl fmt::Display for SuggestedAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuggestedAction::Wait {
                transactional_id,
                within: Some(within),
            } => write!(
                f,
                "wait: {transactional_id:?} ends within {}",
                secs(*within)
            ),
            SuggestedAction::Wait {
                transactional_id, ..
            } => write!(
                f,
                "wait: {transactional_id:?} is being ended by its coordinator"
            ),
            SuggestedAction::Fence { transactional_id } => write!(
                f,
                "or fence {transactional_id:?} (as initialising a producer with it does): its coordinator aborts the whole transaction now and the old producer is fenced"
            ),
            SuggestedAction::Abort(spec) => write!(
                f,
                "abort producer {} (epoch {}) on {}-{}: it is hanging",
                spec.producer_id,
                spec.producer_epoch,
                spec.partition.topic,
                spec.partition.partition
            ),
        }
    }
}

impl fmt::Display for LastStableOffsetExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tp = &self.partition;
        write!(
            f,
            "{}-{}: last stable offset {}, high watermark {}",
            tp.topic, tp.partition, self.last_stable_offset, self.high_watermark
        )?;
        if self.open_transactions.is_empty() {
            return write!(
                f,
                "\nno open transaction: read_committed readers see the whole log"
            );
        }
        for open in &self.open_transactions {
            let marker = if open.first_offset == self.last_stable_offset {
                "holds the LSO"
            } else {
                "open"
            };
            write!(f, "\n{marker}: {open}")?;
        }
        for action in self.actions() {
            write!(f, "\n  {action}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const NOW: i64 = 10_000_000;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn producer(id: i64, start: Option<i64>, last_ms: i64) -> ActiveProducer {
        ActiveProducer {
            producer_id: id,
            producer_epoch: 2,
            last_sequence: 9,
            last_timestamp_ms: last_ms,
            coordinator_epoch: Some(1),
            current_txn_start_offset: start,
        }
    }

    fn description(
        id: i64,
        state: TransactionState,
        started_ago_ms: i64,
    ) -> TransactionDescription {
        TransactionDescription {
            transactional_id: format!("txn-{id}"),
            coordinator: 1,
            state,
            producer_id: id,
            producer_epoch: 2,
            timeout: Duration::from_secs(900),
            start_time_ms: Some(NOW - started_ago_ms),
            partitions: BTreeSet::from([tp()]),
        }
    }

    fn judge(descriptions: Vec<TransactionDescription>) -> Vec<OpenTransaction> {
        let producers = [
            producer(7, Some(40), NOW - 3_000),
            producer(8, None, NOW),
            producer(9, Some(12), NOW - 60_000),
        ];
        let ids = descriptions
            .iter()
            .map(|d| (d.producer_id, d.transactional_id.clone()))
            .collect();
        let descriptions = descriptions
            .into_iter()
            .map(|d| (d.transactional_id.clone(), d))
            .collect();
        open_transactions(&tp(), &producers, &ids, &descriptions, NOW)
    }

    #[test]
    fn live_hanging_and_ending_transactions() {
        let open = judge(vec![
            description(7, TransactionState::Ongoing, 14_000),
            description(9, TransactionState::CompleteCommit, 100_000),
        ]);
        assert_eq!(open.len(), 2, "the producer with nothing open is left out");
        // Sorted by first offset: producer 9 (hanging: its coordinator's transaction ended).
        assert_eq!(open[0].producer.producer_id, 9);
        assert_eq!(open[0].verdict, TransactionVerdict::Hanging);
        assert_eq!(open[0].open_for, None);
        assert_eq!(
            open[1].verdict,
            TransactionVerdict::Live {
                time_left: Duration::from_secs(886)
            }
        );
        assert_eq!(open[1].silent_for, Duration::from_secs(3));
        assert_eq!(open[1].open_for, Some(Duration::from_secs(14)));

        let explanation = LastStableOffsetExplanation {
            partition: tp(),
            last_stable_offset: 12,
            high_watermark: 50,
            open_transactions: open,
        };
        assert_eq!(
            explanation.blocking().map(|t| t.producer.producer_id),
            Some(9)
        );
        let actions = explanation.actions();
        assert!(matches!(&actions[0], SuggestedAction::Abort(spec) if spec.producer_id == 9));
        assert_eq!(
            actions[1],
            SuggestedAction::Wait {
                transactional_id: "txn-7".into(),
                within: Some(Duration::from_secs(886))
            }
        );
        assert_eq!(
            actions[2],
            SuggestedAction::Fence {
                transactional_id: "txn-7".into()
            }
        );
        let text = explanation.to_string();
        assert!(text.contains("holds the LSO: producer 9"), "{text}");
        assert!(text.contains("open 14.0s of its 900.0s timeout"), "{text}");
        assert!(text.contains("last write 3.0s ago"), "{text}");
    }

    #[test]
    fn past_its_timeout_or_ending_it_is_the_coordinators() {
        let open = judge(vec![
            description(7, TransactionState::Ongoing, 901_000),
            description(9, TransactionState::PrepareAbort, 10_000),
        ]);
        assert_eq!(open[0].verdict, TransactionVerdict::Completing);
        assert_eq!(open[1].verdict, TransactionVerdict::TimedOut);
    }

    #[test]
    fn nothing_open_says_so() {
        let explanation = LastStableOffsetExplanation {
            partition: tp(),
            last_stable_offset: 5,
            high_watermark: 5,
            open_transactions: Vec::new(),
        };
        assert!(explanation.actions().is_empty());
        assert!(explanation.to_string().contains("no open transaction"));
    }
}
