//! Where the copy loop's transaction stands (rule C1 of ARCHITECTURE.md): the loop keeps it as
//! its own state, written before every await, so a step that timed out or was dropped at any
//! await point leaves a stage the next `step` (or `commit`, or `close`) resolves before it does
//! anything else.
//!
//! | stage | the step was at (or dropped in) | the next step first |
//! |---|---|---|
//! | [`Stage::Idle`] | the poll; a committed transaction's report handed out | polls |
//! | [`Stage::Open`], not copying | the poll (records are taken only when it returns) | polls on into the same transaction |
//! | [`Stage::Open`], copying | the transform, the send (`buffer.memory` full) | aborts it and rewinds its input: a poll's records were neither all copied nor rewound |
//! | [`EndStep::SendOffsets`] | the generation hold, `send_offsets_to_transaction` (or it timed out) | takes a new hold, checks ownership under it and sends the offsets again (the same offsets, so a copy that landed is harmless) |
//! | [`EndStep::Commit`] | `commit_transaction` (or it timed out) | calls `commit_transaction` again until it gives the outcome (T4): committed, it reports the transaction; aborted, it rewinds |
//! | [`EndStep::Abort`] | `abort_transaction` (or it timed out) | calls `abort_transaction` again until it ends, then rewinds |
//! | [`EndStep::Report`] | the delivery futures after the commit | builds the committed transaction's report again and returns it |
//!
//! While a commit or an abort has no outcome (the coordinator out of reach) each step returns
//! a retriable [`Error::Timeout`](crate::Error::Timeout) naming what it waits for and polls
//! nothing, so no input is read into a transaction that cannot be opened.
//!
//! The producer's [`TxnLedger`] says which transaction it is in and how the last one ended;
//! [`inspect`] compares it with the stage, so a transaction ended or begun on the producer
//! behind the loop's back is noticed rather than committed over: the loop's input is rewound
//! unless its own commit is known to have landed, and a transaction it does not own is ended
//! with the only call valid for it.

use std::collections::BTreeMap;

use super::copies::PartitionOffset;
use crate::producer::{TxnLedger, TxnState};
use crate::types::Millis;
use crate::{DeliveryFuture, OffsetToCommit, PendingOffsets, TopicPartition};

/// Where the loop's transaction stands (see the module docs for what a drop in each leaves).
pub(super) enum Stage {
    /// No transaction of the loop's is open: the producer is Ready, as far as the loop knows.
    Idle,
    /// The loop's transaction is open and being filled.
    Open(OpenTransaction),
    /// The loop is ending its transaction (or one it found open on its producer).
    Ending(Ending),
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Idle => f.write_str("Idle"),
            Stage::Open(open) => f
                .debug_struct("Open")
                .field("number", &open.number)
                .field("records", &open.copies.len())
                .field("copying", &open.copying)
                .finish(),
            Stage::Ending(ending) => f
                .debug_struct("Ending")
                .field("number", &ending.txn.number)
                .field("records", &ending.txn.copies.len())
                .field("step", &ending.step)
                .field("disowned", &ending.disowned)
                .finish(),
        }
    }
}

/// The transaction being filled.
pub(super) struct OpenTransaction {
    /// The producer's number for it ([`TxnLedger::begun`] right after it began).
    pub(super) number: u64,
    pub(super) began: Millis,
    pub(super) pending: PendingOffsets,
    /// Per partition read in it, where it began reading (a seek there re-reads its input).
    pub(super) from: BTreeMap<TopicPartition, i64>,
    pub(super) copies: Vec<(PartitionOffset, Vec<DeliveryFuture>)>,
    /// The records sent to the dead-letter topic, with their dead letter's delivery.
    pub(super) dead_letters: Vec<(PartitionOffset, DeliveryFuture)>,
    pub(super) skipped: u64,
    /// A poll's records are being copied into it: a step dropped meanwhile (cancelled) left
    /// some of them neither copied nor rewound, so the next step aborts it and rewinds.
    pub(super) copying: bool,
}

impl OpenTransaction {
    /// An empty transaction, the producer's `number`, begun at `began`.
    pub(super) fn new(number: u64, began: Millis) -> Self {
        Self {
            number,
            began,
            pending: PendingOffsets::new(),
            from: BTreeMap::new(),
            copies: Vec::new(),
            dead_letters: Vec::new(),
            skipped: 0,
            copying: false,
        }
    }
}

/// A transaction being ended.
pub(super) struct Ending {
    pub(super) txn: OpenTransaction,
    /// The offsets the commit sends, taken from the transaction when the loop decided to end
    /// it (empty for an abort).
    pub(super) offsets: Vec<OffsetToCommit>,
    /// Revoked or lost partitions: given up once the transaction ended, never rewound.
    pub(super) leaving: Vec<TopicPartition>,
    pub(super) step: EndStep,
    /// When the loop decided to commit (for the commit latency).
    pub(super) since: Millis,
    /// The producer's transaction is not (only) the loop's `txn` any more: it was ended or
    /// begun behind the loop's back. Whatever its outcome, the loop reports nothing of it and
    /// rewinds `txn`'s input.
    pub(super) disowned: bool,
}

