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
//!
//! A transform that fails is handled by the loop's [`TransformErrorPolicy`]. A dead letter is
//! sent in the open transaction like any output, so it shares the transaction's fate: what
//! rule T4 promises for the output (all visible once committed, none once aborted) holds for
//! the dead letters too.

use std::collections::{BTreeMap, VecDeque};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use super::copies::{CommittedTransaction, ConsumedRange, PartitionOffset, RecordCopy};
use super::endpoints::{CommitHold, CopySink, CopySource};
use super::metrics::CopyLoopObserver;
use super::transform::sealed::Sealed;
use super::transform::{CopyLoopCounters, TransformErrorPolicy, TransformOutput, dead_letter};
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
/// The transform's future gives `Vec<Record>`, or `Result<Vec<Record>, E>` with any
/// `E: Display` when it can fail ([`TransformOutput`]); what happens to a record it failed on
/// is the loop's [`TransformErrorPolicy`] ([`CopyLoop::on_transform_error`]: fail the step,
/// skip the record, or send it to a dead-letter topic in the same transaction). Up to
/// [`CopyLoop::transform_concurrency`] transforms of one poll's records run at once; their
/// output is sent in consumption order all the same.
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
/// use exactly::eos::{CopyLoop, TransformErrorPolicy};
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
/// // A record whose value is not UTF-8 fails the transform; the policy sends it, with the
/// // error and its source coordinates in Kafka Connect's headers, to "out-dlq", in the same
/// // transaction as the good output.
/// let mut copier = CopyLoop::new(consumer, producer, |r: ConsumerRecord| async move {
///     let text = std::str::from_utf8(r.value.as_deref().unwrap_or_default())?;
///     Ok::<_, std::str::Utf8Error>(vec![
///         Record::to("out").partition(r.partition).value(text.to_uppercase()),
///     ])
/// })
/// .on_transform_error(TransformErrorPolicy::dead_letter("out-dlq"))
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
    on_error: TransformErrorPolicy,
    concurrency: usize,
    counters: CopyLoopCounters,
    observer: CopyLoopObserver,
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
            .field("on_error", &self.on_error)
            .field("concurrency", &self.concurrency)
            .field("counters", &self.counters)
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
    /// The records sent to the dead-letter topic, with their dead letter's delivery.
    dead_letters: Vec<(PartitionOffset, DeliveryFuture)>,
    skipped: u64,
    /// A poll's records are being copied into it: a step dropped meanwhile (cancelled) left
    /// some of them neither copied nor rewound, so the next step aborts it and rewinds.
    copying: bool,
}

/// One record in the transform, in consumption order.
struct Transforming<Fut: Future> {
    at: PartitionOffset,
    /// The source record's leader epoch, which the commit of the offset after it carries
    /// (KIP-320).
    leader_epoch: Option<i32>,
    /// The source record, kept for its dead letter (only under that policy).
    original: Option<ConsumerRecord>,
    state: TransformState<Fut>,
}

enum TransformState<Fut: Future> {
    Running(Pin<Box<Fut>>),
    Done(Option<Fut::Output>),
}

