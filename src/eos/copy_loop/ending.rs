//! How the copy loop ends its transactions and resolves what an earlier call left (rule C1):
//! the commit (offsets under a generation hold, then `commit_transaction`), the abort and its
//! rewind, the report of a committed transaction, and the resolution every `step`, `commit`
//! and `close` starts with. Every step of an ending is written into the loop's [`Stage`]
//! before the await that carries it out, so a call that timed out or a future that was dropped
//! leaves a stage the next call finishes (see `stage.rs` for the table).

use std::future::Future;

use super::CopyLoop;
use crate::eos::copies::{CommittedTransaction, ConsumedRange, PartitionOffset, RecordCopy};
use crate::eos::endpoints::{CommitHold, CopySink, CopySource};
use crate::eos::stage::{EndStep, Ending, Finding, OpenTransaction, Stage, after_refusal, inspect};
use crate::eos::transform::TransformOutput;
use crate::observe::semconv;
use crate::{ConsumerRecord, DeliveryFuture, Error, Result, TopicPartition};

/// The most steps one call takes an ending through (see `end`).
const ENDING_STEPS: usize = 8;

/// Why a step found the producer used behind the loop's back (rule C1).
fn interference(what: &str) -> Error {
    Error::InvalidState(format!(
        "the copy loop's producer was used behind its back: {what}; the loop rewound its input \
         and ended that transaction itself, so no offsets of input whose output may be missing \
         were committed (only the loop begins, commits or aborts its producer's transactions)"
    ))
}

/// The retriable error of a step whose transaction has not ended yet: `call` did not give
/// the outcome (within the producer's `max.block.ms`, or refused for now; the cause is
/// logged).
fn unresolved(call: &str) -> Error {
    Error::Timeout(format!(
        "the copy loop's transaction has no outcome yet: {call} did not finish (within \
         max.block.ms, or the coordinator refused it for now: is it reachable?); the next step \
         asks again before it reads anything else"
    ))
}

