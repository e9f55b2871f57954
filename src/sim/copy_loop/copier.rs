//! One copier of the copy loop: a KIP-848 member (the real
//! [`ConsumerMember`](crate::consumer::membership::kip848::ConsumerMember)) and a transactional
//! producer (the real [`Engine`]) in one application loop, as DESIGN "Consuming for
//! exactly-once pipelines" prescribes: poll (acknowledging the revocations handed out at the
//! previous poll, heartbeating, taking events), copy the owned partitions' records from their
//! positions into the open transaction, add the positions with `send_offsets_to_transaction`
//! (the member's `group_metadata()`), commit every N records. A `Revoked` commits before the
//! next poll gives the partitions up; a `Lost` aborts; after an abort every position is
//! fetched again from the committed offsets.

use std::collections::BTreeMap;

use crate::consumer::membership::kip848::ConsumerMember;
use crate::consumer::membership::{MembershipEvent, TopicView};
use crate::engine::accumulator::Accumulator;
use crate::engine::transaction::{OffsetToCommit, TxnCall, TxnState};
use crate::engine::{CallId, Engine, Millis, TopicPartition};
use crate::error::Error;

/// The call the copier is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Init,
    Offsets,
    Commit,
    Abort,
}

/// What one step of the copier wants from the world.
#[derive(Debug, Default)]
pub(super) struct Wants {
    /// The copier did something (the engine should run before time moves on).
    pub(super) acted: bool,
    /// A heartbeat to send.
    pub(super) heartbeat:
        Option<crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatRequest>,
    /// The producer failed fatally: restart the copier.
    pub(super) restart: bool,
    /// Lines for the trace.
    pub(super) notes: Vec<String>,
}

/// What the copier reads: the source log and the group's stable committed offsets.
pub(super) trait Source {
    /// The offsets of the source partition's records, ascending.
    fn offsets(&self, partition: i32) -> &[i64];
    /// The committed offset of `partition` if it is stable (no open transaction holds offsets
    /// for it: KIP-447 `require_stable`); `Err(())` while one does.
    fn stable_offset(&self, partition: i32) -> Result<i64, ()>;
}

/// One copier instance (an incarnation: a crash drops it, a restart makes a new one).
pub(super) struct Copier {
    pub(super) engine: Engine,
    pub(super) acc: Accumulator,
    pub(super) member: ConsumerMember,
    /// The sequence number of the heartbeat in flight.
    pub(super) heartbeat: Option<u64>,
    /// Owned partitions and the next source offset to copy (`None`: fetch the committed one).
    positions: BTreeMap<i32, Option<i64>>,
    running: Option<(CallId, Kind)>,
    initialised: bool,
    in_txn: bool,
    txn_records: usize,
    commit_every: usize,
    /// Records copied per poll at most: a transaction stays open across polls, so events
    /// (revocations, losses) come while it is open, as in a real copy loop.
    per_poll: usize,
    /// Revoked partitions to give up at the next poll.
    revoked: Vec<i32>,
    /// The copier is ending its transaction because of a revocation or loss.
    ending_for_event: bool,
    source_topic: String,
    destination_topic: String,
    /// Commits and aborts that succeeded.
    pub(super) commits: u64,
    pub(super) aborts: u64,
}

impl Copier {
    pub(super) fn new(
        engine: Engine,
        acc: Accumulator,
        member: ConsumerMember,
        commit_every: usize,
        per_poll: usize,
        source_topic: &str,
        destination_topic: &str,
    ) -> Self {
        Self {
            engine,
            acc,
            member,
            heartbeat: None,
            positions: BTreeMap::new(),
            running: None,
            initialised: false,
            in_txn: false,
            txn_records: 0,
            commit_every: commit_every.max(1),
            per_poll: per_poll.max(1),
            revoked: Vec::new(),
            ending_for_event: false,
            source_topic: source_topic.to_string(),
            destination_topic: destination_topic.to_string(),
            commits: 0,
            aborts: 0,
        }
    }

