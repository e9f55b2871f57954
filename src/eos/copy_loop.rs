//! The transactional copy loop: consume → transform → produce → commit the consumed offsets
//! in the same transaction (KIP-98, KIP-447).
//!
//! Ordering around rebalances. A `Revoked` event's partitions stay owned until the next
//! `poll` (the consumer heartbeats in the background meanwhile). So the loop can end the open
//! transaction while it still owns the partitions: on `Revoked` it commits (offsets of the
//! revoked partitions included, under the member's current generation) before it polls
//! again, and only then are the partitions given up.
//! franz-go's `GroupTransactSession` cannot block the rebalance from its callbacks without
//! risking the rebalance timeout, so it aborts whatever a revoke interrupts (its `End`);
//! committing is possible here because the revocation waits for us, and it keeps the work.
//! `Lost` partitions already belong to someone else: the transaction, which holds output made
//! from them, is aborted, and their offsets are dropped (confluent-kafka-go #209: librdkafka
//! committed offsets stored under an old assignment after a rebalance and rewound the group).
//!
//! After an abort the consumer's positions are past input whose output was just thrown away.
//! Like franz-go's `End`, which resets the client to the committed offsets after an abort, the
//! loop seeks every partition it still owns back to where the aborted transaction began
//! reading it, so the aborted input is processed again, never skipped.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use super::copies::{CommittedTransaction, ConsumedRange, PartitionOffset, RecordCopy};
use super::endpoints::{CommitHold, CopySink, CopySource};
use crate::types::{Millis, millis};
use crate::{
    Consumer, ConsumerEvent, ConsumerRecord, DeliveryFuture, Error, PendingOffsets, Producer,
    Record, Result, TopicPartition,
};

/// How often a commit or abort that timed out is called again before the loop gives up
/// (rule T4: after a timeout only the same call is valid, and it returns the outcome).
const END_ATTEMPTS: u32 = 5;

/// An exactly-once copier: reads records with a [`Consumer`] (read_committed), turns each into
/// zero or more [`Record`]s with an async transform, writes them with a transactional
/// [`Producer`] and commits the consumed offsets in the same transaction, every
/// `records` records or `interval` (see [`CopyLoop::commit_every`]).
///
/// Drive it with [`CopyLoop::step`], which returns what each committed transaction did
/// (exact source → destination offsets, rule O1), ready for an
/// [`OffsetTranslator`](super::OffsetTranslator).
///
/// The consumer must be subscribed and the producer's transactions initialised
/// ([`Producer::init_transactions`]) before the first step. The consumer heartbeats in the
/// background, so a slow transform only has to keep each step (one poll's records, then the
/// commit) within `max.poll.interval.ms`.
///
/// `C` and `P` are always [`Consumer`] and [`Producer`] outside this crate (the traits they
/// stand for are sealed); the crate's deterministic simulation runs this same loop over its
/// model consumer and producer on virtual time.
///
/// ```no_run
/// use std::time::Duration;
/// use exactly::eos::CopyLoop;
/// use exactly::{Consumer, ConsumerRecord, Producer, Record};
///
/// # async fn run() -> exactly::Result<()> {
/// let mut consumer = Consumer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .group_id("uppercase")
///     .build()
///     .await?;
/// consumer.subscribe(["in"])?;
/// let producer = Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .transactional_id("uppercase-1") // one per copier instance
///     .build()
///     .await?;
/// producer.init_transactions().await?;
/// // Each source record becomes zero or more destination records; here one, upper-cased,
/// // in the source record's partition so per-partition order carries over.
/// let mut copier = CopyLoop::new(consumer, producer, |r: ConsumerRecord| async move {
///     let value = r.value.map(|v| v.to_ascii_uppercase());
///     vec![Record::to("out").partition(r.partition).value(value.unwrap_or_default())]
/// })
/// .commit_every(500, Duration::from_millis(50));
/// for _ in 0..1_000 {
///     // `Ok(None)`: nothing was consumed within one interval.
///     if let Some(txn) = copier.step().await? {
///         println!("committed {} → {}", txn.records_in(), txn.records_out());
///     }
/// }
/// copier.close().await?; // commits what is open, then closes both clients
/// # Ok(()) }
/// ```
pub struct CopyLoop<F, C = Consumer, P = Producer> {
    consumer: C,
    producer: P,
    transform: F,
    commit_records: usize,
    commit_interval: Duration,
    open: Option<OpenTransaction>,
    /// Per partition owned without interruption, the offset this loop last committed for it
    /// (the next to consume): where the next transaction begins reading it.
    committed: BTreeMap<TopicPartition, i64>,
}

