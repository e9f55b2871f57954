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
//! Where the transaction stands is the loop's own state (rule C1, `stage.rs`): each step of
//! ending it is written down before the await that carries it out, and every `step`, `commit`
//! and `close` finishes what an earlier call left (a commit or abort that timed out, offsets
//! not sent, a half-copied transaction) before it reads anything (`copy_loop/ending.rs`).
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

mod ending;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

use super::copies::{CommittedTransaction, PartitionOffset};
use super::endpoints::{CopySink, CopySource};
use super::metrics::CopyLoopObserver;
use super::stage::{EndStep, OpenTransaction, Stage};
use super::transform::sealed::Sealed;
use super::transform::{CopyLoopCounters, TransformErrorPolicy, TransformOutput, dead_letter};
use crate::types::millis;
use crate::{
    Consumer, ConsumerEvent, ConsumerRecord, DeliveryFuture, Error, Producer, Record, Result,
    TopicPartition,
};

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
    /// See [`CopyLoop::commit_when_caught_up`].
    commit_when_caught_up: bool,
    on_error: TransformErrorPolicy,
    concurrency: usize,
    counters: CopyLoopCounters,
    observer: CopyLoopObserver,
    /// Where the loop's transaction stands (rule C1), resolved before anything else.
    stage: Stage,
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
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
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
            commit_when_caught_up: true,
            on_error: TransformErrorPolicy::Fail,
            concurrency: 1,
            counters: CopyLoopCounters::default(),
            stage: Stage::Idle,
            committed: BTreeMap::new(),
        }
    }

    /// Commits once a transaction has consumed `records` records (at least 1), or when
    /// `interval` has passed since it began, whichever comes first; or earlier when the input
    /// runs dry: once the consumer has read everything it can ([`Consumer::caught_up`]) and
    /// nothing more arrives for a tenth of `interval`. Waiting out the interval then would only
    /// hold the output back (a `read_committed` reader of the destination sees it once the
    /// transaction commits, KIP-98) and hold the destination's last stable offset with it.
    pub fn commit_every(mut self, records: usize, interval: Duration) -> Self {
        self.commit_records = records.max(1);
        self.commit_interval = interval;
        self
    }

    /// Whether an open transaction commits early once the consumer is caught up (default
    /// `true`, see [`CopyLoop::commit_every`]). `false` holds every transaction until its
    /// record count or its interval, for a caller that wants transactions of a fixed span.
    pub fn commit_when_caught_up(mut self, early: bool) -> Self {
        self.commit_when_caught_up = early;
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

    /// The producer (for its metrics or transaction state). The loop owns its transactions:
    /// one begun, committed or aborted on it behind the loop's back is noticed by the next
    /// step, which rewinds the loop's input rather than committing over it (see
    /// [`CopyLoop::step`]).
    pub fn producer(&self) -> &P {
        &self.producer
    }

    /// Copies until the next commit and returns what the committed transaction did; or
    /// returns `Ok(None)` when no record arrived within the commit interval.
    ///
    /// Before anything else a step ends what an earlier call left unfinished (rule C1): a
    /// commit or an abort that timed out is called again until it gives the outcome (a
    /// commit found to have landed is returned by this step), offsets that were not sent are
    /// sent again, a transaction a dropped step left half-copied is aborted and its input
    /// rewound.
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
    /// While the transaction coordinator does not answer, the commit or abort of the
    /// transaction cannot finish within the producer's `max.block.ms`: the step returns a
    /// retriable [`Error::Timeout`] saying what it waits for, and the next step asks again
    /// (it polls nothing until the transaction has ended). Such a step takes about
    /// `max.block.ms`.
    ///
    /// A transform that failed under [`TransformErrorPolicy::Fail`] ends the step the same
    /// way, with [`Error::Transform`].
    ///
    /// The loop owns its producer's transactions: one begun, committed or aborted on
    /// [`CopyLoop::producer`] (or a clone of it) behind the loop's back is noticed by the next
    /// step, which rewinds the loop's input instead of committing offsets whose output may not
    /// have been written, ends whatever transaction it finds open, and returns
    /// [`Error::InvalidState`] saying so.
    ///
    /// Cancel safety: the future may be dropped at any await point (a `tokio::time::timeout`
    /// around it, a `select!`). No input is lost and no record copied twice: a drop while the
    /// step waits for records loses nothing; a drop while a poll's records are transformed or
    /// sent makes the next step abort the open transaction and rewind its input; a drop while
    /// the transaction's offsets are being sent, committed or aborted, or its delivery
    /// futures read, leaves the end of the transaction to the next step (or
    /// [`CopyLoop::commit`], or [`CopyLoop::close`]), which finishes it first and returns the
    /// committed transaction if it committed.
    pub async fn step(&mut self) -> Result<Option<CommittedTransaction>> {
        if let Some(resolved) = self.resolve().await? {
            return Ok(Some(resolved));
        }
        let idle_until = self
            .consumer
            .now()
            .saturating_add(millis(self.commit_interval));
        // The source had nothing more when the poll began (see `commit_every`): a poll that
        // brings nothing then ends the transaction.
        let mut lingering = false;
        loop {
            let wait = match &self.stage {
                Stage::Open(open) => {
                    let age = Duration::from_millis(self.consumer.now().saturating_sub(open.began));
                    if open.copies.len() >= self.commit_records || age >= self.commit_interval {
                        self.begin_end(EndStep::SendOffsets, Vec::new());
                        return self.end(None).await;
                    }
                    let left = self.commit_interval - age;
                    lingering = self.commit_when_caught_up && self.consumer.caught_up();
                    if lingering {
                        left.min(self.caught_up_linger())
                    } else {
                        left
                    }
                }
                // Idle (an ending left by this step was returned from it).
                _ => {
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
                    if matches!(self.stage, Stage::Open(_)) {
                        // The partitions are given up once the transaction ended.
                        self.begin_end(EndStep::SendOffsets, partitions);
                        let outcome = self.end(None).await;
                        if outcome.as_ref().map_or(true, Option::is_some) {
                            return outcome;
                        }
                    } else {
                        for p in &partitions {
                            self.committed.remove(p);
                        }
                    }
                }
                Some(ConsumerEvent::Lost(partitions)) => {
                    for p in &partitions {
                        self.committed.remove(p);
                    }
                    if let Stage::Open(open) = &mut self.stage {
                        open.pending.revoke(&partitions);
                        tracing::warn!(
                            lost = ?partitions,
                            records = open.copies.len(),
                            "partitions lost: aborting the open copy transaction"
                        );
                        self.begin_end(EndStep::Abort, partitions);
                        self.end(None).await?;
                    }
                }
                None if lingering && matches!(self.stage, Stage::Open(_)) => {
                    tracing::trace!("the source is caught up: committing early");
                    self.begin_end(EndStep::SendOffsets, Vec::new());
                    return self.end(None).await;
                }
                None => {}
            }
        }
    }

    /// How long an open transaction waits for more input once the source has none: a tenth
    /// of the commit interval (at least 1 ms).
    fn caught_up_linger(&self) -> Duration {
        (self.commit_interval / 10).max(Duration::from_millis(1))
    }

    /// Ends the open transaction now, without polling: commits it, or when that fails aborts
    /// it and rewinds its input (as [`CopyLoop::step`] does), after finishing what an earlier
    /// call left unfinished. `Ok(None)` when none is open.
    ///
    /// # Errors
    ///
    /// As for [`CopyLoop::step`]: the error that ended the transaction, after the abort, or
    /// the retriable timeout of a commit or abort still without outcome.
    ///
    /// Cancel safety: as [`CopyLoop::step`]'s.
    pub async fn commit(&mut self) -> Result<Option<CommittedTransaction>> {
        if let Some(resolved) = self.resolve().await? {
            return Ok(Some(resolved));
        }
        if !matches!(self.stage, Stage::Open(_)) {
            return Ok(None);
        }
        self.begin_end(EndStep::SendOffsets, Vec::new());
        self.end(None).await
    }

    /// The open transaction, while it is being filled.
    fn open_mut(&mut self) -> Option<&mut OpenTransaction> {
        match &mut self.stage {
            Stage::Open(open) => Some(open),
            _ => None,
        }
    }

    /// Sends one poll's records through the transform into the open transaction.
    async fn copy(&mut self, records: Vec<ConsumerRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if matches!(self.stage, Stage::Idle) {
            if let Err(e) = self.producer.begin_transaction() {
                // Nothing of the poll is copied: its records are read again.
                self.rewind_poll(&records)?;
                return Err(e);
            }
            let number = self
                .producer
                .transaction_ledger()
                .map_or(0, |ledger| ledger.begun);
            self.stage = Stage::Open(OpenTransaction::new(number, self.consumer.now()));
        }
        let committed = &self.committed;
        let Stage::Open(open) = &mut self.stage else {
            // A step polls only with no transaction or its own open (rule C1).
            self.rewind_poll(&records)?;
            return Err(Error::InvalidState(
                "the copy loop polled while its transaction was ending".into(),
            ));
        };
        // Where the transaction begins reading each partition, noted before any record is
        // processed, so a failure half-way through the poll rewinds all of it. A partition
        // this loop committed before begins at that commit (markers in between have no
        // records); a fresh one at its first record. A poll hands a partition's records out
        // together, so each run of one partition looks it up once.
        let mut run: Option<(TopicPartition, Option<i64>)> = None;
        let mut waiting: VecDeque<ConsumerRecord> = VecDeque::with_capacity(records.len());
        for record in records {
            let same_run = run
                .as_ref()
                .is_some_and(|(partition, _)| record.is_of(partition));
            if !same_run {
                let partition = record.topic_partition();
                let done = committed.get(&partition).copied();
                open.from
                    .entry(partition.clone())
                    .or_insert(done.unwrap_or(record.offset));
                run = Some((partition, done));
            }
            if run
                .as_ref()
                .and_then(|(_, done)| *done)
                .is_some_and(|done| record.offset < done)
            {
                // Already copied and committed by this loop: the consumer re-delivered it.
                tracing::warn!(topic = %record.topic, record.partition, record.offset, "skipping a record this loop already committed");
                continue;
            }
            waiting.push_back(record);
        }
        open.copying = true;
        let processing = std::time::Instant::now();
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
        if let Some(open) = self.open_mut() {
            open.copying = false;
        }
        self.observer
            .process_duration
            .record(processing.elapsed().as_secs_f64());
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
                    if let Some(open) = self.open_mut() {
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
                    return Err(self.fail(error).await);
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
        let Some(open) = self.open_mut() else {
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

    /// An error from the consumer's poll. A log truncated under a position (KIP-320) means
    /// records the open transaction copied may no longer be in the source, and that the
    /// source's offsets from the divergent one on hold other records: the transaction is
    /// aborted and rewound, the truncated partition to where the transaction began reading it
    /// or to the divergent offset, whichever comes first (without an open transaction, or
    /// without a divergent offset, the consumer's own position stands: the divergent offset,
    /// a reset, or a seek under `auto.offset.reset=none`), and what this loop committed of
    /// that partition no longer counts as copied, so the new records are copied. The rewind
    /// is part of the transaction's ending (rule C1), so an abort that must be finished by a
    /// later step still rewinds there. Any other error leaves the open transaction as it is.
    /// The error is handed back either way.
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
        let Some(open) = self.open_mut() else {
            return error;
        };
        match (open.from.get(&partition).copied(), divergent) {
            (Some(from), Some(divergent)) => {
                open.from.insert(partition.clone(), from.min(divergent));
            }
            _ => {
                open.from.remove(&partition);
            }
        }
        tracing::warn!(%partition.topic, partition.partition, ?divergent, records = open.copies.len(), "the source log was truncated: aborting the open copy transaction");
        self.begin_end(EndStep::Abort, Vec::new());
        match self.end(None).await {
            Err(abort_error) => abort_error,
            Ok(_) => error,
        }
    }

    /// Sends `record` in the open transaction; a failure aborts it (and rewinds).
    async fn send(&mut self, record: Record) -> Result<DeliveryFuture> {
        match self.producer.send(record).await {
            Ok(ack) => Ok(ack),
            Err(e) => Err(self.fail(e).await),
        }
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