    /// Whether the copier holds no open transaction and runs no call.
    pub(super) fn quiet(&self) -> bool {
        self.initialised && self.running.is_none() && !self.in_txn
    }

    /// Where the copier is, for a failure report.
    pub(super) fn describe(&self) -> String {
        format!(
            "initialised {} running {:?} in_txn {} ({} records) positions {:?} revoked {:?} state {:?} heartbeat {:?} owned {:?}",
            self.initialised,
            self.running,
            self.in_txn,
            self.txn_records,
            self.positions,
            self.revoked,
            self.engine.transaction_state(),
            self.heartbeat,
            self.member.owned()
        )
    }

    /// One step of the application at `now` (`at` turns virtual time into the membership's
    /// clock).
    pub(super) fn step(
        &mut self,
        now: Millis,
        at: std::time::Instant,
        view: &dyn TopicView,
        source: &dyn Source,
    ) -> Wants {
        let mut wants = Wants::default();
        for (id, result) in self.engine.take_finished_calls() {
            wants.acted = true;
            self.on_finished(id, result, now, &mut wants);
        }
        if wants.restart || self.running.is_some() {
            return wants;
        }
        if !self.initialised {
            self.start(Kind::Init, TxnCall::Init, now, &mut wants);
            return wants;
        }
        if self.ending_for_event {
            // The revocation's or loss's transaction has ended: the poll may go on.
            self.ending_for_event = false;
        }
        // ---- poll ----
        if self.heartbeat.is_some() {
            // Nothing is handed to the user while a heartbeat is in flight (kip848 docs).
            return wants;
        }
        if !self.revoked.is_empty() {
            self.member.on_poll(at);
            for p in std::mem::take(&mut self.revoked) {
                self.positions.remove(&p);
            }
            wants.notes.push("poll: revocation acknowledged".into());
        }
        if let Some(request) = self.member.poll_request(at) {
            wants.acted = true;
            wants.heartbeat = Some(request);
            return wants;
        }
        while let Some(event) = self.member.next_event(view) {
            wants.acted = true;
            wants.notes.push(format!("event {event:?}"));
            match event {
                MembershipEvent::Assigned(partitions) => {
                    for tp in partitions {
                        self.positions.insert(tp.partition, None);
                    }
                }
                MembershipEvent::Revoked(partitions) => {
                    self.revoked = partitions.iter().map(|tp| tp.partition).collect();
                    if self.in_txn {
                        self.ending_for_event = true;
                        self.send_offsets(now, &mut wants);
                    }
                    return wants;
                }
                MembershipEvent::Lost(partitions) => {
                    for tp in &partitions {
                        self.positions.remove(&tp.partition);
                    }
                    if self.in_txn {
                        self.ending_for_event = true;
                        self.start(Kind::Abort, TxnCall::Abort, now, &mut wants);
                    }
                    return wants;
                }
            }
        }
        // ---- work ----
        self.copy(now, source, &mut wants);
        wants
    }

    fn copy(&mut self, now: Millis, source: &dyn Source, wants: &mut Wants) {
        let fetchable: Vec<i32> = self
            .member
            .fetchable()
            .iter()
            .map(|tp| tp.partition)
            .collect();
        let mut more = false;
        let mut this_poll = 0;
        for p in fetchable {
            let Some(position) = self.positions.get(&p).copied() else {
                continue;
            };
            let position = match position {
                Some(position) => position,
                None => match source.stable_offset(p) {
                    Ok(committed) => {
                        self.positions.insert(p, Some(committed));
                        wants.notes.push(format!("fetch src-{p} from {committed}"));
                        committed
                    }
                    Err(()) => continue,
                },
            };
            let offsets = source.offsets(p);
            let start = offsets.partition_point(|&o| o < position);
            let destination = TopicPartition::new(self.destination_topic.as_str(), p);
            let mut next = position;
            for &offset in offsets.iter().skip(start) {
                if self.txn_records >= self.commit_every || this_poll >= self.per_poll {
                    more = true;
                    break;
                }
                if !self.in_txn {
                    if let Err(e) = self.engine.begin_transaction(now) {
                        wants.notes.push(format!("begin refused: {e}"));
                        wants.restart = e.is_fatal();
                        return;
                    }
                    self.in_txn = true;
                }
                let id = record_id(p, offset);
                let timestamp = i64::try_from(now).unwrap_or(0);
                if self
                    .acc
                    .append(
                        &destination,
                        timestamp,
                        None,
                        Some(&id.to_be_bytes()),
                        &[],
                        now,
                    )
                    .is_err()
                {
                    more = true;
                    break;
                }
                wants.acted = true;
                self.txn_records += 1;
                this_poll += 1;
                next = offset + 1;
            }
            self.positions.insert(p, Some(next));
        }
        if self.in_txn && (self.txn_records >= self.commit_every || !more) {
            self.send_offsets(now, wants);
        }
    }