/// How far the end of a transaction got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EndStep {
    /// The offsets go out next, under a generation hold (again, after a drop or a timeout).
    SendOffsets,
    /// `commit_transaction` was called: only it is valid until it returns the outcome (T4).
    Commit,
    /// `abort_transaction` is called until the transaction is aborted.
    Abort,
    /// Committed and counted: the report is built from the delivery futures.
    Report,
}

/// What the producer's ledger says about the loop's stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finding {
    /// What the loop expects: it goes on with its stage.
    Expected,
    /// The loop's transaction ended without the loop (committed, aborted, or `None`: it does
    /// not know), and the producer holds nothing of it any more.
    EndedElsewhere {
        /// How it ended, when the ledger still says.
        committed: Option<bool>,
    },
    /// A transaction the loop does not (alone) own is open or ending on the producer: the
    /// loop ends it with `step`, the only call valid for it, and reports nothing of it.
    Foreign {
        /// Commit (a commit of it timed out: only commit is valid) or abort.
        step: EndStep,
    },
}

/// The step that ends whatever transaction the producer has open, if it has one.
fn open_in_producer(state: &TxnState) -> Option<EndStep> {
    match state {
        TxnState::Committing => Some(EndStep::Commit),
        TxnState::InTransaction | TxnState::AbortableError | TxnState::Aborting => {
            Some(EndStep::Abort)
        }
        _ => None,
    }
}

/// How transaction `number` ended, if the ledger says.
fn fate(ledger: &TxnLedger, number: u64) -> Option<bool> {
    ledger
        .last_ended
        .and_then(|(ended, committed)| (ended == number).then_some(committed))
}

/// Compares the producer's ledger with the loop's stage, before the loop acts on it.
pub(super) fn inspect(stage: &Stage, ledger: &TxnLedger) -> Finding {
    let (txn, step) = match stage {
        Stage::Idle => {
            return open_in_producer(&ledger.state)
                .map_or(Finding::Expected, |step| Finding::Foreign { step });
        }
        Stage::Open(txn) => (txn, EndStep::SendOffsets),
        Stage::Ending(ending) if ending.disowned => return Finding::Expected,
        Stage::Ending(ending) => (&ending.txn, ending.step),
    };
    let ours = ledger.begun == txn.number;
    match step {
        EndStep::Report => Finding::Expected,
        // Filling, or about to send its offsets: ours must be the open transaction.
        EndStep::SendOffsets => {
            let open = matches!(
                ledger.state,
                TxnState::InTransaction | TxnState::AbortableError
            );
            if ours && open {
                Finding::Expected
            } else if ours && let Some(step) = open_in_producer(&ledger.state) {
                // Ours, being ended by someone else's commit or abort.
                Finding::Foreign { step }
            } else {
                Finding::EndedElsewhere {
                    committed: fate(ledger, txn.number),
                }
            }
        }
        // Ours is being ended by the loop's own call, which says how it ended; another
        // transaction begun since means that call's outcome was taken behind the loop's back.
        EndStep::Commit | EndStep::Abort if ours => Finding::Expected,
        EndStep::Commit | EndStep::Abort => Finding::EndedElsewhere {
            committed: fate(ledger, txn.number),
        },
    }
}

