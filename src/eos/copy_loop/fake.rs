//! A small consumer and transactional producer for the copy loop's unit tests: enough of
//! [`crate::Consumer`] and [`crate::Producer`] to stop the loop at every await point it has
//! (each can be held `Pending`) and to take its transactional calls through the rules the
//! real producer keeps (T1, T4: after a commit or abort that timed out or whose caller stopped
//! waiting, only the same call is valid, and calling it again gives the outcome). The
//! simulation runs the loop against the real engine; these run it one await point at a time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;

use crate::eos::endpoints::{CommitHold, CopySink, CopySource};
use crate::producer::{BatchAck, BatchCompletion, TxnLedger, TxnState};
use crate::types::{ConsumerGroupMetadata, Millis, OffsetToCommit};
use crate::{ConsumerEvent, ConsumerRecord, DeliveryFuture, Error, Record, Result, TopicPartition};

pub(super) const SOURCE: &str = "src";
pub(super) const DESTINATION: &str = "dst";
/// How many times a call to an unreachable coordinator returns `Pending` before it times out.
const TIMEOUT_POLLS: u32 = 3;

/// A transactional call of the fake producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    SendOffsets,
    Commit,
    Abort,
}

/// Where the loop waits, when a fake future returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waiting {
    Poll,
    Transform,
    Send,
    Hold,
    Coordinator(Call),
}

/// Everything both fakes share (single-threaded, borrowed only inside a poll).
#[derive(Debug)]
pub(super) struct World {
    pub(super) now: Millis,
    /// Per source partition, how many records it holds (offsets 0..n).
    pub(super) source: Vec<i64>,
    pub(super) positions: BTreeMap<i32, i64>,
    per_poll: usize,
    /// What the loop's last fake future waits for.
    pub(super) waiting: Option<Waiting>,
    /// Held `Pending` while set.
    poll_blocked: bool,
    transform_blocked: bool,
    send_blocked: bool,
    hold_blocked: bool,
    /// The calls the coordinator does not answer: they wait, then time out.
    unreachable: Vec<Call>,
    /// The call the coordinator answers PRODUCER_FENCED (another producer took the
    /// transactional id); the producer is fatally failed from then on (`fenced`).
    pub(super) fence_at: Option<Call>,
    fenced: bool,
    /// A commit applied leaves its records' deliveries pending until this is cleared.
    pub(super) deliveries_held: bool,
    /// The next poll finds this partition's log truncated at this offset (KIP-320): the
    /// consumer moves there by itself (`auto.offset.reset` set) and the poll fails with
    /// `Error::LogTruncation`. The fake's log after it holds the same records.
    pub(super) truncate: Option<(i32, i64)>,
    /// The next `begin_transaction` fails with this error (a producer that cannot begin one
    /// now), once.
    pub(super) refuse_begin: Option<Error>,
    held: Vec<(Arc<BatchCompletion>, i64)>,
    // ---- the producer ----
    state: TxnState,
    begun: u64,
    last_ended: Option<(u64, bool)>,
    /// A commit or abort whose caller timed out or stopped waiting: only it is valid.
    pending: Option<Call>,
    /// The open transaction's records (destination partition, value, completion) and offsets.
    records: Vec<(i32, Bytes, Arc<BatchCompletion>)>,
    offsets: BTreeMap<i32, i64>,
    /// What read_committed sees: per destination partition, the committed values.
    pub(super) destination: BTreeMap<i32, Vec<Bytes>>,
    /// The group's committed offsets.
    pub(super) committed: BTreeMap<i32, i64>,
    pub(super) commits: u64,
    pub(super) aborts: u64,
}