impl<F, C: std::fmt::Debug, P: std::fmt::Debug> std::fmt::Debug for CopyLoop<F, C, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyLoop")
            .field("consumer", &self.consumer)
            .field("producer", &self.producer)
            .field("commit_records", &self.commit_records)
            .field("commit_interval", &self.commit_interval)
            .field("open", &self.open.as_ref().map(|o| o.copies.len()))
            .finish_non_exhaustive()
    }
}

/// The transaction being filled.
struct OpenTransaction {
    began: Millis,
    pending: PendingOffsets,
    /// Per partition read in it, where it began reading (a seek there re-reads its input).
    from: BTreeMap<TopicPartition, i64>,
    copies: Vec<(PartitionOffset, Vec<DeliveryFuture>)>,
}

impl<F, Fut, C, P> CopyLoop<F, C, P>
where
    F: FnMut(ConsumerRecord) -> Fut,
    Fut: Future<Output = Vec<Record>>,
    C: CopySource,
    P: CopySink,
{
    /// A loop copying what `consumer` reads through `transform` with `producer`, committing
    /// every 1,000 records or 100 ms, whichever comes first.
    pub fn new(consumer: C, producer: P, transform: F) -> Self {
        Self {
            consumer,
            producer,
            transform,
            commit_records: 1_000,
            commit_interval: Duration::from_millis(100),
            open: None,
            committed: BTreeMap::new(),
        }
    }

    /// Commits once a transaction has consumed `records` records (at least 1), or when
    /// `interval` has passed since it began, whichever comes first.
    pub fn commit_every(mut self, records: usize, interval: Duration) -> Self {
        self.commit_records = records.max(1);
        self.commit_interval = interval;
        self
    }

    /// The consumer (for its assignment, positions or committed offsets).
    pub fn consumer(&mut self) -> &mut C {
        &mut self.consumer
    }

    /// The producer (for its metrics or transaction state).
    pub fn producer(&self) -> &P {
        &self.producer
    }

    /// Copies until the next commit and returns what the committed transaction did; or
    /// returns `Ok(None)` when no record arrived within the commit interval.
    ///
    /// A `Revoked` event commits the open transaction before the next poll gives the
    /// partitions up; a `Lost` event aborts it (its output came partly from partitions now
    /// owned by another member) and re-reads the rest.
    ///
    /// # Errors
    ///
    /// An error from the consumer leaves the open transaction as it is (call `step` again). A
    /// failed transaction (an error from the producer, or the group coordinator fencing this
    /// member's offsets, KIP-447) is aborted and the partitions still owned are rewound to
    /// where it began, so its input is copied again by the next steps; the error is
    /// returned. After a fatal error ([`Error::is_fatal`], e.g. a newer producer with the same
    /// transactional id) the loop cannot go on.
    ///
    /// Cancel safety: dropping the future while it waits for records loses nothing; dropping
    /// it during a send or a commit leaves the transaction's outcome to the producer (see
    /// [`Producer::commit_transaction`]).
    pub async fn step(&mut self) -> Result<Option<CommittedTransaction>> {
        let idle_until = self
            .consumer
            .now()
            .saturating_add(millis(self.commit_interval));
        loop {
            let wait = match &self.open {
                Some(open) => {
                    let age = Duration::from_millis(self.consumer.now().saturating_sub(open.began));
                    if open.copies.len() >= self.commit_records || age >= self.commit_interval {
                        return self.commit_or_abort(&[]).await.map(Some);
                    }
                    self.commit_interval - age
                }
                None => {
                    let left =
                        Duration::from_millis(idle_until.saturating_sub(self.consumer.now()));
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left
                }
            };
            let event = self.consumer.poll_timeout(wait).await?;
            match &event {
                Some(ConsumerEvent::Records(r)) => tracing::trace!(records = r.len(), "polled"),
                other => tracing::debug!(event = ?other, "polled"),
            }
            match event {
                Some(ConsumerEvent::Records(records)) => self.copy(records).await?,
                Some(ConsumerEvent::Assigned(partitions)) => {
                    for p in &partitions {
                        self.committed.remove(p);
                    }
                }
                Some(ConsumerEvent::Revoked(partitions)) => {
                    let outcome = if self.open.is_some() {
                        self.commit_or_abort(&partitions).await.map(Some)
                    } else {
                        Ok(None)
                    };
                    for p in &partitions {
                        self.committed.remove(p);
                    }
                    if outcome.as_ref().map_or(true, Option::is_some) {
                        return outcome;
                    }
                }
                Some(ConsumerEvent::Lost(partitions)) => {
                    for p in &partitions {
                        self.committed.remove(p);
                    }
                    if let Some(mut open) = self.open.take() {
                        open.pending.revoke(&partitions);
                        tracing::warn!(
                            lost = ?partitions,
                            records = open.copies.len(),
                            "partitions lost: aborting the open copy transaction"
                        );
                        self.abort_and_rewind(open, &partitions).await?;
                    }
                }
                None => {}
            }
        }
    }

    /// Ends the open transaction now, without polling: commits it, or when that fails aborts
    /// it and rewinds its input (as [`CopyLoop::step`] does). `Ok(None)` when none is open.
    ///
    /// # Errors
    ///
    /// As for [`CopyLoop::step`]: the error that ended the transaction, after the abort.
    pub async fn commit(&mut self) -> Result<Option<CommittedTransaction>> {
        if self.open.is_none() {
            return Ok(None);
        }
        self.commit_or_abort(&[]).await.map(Some)
    }

    /// Sends one poll's records through the transform into the open transaction.
    async fn copy(&mut self, records: Vec<ConsumerRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.open.is_none() {
            self.producer.begin_transaction()?;
            self.open = Some(OpenTransaction {
                began: self.consumer.now(),
                pending: PendingOffsets::new(),
                from: BTreeMap::new(),
                copies: Vec::new(),
            });
        }
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        // Where the transaction begins reading each partition, noted before any record is
        // processed, so a failure half-way through the poll rewinds all of it. A partition
        // this loop committed before begins at that commit (markers in between have no
        // records); a fresh one at its first record.
        for record in &records {
            let partition = record.topic_partition();
            let start = self
                .committed
                .get(&partition)
                .copied()
                .unwrap_or(record.offset);
            open.from.entry(partition).or_insert(start);
        }
        for record in records {
            let partition = record.topic_partition();
            let offset = record.offset;
            if self.committed.get(&partition).is_some_and(|&c| offset < c) {
                // Already copied and committed by this loop: the consumer re-delivered it.
                tracing::warn!(%partition.topic, partition.partition, offset, "skipping a record this loop already committed");
                continue;
            }
            let outputs = (self.transform)(record).await;
            let mut acks = Vec::with_capacity(outputs.len());
            for output in outputs {
                match self.producer.send(output).await {
                    Ok(ack) => acks.push(ack),
                    Err(e) => {
                        let Some(open) = self.open.take() else {
                            return Err(e);
                        };
                        return Err(self.fail(open, e, &[]).await);
                    }
                }
            }
            let Some(open) = self.open.as_mut() else {
                return Ok(());
            };
            open.pending.processed(partition.clone(), offset);
            open.copies
                .push((PartitionOffset::new(partition, offset), acks));
        }
        Ok(())
    }

    /// Commits the open transaction; on failure aborts it and rewinds the partitions still
    /// owned (all but `leaving`).
    async fn commit_or_abort(
        &mut self,
        leaving: &[TopicPartition],
    ) -> Result<CommittedTransaction> {
        let Some(mut open) = self.open.take() else {
            return Ok(CommittedTransaction::default());
        };
        let offsets = open.pending.take();
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
        // this loop).
        let owned = self.consumer.assignment();
        let lost: Vec<TopicPartition> = offsets
            .iter()
            .map(|o| o.partition.clone())
            .filter(|p| !owned.contains(p))
            .collect();
        if !lost.is_empty() {
            drop(hold);
            let error = Error::PartitionsLost { partitions: lost };
            return Err(self.fail(open, error, leaving).await);
        }
        let group = hold.metadata().clone();
        let ended = async {
            if !offsets.is_empty() {
                let sent = self
                    .producer
                    .send_offsets_to_transaction(offsets.clone(), &group)
                    .await;
                if let Err(e) = &sent {
                    hold.refused(e);
                }
                sent?;
            }
            drop(hold);
            end_with_retries(|| self.producer.commit_transaction()).await
        }
        .await;
        if let Err(e) = ended {
            tracing::debug!(
                group = %group.group_id,
                generation = group.generation_id,
                member = %group.member_id,
                "the copy transaction did not commit"
            );
            return Err(self.fail(open, e, leaving).await);
        }
        tracing::debug!(records = open.copies.len(), offsets = ?offsets.iter().map(|o| (o.partition.partition, o.offset)).collect::<Vec<_>>(), "copy transaction committed");
        for o in &offsets {
            self.committed.insert(o.partition.clone(), o.offset);
        }
        // The delivery futures resolve once the transaction is committed (the commit flushed
        // every record): their offsets are exact (rule O1).
        let mut copies = Vec::with_capacity(open.copies.len());
        for (source, acks) in open.copies {
            let mut destinations = Vec::with_capacity(acks.len());
            for ack in acks {
                let meta = ack.await?;
                destinations.push(PartitionOffset::new(
                    TopicPartition::new(meta.topic, meta.partition),
                    meta.offset,
                ));
            }
            copies.push(RecordCopy {
                source,
                destinations,
            });
        }
        let consumed = offsets
            .into_iter()
            .map(|o| ConsumedRange {
                from: open.from.get(&o.partition).copied().unwrap_or(o.offset),
                partition: o.partition,
                next: o.offset,
            })
            .collect();
        Ok(CommittedTransaction { copies, consumed })
    }

    /// The loop's answer to a failed transaction: abort it unless the producer is dead, rewind,
    /// and hand back the error that ended it.
    async fn fail(
        &mut self,
        open: OpenTransaction,
        error: Error,
        leaving: &[TopicPartition],
    ) -> Error {
        if error.is_fatal() {
            return error;
        }
        tracing::warn!(error = %crate::error::ErrorChain(&error), records = open.copies.len(), "aborting the copy transaction");
        match self.abort_and_rewind(open, leaving).await {
            Ok(()) => error,
            Err(abort_error) => {
                tracing::warn!(abort_error = %crate::error::ErrorChain(&abort_error), "the abort failed too");
                abort_error
            }
        }
    }

    /// Aborts `open` and seeks every partition it read that is still owned (all but
    /// `leaving`) back to where it began reading, so its input is copied again.
    async fn abort_and_rewind(
        &mut self,
        open: OpenTransaction,
        leaving: &[TopicPartition],
    ) -> Result<()> {
        end_with_retries(|| self.producer.abort_transaction()).await?;
        let owned = self.consumer.assignment();
        for (partition, from) in open.from {
            if owned.contains(&partition) && !leaving.contains(&partition) {
                tracing::debug!(%partition.topic, partition.partition, from, "rewinding after the abort");
                self.consumer.seek(&partition, from)?;
            }
        }
        Ok(())
    }
}