/// After the producer refused the loop's commit or abort of its transaction as invalid in
/// its state: what the ledger says happened.
pub(super) fn after_refusal(ending: &Ending, ledger: &TxnLedger) -> Finding {
    let number = ending.txn.number;
    if ledger.begun != number || fate(ledger, number).is_some() {
        return Finding::EndedElsewhere {
            committed: fate(ledger, number),
        };
    }
    match (ending.step, &ledger.state) {
        // A commit of ours timed out behind the loop's back: only commit is valid.
        (EndStep::Abort, TxnState::Committing) => Finding::Foreign {
            step: EndStep::Commit,
        },
        // The outcome of our failed commit was taken behind the loop's back.
        (EndStep::Commit, TxnState::AbortableError) => Finding::Foreign {
            step: EndStep::Abort,
        },
        // Another call is running on the producer: ask again at the next step.
        _ => Finding::Expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(state: TxnState, begun: u64, last_ended: Option<(u64, bool)>) -> TxnLedger {
        TxnLedger {
            state,
            begun,
            last_ended,
        }
    }

    fn ending_of(number: u64, step: EndStep) -> Ending {
        Ending {
            txn: OpenTransaction::new(number, 0),
            offsets: Vec::new(),
            leaving: Vec::new(),
            step,
            since: 0,
            disowned: false,
        }
    }

    fn ending(number: u64, step: EndStep) -> Stage {
        Stage::Ending(ending_of(number, step))
    }

    #[test]
    fn the_loops_own_transaction_is_expected() {
        let open = Stage::Open(OpenTransaction::new(3, 0));
        assert_eq!(
            inspect(&open, &ledger(TxnState::InTransaction, 3, Some((2, true)))),
            Finding::Expected
        );
        assert_eq!(
            inspect(&open, &ledger(TxnState::AbortableError, 3, None)),
            Finding::Expected
        );
        assert_eq!(
            inspect(&Stage::Idle, &ledger(TxnState::Ready, 3, Some((3, true)))),
            Finding::Expected
        );
        // A commit that timed out: the producer may be anywhere, the loop's call tells.
        for state in [
            TxnState::Committing,
            TxnState::Ready,
            TxnState::AbortableError,
        ] {
            let found = inspect(
                &ending(3, EndStep::Commit),
                &ledger(state, 3, Some((2, true))),
            );
            assert_eq!(found, Finding::Expected);
        }
    }

    /// Once the loop took over a transaction begun or ended behind its back (disowned), the
    /// ledger no longer matches the loop's own transaction by design: the loop finishes what
    /// the producer has open, so nothing the ledger says is news.
    #[test]
    fn a_disowned_ending_is_the_loops_to_finish() {
        let mut disowned = ending_of(3, EndStep::Abort);
        disowned.disowned = true;
        let disowned = Stage::Ending(disowned);
        for state in [TxnState::InTransaction, TxnState::Aborting, TxnState::Ready] {
            assert_eq!(
                inspect(&disowned, &ledger(state.clone(), 4, Some((3, true)))),
                Finding::Expected,
                "{state:?}"
            );
        }
    }

    #[test]
    fn a_transaction_begun_behind_the_loops_back_is_foreign() {
        assert_eq!(
            inspect(
                &Stage::Idle,
                &ledger(TxnState::InTransaction, 4, Some((3, true)))
            ),
            Finding::Foreign {
                step: EndStep::Abort
            }
        );
        assert_eq!(
            inspect(
                &Stage::Idle,
                &ledger(TxnState::Committing, 4, Some((3, true)))
            ),
            Finding::Foreign {
                step: EndStep::Commit
            }
        );
    }

    #[test]
    fn the_loops_transaction_ended_behind_its_back() {
        let open = Stage::Open(OpenTransaction::new(3, 0));
        // Committed by hand: its offsets were never sent, so its input is rewound.
        assert_eq!(
            inspect(&open, &ledger(TxnState::Ready, 3, Some((3, true)))),
            Finding::EndedElsewhere {
                committed: Some(true)
            }
        );
        // A commit of it by hand that timed out: only commit ends it.
        assert_eq!(
            inspect(&open, &ledger(TxnState::Committing, 3, Some((2, true)))),
            Finding::Foreign {
                step: EndStep::Commit
            }
        );
        // Ended and another begun: the ledger may no longer say how.
        assert_eq!(
            inspect(&open, &ledger(TxnState::InTransaction, 4, Some((3, false)))),
            Finding::EndedElsewhere {
                committed: Some(false)
            }
        );
        assert_eq!(
            inspect(
                &ending(3, EndStep::Commit),
                &ledger(TxnState::Ready, 5, Some((4, true)))
            ),
            Finding::EndedElsewhere { committed: None }
        );
        // The loop's timed-out commit landed, and its outcome was taken by hand.
        assert_eq!(
            inspect(
                &ending(3, EndStep::Commit),
                &ledger(TxnState::InTransaction, 4, Some((3, true)))
            ),
            Finding::EndedElsewhere {
                committed: Some(true)
            }
        );
    }

    #[test]
    fn a_refused_call_is_explained_by_the_ledger() {
        let commit = ending_of(3, EndStep::Commit);
        assert_eq!(
            after_refusal(&commit, &ledger(TxnState::Ready, 3, Some((3, true)))),
            Finding::EndedElsewhere {
                committed: Some(true)
            }
        );
        assert_eq!(
            after_refusal(
                &commit,
                &ledger(TxnState::AbortableError, 3, Some((2, true)))
            ),
            Finding::Foreign {
                step: EndStep::Abort
            }
        );
        assert_eq!(
            after_refusal(&commit, &ledger(TxnState::Committing, 3, Some((2, true)))),
            Finding::Expected
        );
        let abort = ending_of(3, EndStep::Abort);
        assert_eq!(
            after_refusal(&abort, &ledger(TxnState::Committing, 3, Some((2, true)))),
            Finding::Foreign {
                step: EndStep::Commit
            }
        );
        assert_eq!(
            after_refusal(&abort, &ledger(TxnState::Ready, 3, Some((3, false)))),
            Finding::EndedElsewhere {
                committed: Some(false)
            }
        );
    }
}