impl World {
    /// `partitions` source partitions of `records` each, all assigned, polled `per_poll` at
    /// a time, with an initialised producer.
    pub(super) fn new(partitions: i32, records: i64, per_poll: usize) -> Rc<RefCell<Self>> {
        Rc::new(RefCell::new(Self {
            now: 0,
            source: vec![records; partitions as usize],
            positions: (0..partitions).map(|p| (p, 0)).collect(),
            per_poll,
            waiting: None,
            poll_blocked: false,
            transform_blocked: false,
            send_blocked: false,
            hold_blocked: false,
            unreachable: Vec::new(),
            fence_at: None,
            fenced: false,
            deliveries_held: false,
            truncate: None,
            refuse_begin: None,
            held: Vec::new(),
            state: TxnState::Ready,
            begun: 0,
            last_ended: None,
            pending: None,
            records: Vec::new(),
            offsets: BTreeMap::new(),
            destination: BTreeMap::new(),
            committed: BTreeMap::new(),
            commits: 0,
            aborts: 0,
        }))
    }

    fn ledger(&self) -> TxnLedger {
        TxnLedger {
            state: self.state.clone(),
            begun: self.begun,
            last_ended: self.last_ended,
        }
    }

    /// Holds the loop `Pending` at `at` (`on`), or lets it go.
    pub(super) fn hold(&mut self, at: Waiting, on: bool) {
        match at {
            Waiting::Poll => self.poll_blocked = on,
            Waiting::Transform => self.transform_blocked = on,
            Waiting::Send => self.send_blocked = on,
            Waiting::Hold => self.hold_blocked = on,
            Waiting::Coordinator(call) => {
                self.unreachable.retain(|c| *c != call);
                if on {
                    self.unreachable.push(call);
                }
            }
        }
    }

    /// `begin_transaction`, as the loop or someone behind its back calls it.
    pub(super) fn begin(&mut self) -> Result<()> {
        if self.pending.is_some() || self.state != TxnState::Ready {
            return Err(Error::InvalidState(format!(
                "begin_transaction in state {:?}",
                self.state
            )));
        }
        self.state = TxnState::InTransaction;
        self.begun += 1;
        self.records.clear();
        self.offsets.clear();
        Ok(())
    }

    /// Whether `call` may start (or take over the pending one) now (T1, T4).
    fn check(&mut self, call: Call) -> Result<()> {
        if let Some(pending) = self.pending {
            return if pending == call {
                Ok(())
            } else {
                Err(Error::InvalidState(format!(
                    "{pending:?} timed out; only it is valid"
                )))
            };
        }
        let valid = match call {
            Call::SendOffsets | Call::Commit => self.state == TxnState::InTransaction,
            Call::Abort => matches!(
                self.state,
                TxnState::InTransaction | TxnState::AbortableError
            ),
        };
        if !valid {
            return Err(Error::InvalidState(format!(
                "{call:?} in state {:?}",
                self.state
            )));
        }
        match call {
            Call::Commit => self.state = TxnState::Committing,
            Call::Abort => self.state = TxnState::Aborting,
            Call::SendOffsets => {}
        }
        Ok(())
    }

    /// What `call` does once the coordinator answers.
    fn apply(&mut self, call: Call, offsets: &[OffsetToCommit]) {
        self.pending = None;
        match call {
            Call::SendOffsets => {
                for o in offsets {
                    self.offsets.insert(o.partition.partition, o.offset);
                }
            }
            Call::Commit => {
                for (partition, value, completion) in std::mem::take(&mut self.records) {
                    let log = self.destination.entry(partition).or_default();
                    let offset = log.len() as i64;
                    log.push(value);
                    if self.deliveries_held {
                        self.held.push((completion, offset));
                    } else {
                        acknowledge(&completion, offset);
                    }
                }
                self.committed.extend(std::mem::take(&mut self.offsets));
                self.state = TxnState::Ready;
                self.last_ended = Some((self.begun, true));
                self.commits += 1;
            }
            Call::Abort => {
                for (_, _, completion) in std::mem::take(&mut self.records) {
                    completion.complete(Err(Error::TransactionAborted));
                }
                self.offsets.clear();
                self.state = TxnState::Ready;
                self.last_ended = Some((self.begun, false));
                self.aborts += 1;
            }
        }
    }

    /// The deliveries of committed records held back go out.
    pub(super) fn release_deliveries(&mut self) {
        self.deliveries_held = false;
        for (completion, offset) in std::mem::take(&mut self.held) {
            acknowledge(&completion, offset);
        }
    }