impl<F, Fut> CopyLoop<F>
where
    F: FnMut(ConsumerRecord) -> Fut,
    Fut: Future<Output = Vec<Record>>,
{
    /// Commits the open transaction (if any), then closes the consumer (leaving the group, so
    /// its partitions move at once) and the producer.
    ///
    /// # Errors
    ///
    /// The commit's error (after aborting, as in [`CopyLoop::step`]), or the consumer's or
    /// producer's close error.
    pub async fn close(mut self) -> Result<Option<CommittedTransaction>> {
        let last = self.commit().await;
        let consumer_closed = self.consumer.close().await;
        let producer_closed = self.producer.close().await;
        let last = last?;
        consumer_closed?;
        producer_closed?;
        Ok(last)
    }
}

/// Calls `end` (a commit or an abort) again while it times out: after a timeout only the same
/// call is valid, and calling it again returns the real outcome (rules T1, T4).
async fn end_with_retries<E, EFut>(mut end: E) -> Result<()>
where
    E: FnMut() -> EFut,
    EFut: Future<Output = Result<()>>,
{
    let mut attempt = 1;
    loop {
        match end().await {
            Err(Error::Timeout(what)) if attempt < END_ATTEMPTS => {
                tracing::warn!(%what, attempt, "ending the transaction timed out; calling again");
                attempt += 1;
            }
            other => return other,
        }
    }
}