impl<F, Fut, C, P> CopyLoop<F, C, P>
where
    F: FnMut(ConsumerRecord) -> Fut,
    Fut: Future,
    Fut::Output: TransformOutput,
    C: CopySource,
    P: CopySink,
{
    /// Resolves what an earlier call left, before anything else (rule C1): a committed
    /// transaction found is returned; `Ok(None)` when the loop may poll.
    pub(super) async fn resolve(&mut self) -> Result<Option<CommittedTransaction>> {
        let mut found = None;
        // At most two findings: the loop's transaction ended elsewhere, then another one
        // open on the producer (each moves the stage on).
        for _ in 0..2 {
            let Some(ledger) = self.producer.transaction_ledger() else {
                break;
            };
            match inspect(&self.stage, &ledger) {
                Finding::Expected => break,
                Finding::EndedElsewhere { committed } => {
                    if let Some(cause) = self.ended_elsewhere(committed) {
                        found = Some(cause);
                    }
                }
                Finding::Foreign { step } => {
                    tracing::warn!(state = ?ledger.state, "a transaction the copy loop does not own is open on its producer: ending it");
                    self.disown(step, ledger.begun);
                    found = Some(interference(
                        "a transaction was begun, committed or aborted on it",
                    ));
                    break;
                }
            }
        }
        match &self.stage {
            Stage::Open(open) if open.copying => {
                tracing::warn!(
                    records = open.copies.len(),
                    "a step was dropped while copying: aborting its transaction"
                );
                self.begin_end(EndStep::Abort, Vec::new());
                self.end(found).await
            }
            Stage::Ending(_) => self.end(found).await,
            Stage::Idle | Stage::Open(_) => found.map_or(Ok(None), Err),
        }
    }

    /// The loop's transaction ended without it: a commit of its own known to have landed is
    /// reported; otherwise its input is rewound, and the error saying so is returned.
    fn ended_elsewhere(&mut self, committed: Option<bool>) -> Option<Error> {
        if let Stage::Ending(ending) = &mut self.stage
            && ending.step == EndStep::Commit
            && committed == Some(true)
        {
            // The loop's own commit (its offsets were in it) landed; its outcome was taken
            // behind the loop's back.
            self.committed_now();
            return None;
        }
        tracing::warn!(
            ?committed,
            "the copy loop's transaction was ended behind its back: rewinding its input"
        );
        self.rewind_and_idle();
        Some(interference("its transaction was ended without it"))
    }

    /// Ends whatever transaction the producer has open with `step`, reporting nothing of it
    /// and rewinding the loop's own input.
    fn disown(&mut self, step: EndStep, number: u64) {
        let now = self.consumer.now();
        let (txn, leaving) = match std::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Idle => (OpenTransaction::new(number, now), Vec::new()),
            Stage::Open(txn) => (txn, Vec::new()),
            Stage::Ending(ending) => (ending.txn, ending.leaving),
        };
        self.stage = Stage::Ending(Ending {
            txn,
            offsets: Vec::new(),
            leaving,
            step,
            since: now,
            disowned: true,
        });
    }

    /// Starts ending the open transaction at `step`: its offsets are taken for the commit;
    /// `leaving` are partitions given up once it ended.
    pub(super) fn begin_end(&mut self, step: EndStep, leaving: Vec<TopicPartition>) {
        let mut txn = match std::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Open(txn) => txn,
            // Only an open transaction is begun to end; anything else stays as it was.
            other => {
                self.stage = other;
                return;
            }
        };
        let offsets = if step == EndStep::SendOffsets {
            txn.pending.take()
        } else {
            Vec::new()
        };
        self.stage = Stage::Ending(Ending {
            txn,
            offsets,
            leaving,
            step,
            since: self.consumer.now(),
            disowned: false,
        });
    }

    fn set_step(&mut self, step: EndStep) {
        if let Stage::Ending(ending) = &mut self.stage {
            ending.step = step;
        }
    }

    /// Drives the ending in the stage from its step to its end: `Ok(Some)` committed,
    /// `Ok(None)` aborted (and rewound). `cause`, the error that made the loop end it, is
    /// returned once the transaction is aborted (or while its abort goes on).
    pub(super) async fn end(
        &mut self,
        mut cause: Option<Error>,
    ) -> Result<Option<CommittedTransaction>> {
        // Bounded: the steps go forward (offsets, commit, report; or abort), and a refusal the
        // ledger explains moves the ending on once or twice more; past that, the next call
        // goes on from where this one stopped.
        for _ in 0..ENDING_STEPS {
            let Stage::Ending(ending) = &self.stage else {
                return cause.map_or(Ok(None), Err);
            };
            let step = ending.step;
            match step {
                EndStep::SendOffsets => match self.send_offsets().await {
                    Ok(()) => self.set_step(EndStep::Commit),
                    Err(e) if e.is_fatal() => return Err(e),
                    // The offsets go out again at the next step, under a new hold.
                    Err(Error::Timeout(why)) => {
                        tracing::warn!(%why, "the copy transaction's offsets were not sent in time");
                        return Err(
                            cause.unwrap_or_else(|| unresolved("send_offsets_to_transaction"))
                        );
                    }
                    Err(e) => {
                        cause = Some(e);
                        self.set_step(EndStep::Abort);
                    }
                },
                EndStep::Commit => match self.producer.commit_transaction().await {
                    Ok(()) => self.committed_now(),
                    Err(e) if e.is_fatal() => return Err(e),
                    Err(Error::Timeout(why)) => {
                        tracing::warn!(%why, "the copy transaction's commit has no outcome yet");
                        return Err(cause.unwrap_or_else(|| unresolved("commit_transaction")));
                    }
                    Err(Error::InvalidState(why)) => {
                        if let Some(e) = self.refused(&why) {
                            return Err(cause.unwrap_or(e));
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %crate::error::ErrorChain(&e), "the copy transaction did not commit");
                        cause = Some(e);
                        self.set_step(EndStep::Abort);
                    }
                },
                EndStep::Abort => match self.producer.abort_transaction().await {
                    Ok(()) => {
                        self.counters.transactions_aborted += 1;
                        self.observer.aborted.increment(1);
                        self.rewind_and_idle();
                    }
                    Err(e) if e.is_fatal() => return Err(e),
                    Err(Error::InvalidState(why)) => {
                        if let Some(e) = self.refused(&why) {
                            return Err(cause.unwrap_or(e));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %crate::error::ErrorChain(&e), "the copy transaction's abort has no outcome yet");
                        return Err(cause.unwrap_or_else(|| unresolved("abort_transaction")));
                    }
                },
                EndStep::Report => return self.report().await.map(Some),
            }
        }
        Err(cause.unwrap_or_else(|| unresolved("the end of the transaction")))
    }

    /// Under a generation hold, checks that every partition of the offsets is still owned and
    /// adds the offsets to the transaction (KIP-447).
    async fn send_offsets(&mut self) -> Result<()> {
        let Stage::Ending(ending) = &self.stage else {
            return Ok(());
        };
        if ending.offsets.is_empty() {
            return Ok(());
        }
        let offsets = ending.offsets.clone();
        // The generation (member epoch) the coordinator holds now (KIP-447), so a member that
        // lost its partitions is fenced, not obeyed. Kafka 4.1 wants TxnOffsetCommit's epoch
        // equal to the broker's (ILLEGAL_GENERATION otherwise), and heartbeats go on in the
        // background: the hold keeps the epoch still until the offsets are in. A refusal that
        // says the member is gone reaches the consumer at once, which drops the lost
        // partitions' buffered records, so no transaction is opened on them again.
        let hold = self.consumer.hold_generation().await;
        // A partition lost since its records were read (the next poll would say `Lost`) is
        // another member's now: its offsets must not commit, and neither may the output made
        // from it. Without this check a classic member that left the group (generation -1, no
        // member id) could even have its offsets accepted by a group that has since emptied.
        // Checked under the hold, against the generation the offsets go out with: the hold
        // waits for the heartbeat in flight, whose answer may fence the member, and the member
        // may rejoin (epoch 0, then a new epoch) before the hold is taken; Kafka 4.1 checks
        // only the epoch of a TxnOffsetCommit, so offsets of the old membership's partitions
        // would be accepted under the new one (found by the copy-loop simulation once it ran
        // this loop). Checked again when the offsets are sent again after a drop or a
        // timeout: the hold is new, and so may the membership be.
        let owned = self.consumer.assignment();
        let lost: Vec<TopicPartition> = offsets
            .iter()
            .map(|o| o.partition.clone())
            .filter(|p| !owned.contains(p))
            .collect();
        if !lost.is_empty() {
            return Err(Error::PartitionsLost { partitions: lost });
        }
        let group = hold.metadata().clone();
        let sent = self
            .producer
            .send_offsets_to_transaction(offsets, &group)
            .await;
        if let Err(e) = &sent {
            hold.refused(e);
            tracing::debug!(
                group = %group.group_id,
                generation = group.generation_id,
                member = %group.member_id,
                "the copy transaction's offsets were not added"
            );
        }
        sent
    }

    /// The producer refused the loop's commit or abort as invalid in its state (`why`): its
    /// ledger says what happened to the transaction. `Some` is the error to return now.
    fn refused(&mut self, why: &str) -> Option<Error> {
        let (Stage::Ending(ending), Some(ledger)) =
            (&self.stage, self.producer.transaction_ledger())
        else {
            // Only a transactional producer ends a transaction, and it keeps a ledger.
            return Some(Error::InvalidState(format!(
                "the copy loop's producer refused its commit or abort ({why}) and keeps no \
                 transaction ledger to explain it: is it transactional?"
            )));
        };
        match after_refusal(ending, &ledger) {
            Finding::EndedElsewhere { committed } => self.ended_elsewhere(committed),
            Finding::Foreign { step } => {
                tracing::warn!(%why, "the copy loop's transaction was taken over behind its back");
                self.disown(step, ledger.begun);
                None
            }
            Finding::Expected => {
                tracing::warn!(%why, "the producer refused to end the copy transaction");
                Some(unresolved("another transactional call on the producer"))
            }
        }
    }

    /// The transaction committed: the offsets it committed are where the next transactions
    /// begin, the revoked partitions are given up, and it is counted; the report follows.
    fn committed_now(&mut self) {
        let Stage::Ending(ending) = &mut self.stage else {
            return;
        };
        if ending.disowned {
            self.rewind_and_idle();
            return;
        }
        ending.step = EndStep::Report;
        tracing::debug!(records = ending.txn.copies.len(), offsets = ?ending.offsets.iter().map(|o| (o.partition.partition, o.offset)).collect::<Vec<_>>(), "copy transaction committed");
        for o in &ending.offsets {
            self.committed.insert(o.partition.clone(), o.offset);
        }
        for p in &ending.leaving {
            self.committed.remove(p);
        }
        let txn = &ending.txn;
        let commit_latency = self.consumer.now().saturating_sub(ending.since);
        let records_in = txn.copies.len() as u64;
        let records_out = txn.copies.iter().map(|(_, acks)| acks.len() as u64).sum();
        let dead_lettered = txn.dead_letters.len() as u64;
        self.counters.transactions_committed += 1;
        self.counters.records_skipped += txn.skipped;
        self.counters.records_dead_lettered += dead_lettered;
        self.counters.records_in += records_in;
        self.counters.records_out += records_out;
        let observer = &self.observer;
        observer.committed.increment(1);
        observer
            .commit_duration
            .record(semconv::seconds(commit_latency));
        observer.records_in.increment(records_in);
        observer.records_out.increment(records_out);
        observer.records_skipped.increment(txn.skipped);
        observer.records_dead_lettered.increment(dead_lettered);
        if let Some(lag) = self.consumer.source_lag() {
            observer.source_lag.set(lag as f64);
        }
    }

    /// What the committed transaction in the stage did. The delivery futures resolved when
    /// it committed (the commit flushed every record): their offsets are exact (rule O1).
    /// They are read in place, so a report interrupted here is built again by the next call.
    async fn report(&mut self) -> Result<CommittedTransaction> {
        let Stage::Ending(ending) = &mut self.stage else {
            return Ok(CommittedTransaction::default());
        };
        let read = read_deliveries(&mut ending.txn).await;
        let consumed = ending
            .offsets
            .iter()
            .map(|o| ConsumedRange {
                from: ending
                    .txn
                    .from
                    .get(&o.partition)
                    .copied()
                    .unwrap_or(o.offset),
                partition: o.partition.clone(),
                next: o.offset,
            })
            .collect();
        // Whatever the futures said, the transaction is over: a report that cannot be built
        // is not built again.
        self.stage = Stage::Idle;
        let (copies, dead_letters) = read?;
        Ok(CommittedTransaction {
            copies,
            consumed,
            dead_letters,
        })
    }

    /// The ending's transaction is over without its offsets: every partition it read that is
    /// still owned (and not leaving) goes back to where it began reading, so its input is
    /// copied again; the leaving partitions are given up.
    fn rewind_and_idle(&mut self) {
        let (txn, leaving) = match std::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Idle => return,
            Stage::Open(txn) => (txn, Vec::new()),
            Stage::Ending(ending) => (ending.txn, ending.leaving),
        };
        let owned = self.consumer.assignment();
        for (partition, from) in txn.from {
            if owned.contains(&partition) && !leaving.contains(&partition) {
                tracing::debug!(%partition.topic, partition.partition, from, "rewinding after the abort");
                if let Err(e) = self.consumer.seek(&partition, from) {
                    // Owned a moment ago: a partition the consumer no longer has is re-read
                    // by its next owner from the committed offset.
                    tracing::warn!(error = %e, %partition.topic, partition.partition, "could not rewind");
                }
            }
        }
        for p in &leaving {
            self.committed.remove(p);
        }
    }

    /// Puts a poll's records back (nothing of them was copied): each partition to its first
    /// record.
    pub(super) fn rewind_poll(&mut self, records: &[ConsumerRecord]) -> Result<()> {
        let mut firsts: Vec<(TopicPartition, i64)> = Vec::new();
        for record in records {
            let partition = record.topic_partition();
            if !firsts.iter().any(|(p, _)| *p == partition) {
                firsts.push((partition, record.offset));
            }
        }
        for (partition, offset) in firsts {
            self.consumer.seek(&partition, offset)?;
        }
        Ok(())
    }

    /// The loop's answer to a failed transaction: abort it unless the producer is dead, rewind,
    /// and hand back the error that ended it (the abort goes on at the next step if it could
    /// not finish now).
    pub(super) async fn fail(&mut self, error: Error) -> Error {
        if error.is_fatal() {
            return error;
        }
        tracing::warn!(error = %crate::error::ErrorChain(&error), records = self.open_mut().map_or(0, |o| o.copies.len()), "aborting the copy transaction");
        self.begin_end(EndStep::Abort, Vec::new());
        match self.end(Some(error)).await {
            Err(e) => e,
            // `end` returns the cause it was given once the abort is over.
            Ok(_) => Error::TransactionAborted,
        }
    }
}

/// Where the copies and dead letters of committed `txn` landed.
async fn read_deliveries(txn: &mut OpenTransaction) -> Result<(Vec<RecordCopy>, Vec<RecordCopy>)> {
    let mut copies = Vec::with_capacity(txn.copies.len());
    for (source, acks) in &mut txn.copies {
        copies.push(RecordCopy {
            source: source.clone(),
            destinations: delivered(acks).await?,
        });
    }
    let mut dead_letters = Vec::with_capacity(txn.dead_letters.len());
    for (source, ack) in &mut txn.dead_letters {
        dead_letters.push(RecordCopy {
            source: source.clone(),
            destinations: delivered(std::slice::from_mut(ack)).await?,
        });
    }
    Ok((copies, dead_letters))
}

/// Where the records of `acks` landed, once their transaction committed (rule O1).
async fn delivered(acks: &mut [DeliveryFuture]) -> Result<Vec<PartitionOffset>> {
    let mut destinations = Vec::with_capacity(acks.len());
    for ack in acks {
        let meta = ack.await?;
        destinations.push(PartitionOffset::new(
            TopicPartition::new(meta.topic, meta.partition),
            meta.offset,
        ));
    }
    Ok(destinations)
}