    /// The source records not yet copied exactly once: what the destination must hold.
    pub(super) fn expected(&self) -> BTreeMap<i32, Vec<Bytes>> {
        (0..self.source.len() as i32)
            .map(|p| {
                let n = self.source[p as usize];
                (p, (0..n).map(|o| value(p, o)).collect())
            })
            .collect()
    }
}

fn acknowledge(completion: &BatchCompletion, offset: i64) {
    completion.complete(Ok(BatchAck {
        base_offset: offset,
        log_append_time: -1,
    }));
}

/// The value of source record `offset` of `partition`, and of its copy.
pub(super) fn value(partition: i32, offset: i64) -> Bytes {
    Bytes::from(format!("{partition}:{offset}"))
}

/// Waits while `blocked` says so, noting `waiting` meanwhile.
async fn unless_blocked(world: &RefCell<World>, waiting: Waiting, blocked: fn(&World) -> bool) {
    poll_fn(|_| {
        let mut world = world.borrow_mut();
        if blocked(&world) {
            world.waiting = Some(waiting);
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
}

/// The fake consumer.
#[derive(Debug)]
pub(super) struct FakeSource(pub(super) Rc<RefCell<World>>);

impl CopySource for FakeSource {
    type Hold = FakeHold;

    fn now(&self) -> Millis {
        self.0.borrow().now
    }

    async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        unless_blocked(&self.0, Waiting::Poll, |w| w.poll_blocked).await;
        let mut world = self.0.borrow_mut();
        if let Some((partition, divergent)) = world.truncate.take() {
            let position = world.positions.insert(partition, divergent).unwrap_or(0);
            return Err(Error::LogTruncation {
                partition: TopicPartition::new(SOURCE, partition),
                offset: position,
                divergent_offset: Some(divergent),
                reset: true,
            });
        }
        let mut records = Vec::new();
        let topic: Arc<str> = Arc::from(SOURCE);
        for p in 0..world.source.len() as i32 {
            let end = world.source[p as usize];
            let Some(&position) = world.positions.get(&p) else {
                continue;
            };
            let take = (end - position).min((world.per_poll - records.len()) as i64);
            for offset in position..position + take {
                records.push(ConsumerRecord {
                    topic: Arc::clone(&topic),
                    partition: p,
                    offset,
                    timestamp: 0,
                    timestamp_type: crate::TimestampType::CreateTime,
                    key: None,
                    value: Some(value(p, offset)),
                    headers: Vec::new(),
                    leader_epoch: None,
                });
            }
            world.positions.insert(p, position + take);
        }
        if records.is_empty() {
            // Nothing arrives within the timeout: the clock moves past it.
            world.now += crate::types::millis(timeout);
            return Ok(None);
        }
        world.now += 1;
        Ok(Some(ConsumerEvent::Records(records)))
    }

    fn assignment(&self) -> Vec<TopicPartition> {
        self.0
            .borrow()
            .positions
            .keys()
            .map(|&p| TopicPartition::new(SOURCE, p))
            .collect()
    }

    fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        self.0
            .borrow_mut()
            .positions
            .insert(partition.partition, offset);
        Ok(())
    }

    async fn hold_generation(&self) -> FakeHold {
        unless_blocked(&self.0, Waiting::Hold, |w| w.hold_blocked).await;
        FakeHold(ConsumerGroupMetadata::new("group", 1, "member", None))
    }

    fn metric_labels(&self) -> (String, Option<String>) {
        ("fake".into(), Some("group".into()))
    }

    fn source_lag(&self) -> Option<i64> {
        None
    }

    fn caught_up(&self) -> bool {
        let world = self.0.borrow();
        !world.positions.is_empty()
            && world
                .positions
                .iter()
                .all(|(&p, &position)| position >= world.source[p as usize])
    }
}

/// The fake consumer's generation hold.
pub(super) struct FakeHold(ConsumerGroupMetadata);

impl CommitHold for FakeHold {
    fn metadata(&self) -> &ConsumerGroupMetadata {
        &self.0
    }

    fn refused(&self, _error: &Error) -> bool {
        false
    }
}

/// The fake transactional producer.
#[derive(Debug)]
pub(super) struct FakeSink(pub(super) Rc<RefCell<World>>);

/// A transactional call of the fake producer in progress: dropped before its outcome, a
/// commit or abort goes on (only it is valid next), offsets are abandoned.
struct InProgress<'a> {
    world: &'a RefCell<World>,
    call: Option<Call>,
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        if let Some(call @ (Call::Commit | Call::Abort)) = self.call {
            self.world.borrow_mut().pending = Some(call);
        }
    }
}