impl<F, Fut, C, P> CopyLoop<F, C, P>
where
    F: FnMut(ConsumerRecord) -> Fut,
    Fut: Future,
    Fut::Output: TransformOutput,
    C: CopySource,
    P: CopySink,
{
    /// A loop copying what `consumer` reads through `transform` with `producer`, committing
    /// every 1,000 records or 100 ms, whichever comes first, one transform at a time, failing
    /// the step when the transform fails ([`TransformErrorPolicy::Fail`]).
    pub fn new(consumer: C, producer: P, transform: F) -> Self {
        let (client_id, group) = consumer.metric_labels();
        Self {
            observer: CopyLoopObserver::new(&client_id, group.as_deref()),
            consumer,
            producer,
            transform,
            commit_records: 1_000,
            commit_interval: Duration::from_millis(100),
            on_error: TransformErrorPolicy::Fail,
            concurrency: 1,
            counters: CopyLoopCounters::default(),
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

    /// What to do with a record the transform failed on (default: fail the step).
    pub fn on_transform_error(mut self, policy: TransformErrorPolicy) -> Self {
        self.on_error = policy;
        self
    }

    /// Runs up to `transforms` (at least 1; default 1) transforms of one poll's records at
    /// once. Their output is sent in consumption order whatever order they finish in, so each
    /// partition's records keep their source order in the destination.
    pub fn transform_concurrency(mut self, transforms: usize) -> Self {
        self.concurrency = transforms.max(1);
        self
    }

    /// What the loop has done so far.
    pub fn counters(&self) -> CopyLoopCounters {
        self.counters
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
    /// An error from the consumer leaves the open transaction as it is (call `step` again),
    /// except [`Error::LogTruncation`] (the source log lost records under the position,
    /// KIP-320): the transaction is aborted and rewound first, the truncated partition to where
    /// it began or to the divergence, whichever comes first. A
    /// failed transaction (an error from the producer, or the group coordinator fencing this
    /// member's offsets, KIP-447) is aborted and the partitions still owned are rewound to
    /// where it began, so its input is copied again by the next steps; the error is
    /// returned. After a fatal error ([`Error::is_fatal`], e.g. a newer producer with the same
    /// transactional id) the loop cannot go on.
    ///
    /// A transform that failed under [`TransformErrorPolicy::Fail`] ends the step the same
    /// way, with [`Error::Transform`].
    ///
    /// Cancel safety: dropping the future while it waits for records loses nothing; dropping
    /// it while a poll's records are transformed or sent makes the next step (or
    /// [`CopyLoop::commit`]) abort the open transaction and rewind its input first, so nothing
    /// half-copied is committed; dropping it during a commit leaves the transaction's outcome
    /// to the producer (see [`Producer::commit_transaction`]).
    pub async fn step(&mut self) -> Result<Option<CommittedTransaction>> {
        self.abort_interrupted().await?;
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
            let event = match self.consumer.poll_timeout(wait).await {
                Ok(event) => event,
                Err(e) => return Err(self.source_failed(e).await),
            };
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
        self.abort_interrupted().await?;
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
                dead_letters: Vec::new(),
                skipped: 0,
                copying: false,
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
        open.copying = true;
        let mut waiting: VecDeque<ConsumerRecord> = records
            .into_iter()
            .filter(|record| {
                let already = self
                    .committed
                    .get(&record.topic_partition())
                    .is_some_and(|&c| record.offset < c);
                if already {
                    // Already copied and committed by this loop: the consumer re-delivered it.
                    tracing::warn!(topic = %record.topic, record.partition, record.offset, "skipping a record this loop already committed");
                }
                !already
            })
            .collect();
        let mut running: VecDeque<Transforming<Fut>> = VecDeque::new();
        // Each turn starts transforms up to the bound, waits for the oldest (polling all of
        // them meanwhile) and sends its output: consumption order is kept whatever order the
        // transforms finish in. Bounded by the poll's records.
        loop {
            while running.len() < self.concurrency
                && let Some(record) = waiting.pop_front()
            {
                let original = matches!(self.on_error, TransformErrorPolicy::DeadLetter { .. })
                    .then(|| record.clone());
                running.push_back(Transforming {
                    at: PartitionOffset::new(record.topic_partition(), record.offset),
                    leader_epoch: record.leader_epoch,
                    original,
                    state: TransformState::Running(Box::pin((self.transform)(record))),
                });
            }
            if running.is_empty() {
                break;
            }
            let output = poll_fn(|cx| {
                for t in running.iter_mut() {
                    if let TransformState::Running(future) = &mut t.state
                        && let Poll::Ready(output) = future.as_mut().poll(cx)
                    {
                        t.state = TransformState::Done(Some(output));
                    }
                }
                match running.front_mut().map(|t| &mut t.state) {
                    Some(TransformState::Done(output)) => Poll::Ready(output.take()),
                    _ => Poll::Pending,
                }
            })
            .await;
            let Some(done) = running.pop_front() else {
                break;
            };
            let Some(output) = output else {
                break;
            };
            self.deliver(
                done.at,
                done.leader_epoch,
                done.original,
                output.into_outputs(),
            )
            .await?;
        }
        if let Some(open) = self.open.as_mut() {
            open.copying = false;
        }
        Ok(())
    }

    /// Puts what the transform made of the record at `at` into the open transaction: its
    /// output, or what the policy says for a failure.
    async fn deliver(
        &mut self,
        at: PartitionOffset,
        leader_epoch: Option<i32>,
        original: Option<ConsumerRecord>,
        outputs: std::result::Result<Vec<Record>, String>,
    ) -> Result<()> {
        let (outputs, dead) = match outputs {
            Ok(outputs) => (outputs, None),
            Err(message) => match (&self.on_error, original) {
                (TransformErrorPolicy::Skip, _) => {
                    tracing::debug!(%at.partition.topic, at.partition.partition, at.offset, %message, "transform failed: skipping the record");
                    if let Some(open) = self.open.as_mut() {
                        open.skipped += 1;
                    }
                    (Vec::new(), None)
                }
                (TransformErrorPolicy::DeadLetter { topic }, Some(original)) => {
                    tracing::debug!(%at.partition.topic, at.partition.partition, at.offset, %message, "transform failed: dead-lettering the record");
                    (Vec::new(), Some(dead_letter(topic, original, &message)))
                }
                _ => {
                    let error = Error::Transform {
                        partition: at.partition.clone(),
                        offset: at.offset,
                        message,
                    };
                    let Some(open) = self.open.take() else {
                        return Err(error);
                    };
                    return Err(self.fail(open, error, &[]).await);
                }
            },
        };
        let mut acks = Vec::with_capacity(outputs.len());
        for output in outputs {
            acks.push(self.send(output).await?);
        }
        let dead_ack = match dead {
            Some(letter) => Some(self.send(letter).await?),
            None => None,
        };
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        open.pending
            .processed_in_epoch(at.partition.clone(), at.offset, leader_epoch);
        if let Some(ack) = dead_ack {
            open.dead_letters.push((at.clone(), ack));
        }
        open.copies.push((at, acks));
        Ok(())
    }

    /// Sends `record` in the open transaction; a failure aborts it (and rewinds).
    async fn send(&mut self, record: Record) -> Result<DeliveryFuture> {
        match self.producer.send(record).await {
            Ok(ack) => Ok(ack),
            Err(e) => {
                let Some(open) = self.open.take() else {
                    return Err(e);
                };
                Err(self.fail(open, e, &[]).await)
            }
        }
    }

    /// A step dropped while it copied left the open transaction half-filled: abort it and
    /// rewind, so its input is copied again whole.
    async fn abort_interrupted(&mut self) -> Result<()> {
        let Some(open) = self.open.take_if(|open| open.copying) else {
            return Ok(());
        };
        tracing::warn!(
            records = open.copies.len(),
            "a step was dropped while copying: aborting its transaction"
        );
        self.abort_and_rewind(open, &[]).await
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
        let commit_began = self.consumer.now();
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
        let commit_latency = self.consumer.now().saturating_sub(commit_began);
        let records_in = open.copies.len() as u64;
        let records_out = open.copies.iter().map(|(_, acks)| acks.len() as u64).sum();
        let dead_lettered = open.dead_letters.len() as u64;
        self.counters.transactions_committed += 1;
        self.counters.records_skipped += open.skipped;
        self.counters.records_dead_lettered += dead_lettered;
        self.counters.records_in += records_in;
        self.counters.records_out += records_out;
        let observer = &self.observer;
        observer.committed.increment(1);
        observer.commit_latency.record(commit_latency as f64);
        observer.records_in.increment(records_in);
        observer.records_out.increment(records_out);
        observer.records_skipped.increment(open.skipped);
        observer.records_dead_lettered.increment(dead_lettered);
        if let Some(lag) = self.consumer.source_lag() {
            observer.source_lag.set(lag as f64);
        }
        // The delivery futures resolve once the transaction is committed (the commit flushed
        // every record): their offsets are exact (rule O1).
        let mut copies = Vec::with_capacity(open.copies.len());
        for (source, acks) in open.copies {
            copies.push(RecordCopy {
                source,
                destinations: delivered(acks).await?,
            });
        }
        let mut dead_letters = Vec::with_capacity(open.dead_letters.len());
        for (source, ack) in open.dead_letters {
            dead_letters.push(RecordCopy {
                source,
                destinations: delivered([ack]).await?,
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
        Ok(CommittedTransaction {
            copies,
            consumed,
            dead_letters,
        })
    }

    /// An error from the consumer's poll. A log truncated under a position (KIP-320) means
    /// records the open transaction copied may no longer be in the source, and that the
    /// source's offsets from the divergent one on hold other records: the transaction is
    /// aborted and rewound, the truncated partition to where the transaction began reading it
    /// or to the divergent offset, whichever comes first (without an open transaction the
    /// consumer's own position stands: the divergent offset, or a seek under
    /// `auto.offset.reset=none`), and what this loop committed of that partition no longer
    /// counts as copied, so the new records are copied. Any other error leaves the open
    /// transaction as it is. The error is handed back either way.
    async fn source_failed(&mut self, error: Error) -> Error {
        let Error::LogTruncation {
            partition,
            divergent_offset,
            ..
        } = &error
        else {
            return error;
        };
        let partition = partition.clone();
        let divergent = *divergent_offset;
        self.committed.remove(&partition);
        let Some(open) = self.open.take() else {
            return error;
        };
        let from = open.from.get(&partition).copied();
        tracing::warn!(%partition.topic, partition.partition, ?divergent, records = open.copies.len(), "the source log was truncated: aborting the open copy transaction");
        if let Err(abort_error) = self
            .abort_and_rewind(open, std::slice::from_ref(&partition))
            .await
        {
            return abort_error;
        }
        if let (Some(from), Some(divergent)) = (from, divergent)
            && self.consumer.assignment().contains(&partition)
            && let Err(seek_error) = self.consumer.seek(&partition, from.min(divergent))
        {
            return seek_error;
        }
        error
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
        self.counters.transactions_aborted += 1;
        self.observer.aborted.increment(1);
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
    Fut: Future,
    Fut::Output: TransformOutput,
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

/// Where the records of `acks` landed, once their transaction committed (rule O1).
async fn delivered(acks: impl IntoIterator<Item = DeliveryFuture>) -> Result<Vec<PartitionOffset>> {
    let mut destinations = Vec::new();
    for ack in acks {
        let meta = ack.await?;
        destinations.push(PartitionOffset::new(
            TopicPartition::new(meta.topic, meta.partition),
            meta.offset,
        ));
    }
    Ok(destinations)
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