    fn send_offsets(&mut self, now: Millis, wants: &mut Wants) {
        let offsets = self
            .positions
            .iter()
            .filter_map(|(&p, position)| {
                position.map(|offset| OffsetToCommit {
                    partition: TopicPartition::new(self.source_topic.as_str(), p),
                    offset,
                    metadata: None,
                })
            })
            .collect();
        let group = self.member.group_metadata();
        self.start(
            Kind::Offsets,
            TxnCall::SendOffsets { offsets, group },
            now,
            wants,
        );
    }

    fn start(&mut self, kind: Kind, call: TxnCall, now: Millis, wants: &mut Wants) {
        wants.acted = true;
        wants.notes.push(format!("call {}", call.name()));
        match self.engine.start_call(call, now) {
            Ok(id) => self.running = Some((id, kind)),
            Err(e) => {
                wants.notes.push(format!("{kind:?} refused: {e}"));
                match (kind, self.engine.transaction_state()) {
                    (Kind::Commit | Kind::Offsets, Some(TxnState::AbortableError)) => {
                        self.start(Kind::Abort, TxnCall::Abort, now, wants);
                    }
                    _ => wants.restart = true,
                }
            }
        }
    }

    fn on_finished(
        &mut self,
        id: CallId,
        result: Result<(), Error>,
        now: Millis,
        wants: &mut Wants,
    ) {
        let Some((_, kind)) = self.running.take_if(|(running, _)| *running == id) else {
            return;
        };
        wants.notes.push(format!("{kind:?} -> {result:?}"));
        let fatal = self.engine.transaction_state() == Some(&TxnState::FatalError);
        if fatal {
            wants.restart = true;
            return;
        }
        match (kind, result) {
            (Kind::Init, Ok(())) => self.initialised = true,
            (Kind::Init, Err(_)) => self.start(Kind::Init, TxnCall::Init, now, wants),
            (Kind::Offsets, Ok(())) => self.start(Kind::Commit, TxnCall::Commit, now, wants),
            (Kind::Offsets, Err(_)) => self.start(Kind::Abort, TxnCall::Abort, now, wants),
            (Kind::Commit, Ok(())) => {
                self.commits += 1;
                self.in_txn = false;
                self.txn_records = 0;
            }
            (Kind::Commit, Err(_)) => {
                if self.engine.transaction_state() == Some(&TxnState::AbortableError) {
                    self.start(Kind::Abort, TxnCall::Abort, now, wants);
                } else {
                    // Timed out: only the same call may learn the outcome (T1, T4).
                    self.start(Kind::Commit, TxnCall::Commit, now, wants);
                }
            }
            (Kind::Abort, Ok(())) => {
                self.aborts += 1;
                self.in_txn = false;
                self.txn_records = 0;
                for position in self.positions.values_mut() {
                    *position = None;
                }
            }
            (Kind::Abort, Err(_)) => self.start(Kind::Abort, TxnCall::Abort, now, wants),
        }
    }
}

/// The id a copied record carries: its source partition and offset.
pub fn record_id(partition: i32, offset: i64) -> u64 {
    (u64::from(partition.unsigned_abs()) << 32) | (u64::try_from(offset).unwrap_or(0) & 0xFFFF_FFFF)
}