impl FakeSink {
    async fn call(&self, call: Call, offsets: Vec<OffsetToCommit>) -> Result<()> {
        {
            let mut world = self.0.borrow_mut();
            world.fenced |= world.fence_at == Some(call);
            if world.fenced {
                return Err(Error::broker(crate::ErrorCode::PRODUCER_FENCED));
            }
            world.check(call)?;
        }
        let mut progress = InProgress {
            world: &self.0,
            call: Some(call),
        };
        let mut waits = 0;
        let outcome = poll_fn(|_| {
            let mut world = self.0.borrow_mut();
            if !world.unreachable.contains(&call) {
                world.apply(call, &offsets);
                return Poll::Ready(Ok(()));
            }
            if waits >= TIMEOUT_POLLS {
                return Poll::Ready(Err(Error::Timeout(format!(
                    "{call:?} did not complete within max.block.ms"
                ))));
            }
            waits += 1;
            world.waiting = Some(Waiting::Coordinator(call));
            Poll::Pending
        })
        .await;
        // A timed-out commit or abort goes on, as a dropped one; offsets are abandoned.
        if outcome.is_ok() || call == Call::SendOffsets {
            progress.call = None;
        }
        outcome
    }
}

impl CopySink for FakeSink {
    fn begin_transaction(&self) -> Result<()> {
        let mut world = self.0.borrow_mut();
        if let Some(refused) = world.refuse_begin.take() {
            return Err(refused);
        }
        world.begin()
    }

    async fn send(&self, record: Record) -> Result<DeliveryFuture> {
        unless_blocked(&self.0, Waiting::Send, |w| w.send_blocked).await;
        let mut world = self.0.borrow_mut();
        if world.state != TxnState::InTransaction {
            return Err(Error::InvalidState(format!(
                "send in state {:?}",
                world.state
            )));
        }
        let partition = record.partition.unwrap_or(0);
        let completion = BatchCompletion::new(TopicPartition::new(DESTINATION, partition));
        world.records.push((
            partition,
            record.value.unwrap_or_default(),
            Arc::clone(&completion),
        ));
        Ok(DeliveryFuture::new(completion, 0, 0))
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        _group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        self.call(Call::SendOffsets, offsets).await
    }

    async fn commit_transaction(&self) -> Result<()> {
        self.call(Call::Commit, Vec::new()).await
    }

    async fn abort_transaction(&self) -> Result<()> {
        self.call(Call::Abort, Vec::new()).await
    }

    fn transaction_ledger(&self) -> Option<TxnLedger> {
        Some(self.0.borrow().ledger())
    }
}

/// The transform the tests copy with.
pub(super) type Transform =
    Box<dyn FnMut(ConsumerRecord) -> Pin<Box<dyn Future<Output = Vec<Record>>>>>;

/// A transform copying each record to the same partition of the destination, waiting while
/// the world blocks transforms.
pub(super) fn mirror(world: Rc<RefCell<World>>) -> Transform {
    Box::new(move |record: ConsumerRecord| {
        let world = Rc::clone(&world);
        Box::pin(async move {
            unless_blocked(&world, Waiting::Transform, |w| w.transform_blocked).await;
            vec![
                Record::to(DESTINATION)
                    .partition(record.partition)
                    .value(record.value.unwrap_or_default()),
            ]
        })
    })
}
