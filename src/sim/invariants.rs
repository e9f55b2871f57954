//! The invariant checkers. They watch three things: the batches put on the wire (P1–P3, P5),
//! the partition logs as the model broker appends to them, and each delivery future as it
//! resolves (P6, P8, O1). They run after every step of a run and once at its end; the first
//! broken invariant ends the run with a message naming the rule.

use std::collections::BTreeMap;

use crate::engine::Counters;
use crate::engine::completion::BatchOutcome;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::{SealedBatch, increment_sequence};
use crate::types::{Millis, TopicPartition};

use super::cluster::LogRecord;

/// A broken invariant, in words.
pub type Violation = String;

/// How a record's delivery ended, as its future reported it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Acknowledged at this offset (-1: acknowledged without offset).
    Acked(i64),
    /// Failed, and not in the log.
    Failed(Error),
    /// Failed, and maybe in the log.
    Indeterminate(Error),
    /// `send` refused it: it never entered the producer.
    Refused(Error),
}

/// What is known about one record of the workload.
#[derive(Debug, Clone)]
pub struct Fate {
    /// Where it was sent.
    pub partition: TopicPartition,
    /// When `send` accepted it.
    pub sent_ms: Option<Millis>,
    /// When its future resolved.
    pub resolved_ms: Option<Millis>,
    /// How.
    pub outcome: Option<Outcome>,
}

/// One batch of a Produce request the engine asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireBatch {
    /// When it was written.
    pub at: Millis,
    /// Its partition.
    pub partition: TopicPartition,
    /// Stamped producer id.
    pub producer_id: i64,
    /// Stamped epoch.
    pub epoch: i16,
    /// Stamped base sequence.
    pub base_sequence: i32,
    /// Its last sequence.
    pub last_sequence: i32,
    /// Whether the request carrying it was written (`false`: it failed before the write).
    pub written: bool,
}

/// Sequences sent so far under one (producer id, epoch, partition).
#[derive(Debug, Default)]
struct SequenceTrack {
    /// The sequence the next new batch must start at.
    next: i32,
    /// Batches sent, by base sequence: (last sequence, fingerprint of the records).
    sent: BTreeMap<i32, (i32, u64)>,
}

/// The checker's state for one run.
#[derive(Debug)]
pub struct Checker {
    /// `delivery.timeout.ms + request.timeout.ms`: every future resolves within this of its
    /// send, plus any clock jump in between (P6, P9).
    delivery_bound_ms: Millis,
    fates: Vec<Fate>,
    /// Where each record is in the logs (a second copy is a violation at once).
    located: BTreeMap<u64, (TopicPartition, i64)>,
    sequences: BTreeMap<(i64, i16, TopicPartition), SequenceTrack>,
    /// Sequences a run starts (producer id, epoch, partition) at instead of 0.
    starts: BTreeMap<(i64, i16, TopicPartition), i32>,
    /// The newest epoch put on the wire per producer id, and the producer ids in the order
    /// they were first used.
    epochs: BTreeMap<i64, i16>,
    latest_producer_id: Option<i64>,
    /// Acknowledged records per partition: record id (= send order) → offset.
    acked: BTreeMap<TopicPartition, BTreeMap<u64, i64>>,
    tally: Counters,
    wire: Vec<WireBatch>,
    /// Every record before this one is resolved.
    oldest_unresolved: usize,
    /// Clock jumps so far: (when, by how much).
    jumps: Vec<(Millis, Millis)>,
}

/// FNV-1a: a fixed, dependency-free hash (for fingerprints and the trace digest).
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The FNV-1a starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

impl Checker {
    /// A checker for `partitions[i]` being record `i`'s partition.
    pub fn new(partitions: Vec<TopicPartition>, delivery_bound_ms: Millis) -> Self {
        Self {
            delivery_bound_ms,
            fates: partitions
                .into_iter()
                .map(|partition| Fate {
                    partition,
                    sent_ms: None,
                    resolved_ms: None,
                    outcome: None,
                })
                .collect(),
            located: BTreeMap::new(),
            sequences: BTreeMap::new(),
            starts: BTreeMap::new(),
            epochs: BTreeMap::new(),
            latest_producer_id: None,
            acked: BTreeMap::new(),
            tally: Counters::default(),
            wire: Vec::new(),
            oldest_unresolved: 0,
            jumps: Vec::new(),
        }
    }

    /// The fates so far.
    pub fn fates(&self) -> &[Fate] {
        &self.fates
    }

    /// Every batch the engine put in a Produce request, in order.
    pub fn wire(&self) -> &[WireBatch] {
        &self.wire
    }

    /// Declares that `(producer_id, epoch, partition)` starts at `sequence` rather than 0.
    pub fn expect_start(
        &mut self,
        producer_id: i64,
        epoch: i16,
        partition: TopicPartition,
        sequence: i32,
    ) {
        self.starts
            .insert((producer_id, epoch, partition), sequence);
    }

    /// Virtual time jumped by `ms` at `at` (the process was paused): deadlines of records
    /// sent before move by as much.
    pub fn on_jump(&mut self, at: Millis, ms: Millis) {
        self.jumps.push((at, ms));
    }

    /// The clock jumps since `sent`.
    /// Clock jumps since `sent`: they move every deadline of what was waiting then.
    pub fn allowance(&self, sent: Millis) -> Millis {
        self.jumps
            .iter()
            .filter(|(at, _)| *at >= sent)
            .map(|(_, ms)| ms)
            .sum()
    }

    /// `send` refused record `id` (a transactional producer outside a transaction, or one
    /// that must abort or failed): it never entered the producer.
    pub fn on_refused(&mut self, id: u64, error: Error) {
        if let Some(fate) = self.fate_mut(id) {
            fate.outcome = Some(Outcome::Refused(error));
        }
    }

    /// Whether record `id` was appended to a log.
    pub fn is_located(&self, id: u64) -> bool {
        self.located.contains_key(&id)
    }

    /// `send` accepted record `id` at `now`.
    pub fn on_sent(&mut self, id: u64, now: Millis) {
        if let Some(fate) = self.fate_mut(id) {
            fate.sent_ms = Some(now);
        }
    }

    fn fate_mut(&mut self, id: u64) -> Option<&mut Fate> {
        self.fates.get_mut(usize::try_from(id).ok()?)
    }

    /// A Produce request the engine asked for (`written`: whether the simulated driver
    /// wrote it). Never two identities in one request (P2). Sequences are judged as the engine
    /// stamps them, written or not, since a driver may learn that a request was not written
    /// only after later ones went out (those get OUT_OF_ORDER_SEQUENCE_NUMBER and are retried,
    /// P4): per (producer id, epoch, partition) contiguous from 0, a re-send repeating a whole
    /// earlier batch (P1–P3); no older epoch or producer id after a newer one, so after a bump
    /// no partition continues the old sequence (P5, KAFKA-12152).
    pub fn on_request(
        &mut self,
        batches: &[(TopicPartition, SealedBatch)],
        now: Millis,
        written: bool,
    ) -> Result<(), Violation> {
        let mut identities = batches
            .iter()
            .map(|(_, b)| (b.producer_id(), b.producer_epoch()));
        if let Some(first) = identities.next()
            && let Some(other) = identities.find(|i| *i != first)
        {
            return Err(format!(
                "a Produce request mixes (producer id, epoch) {first:?} and {other:?} (P2)"
            ));
        }
        for (tp, batch) in batches {
            let pid = batch.producer_id();
            let epoch = batch.producer_epoch();
            let base = batch.base_sequence();
            let last = batch.last_sequence();
            self.wire.push(WireBatch {
                at: now,
                partition: tp.clone(),
                producer_id: pid,
                epoch,
                base_sequence: base,
                last_sequence: last,
                written,
            });
            if pid < 0 || epoch < 0 || base < 0 {
                return Err(format!(
                    "{tp:?}: an unstamped batch in a Produce request ({pid}, {epoch}, {base}) (P1)"
                ));
            }
            match self.latest_producer_id {
                Some(latest) if latest != pid && self.epochs.contains_key(&pid) => {
                    return Err(format!(
                        "{tp:?}: producer id {pid} used again after {latest} (P2)"
                    ));
                }
                _ => self.latest_producer_id = Some(pid),
            }
            let newest = self.epochs.entry(pid).or_insert(epoch);
            if epoch < *newest {
                return Err(format!(
                    "{tp:?}: epoch {epoch} stamped after epoch {newest} of producer {pid} (P2, P5)"
                ));
            }
            *newest = epoch;
            let key = (pid, epoch, tp.clone());
            let start = self.starts.get(&key).copied().unwrap_or(0);
            let fingerprint = fnv1a(fnv1a(FNV_OFFSET, batch.body()), &last.to_be_bytes());
            let track = self.sequences.entry(key).or_insert_with(|| SequenceTrack {
                next: start,
                sent: BTreeMap::new(),
            });
            if track.sent.is_empty() && base != start {
                return Err(format!(
                    "{tp:?}: the first batch of producer {pid} epoch {epoch} starts at sequence {base}, not {start} (P3, P5: KAFKA-12152)"
                ));
            }
            if base == track.next {
                track.next = increment_sequence(last, 1);
            } else if let Some(&(earlier_last, earlier)) = track.sent.get(&base) {
                if (earlier_last, earlier) != (last, fingerprint) {
                    // The same sequence for other records: only sound if the earlier batch
                    // never reached the log, which the broker model verifies (it flags a
                    // duplicate whose records differ). Later sequences are re-taken.
                    track.sent.retain(|&b, _| b < base);
                    track.next = increment_sequence(last, 1);
                }
            } else {
                return Err(format!(
                    "{tp:?}: producer {pid} epoch {epoch} stamped sequences {base}..={last} but the next new sequence is {} (P1, P3: no gap, no overlap)",
                    track.next
                ));
            }
            track.sent.insert(base, (last, fingerprint));
        }
        Ok(())
    }

    /// Records the broker appended to `partition`: no record twice anywhere, none that was
    /// reported as definitely failed, each in the partition it was sent to.
    pub fn on_append(
        &mut self,
        partition: &TopicPartition,
        records: &[LogRecord],
    ) -> Result<(), Violation> {
        for record in records {
            let id = record.record_id;
            let Some(fate) = usize::try_from(id).ok().and_then(|i| self.fates.get(i)) else {
                return Err(format!("{partition:?}: unknown record id {id} in the log"));
            };
            if fate.partition != *partition {
                return Err(format!(
                    "record {id} sent to {:?} was appended to {partition:?}",
                    fate.partition
                ));
            }
            if let Some(Outcome::Failed(error) | Outcome::Refused(error)) = &fate.outcome {
                return Err(format!(
                    "record {id} was reported failed for good ({error}) and is now in {partition:?} at offset {} (P6, KAFKA-13574)",
                    record.offset
                ));
            }
            if let Some((tp, offset)) = self.located.get(&id) {
                return Err(format!(
                    "record {id} is in the log twice: {tp:?} offset {offset} and offset {} (duplicate: P2/P5)",
                    record.offset
                ));
            }
            self.located.insert(id, (partition.clone(), record.offset));
        }
        Ok(())
    }

    /// Record `id`'s future resolved at `now` with `outcome` (it is the record at `index` of
    /// its batch).
    pub fn on_resolved(
        &mut self,
        id: u64,
        index: i32,
        outcome: &BatchOutcome,
        now: Millis,
    ) -> Result<(), Violation> {
        let located = self.located.get(&id).cloned();
        let sent = usize::try_from(id)
            .ok()
            .and_then(|i| self.fates.get(i))
            .and_then(|f| f.sent_ms)
            .unwrap_or(0);
        let bound = self.delivery_bound_ms + self.allowance(sent);
        let Some(fate) = usize::try_from(id).ok().and_then(|i| self.fates.get_mut(i)) else {
            return Err(format!("a future for unknown record {id}"));
        };
        if fate.outcome.is_some() {
            return Err(format!("record {id} resolved twice (P6)"));
        }
        if now > sent + bound {
            return Err(format!(
                "record {id} resolved {} ms after its send, more than delivery.timeout.ms + request.timeout.ms = {bound} (P6, P9)",
                now - sent
            ));
        }
        fate.resolved_ms = Some(now);
        let outcome = match outcome {
            Ok(ack) => {
                let offset = if ack.base_offset >= 0 {
                    ack.base_offset + i64::from(index)
                } else {
                    -1
                };
                match &located {
                    Some((_, at)) if offset < 0 || *at == offset => {}
                    Some((tp, at)) => {
                        return Err(format!(
                            "record {id} acknowledged at offset {offset} but it is at {tp:?} offset {at} (O1)"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "record {id} acknowledged (offset {offset}) but not in the log (P6: acked record missing)"
                        ));
                    }
                }
                self.tally.records_acked += 1;
                Outcome::Acked(offset)
            }
            Err(error) => {
                // A fenced transactional producer fails everything with the fencing error (T5).
                let fenced = match error {
                    Error::Fatal(_) => true,
                    Error::Indeterminate { cause } => matches!(**cause, Error::Fatal(_)),
                    _ => false,
                };
                if !fenced
                    && let Some(code) = error.code()
                    && matches!(
                        code,
                        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
                            | ErrorCode::DUPLICATE_SEQUENCE_NUMBER
                            | ErrorCode::UNKNOWN_PRODUCER_ID
                            | ErrorCode::INVALID_PRODUCER_EPOCH
                    )
                {
                    return Err(format!(
                        "record {id} failed with {code}: sequence bookkeeping reached the user (P4, P7; Sarama #1430)"
                    ));
                }
                if error.is_indeterminate() {
                    self.tally.records_indeterminate += 1;
                    Outcome::Indeterminate(error.clone())
                } else {
                    if let Some((tp, at)) = &located {
                        return Err(format!(
                            "record {id} reported failed for good ({error}) but it is in {tp:?} at offset {at} (P6, KAFKA-13574)"
                        ));
                    }
                    self.tally.records_failed += 1;
                    Outcome::Failed(error.clone())
                }
            }
        };
        if let Outcome::Acked(offset) = outcome
            && offset >= 0
        {
            let acked = self.acked.entry(fate.partition.clone()).or_default();
            if let Some((earlier, at)) = acked.range(..id).next_back()
                && *at >= offset
            {
                return Err(format!(
                    "record {id} acknowledged at offset {offset}, not after record {earlier} sent before it (offset {at}): send order broken (P4)"
                ));
            }
            if let Some((later, at)) = acked.range(id + 1..).next()
                && *at <= offset
            {
                return Err(format!(
                    "record {id} acknowledged at offset {offset}, not before record {later} sent after it (offset {at}): send order broken (P4)"
                ));
            }
            acked.insert(id, offset);
        }
        fate.outcome = Some(outcome);
        Ok(())
    }

    /// The engine's counters agree with what the futures reported (P8).
    pub fn check_counters(&self, counters: &Counters) -> Result<(), Violation> {
        let ours = (
            self.tally.records_acked,
            self.tally.records_failed,
            self.tally.records_indeterminate,
        );
        let theirs = (
            counters.records_acked,
            counters.records_failed,
            counters.records_indeterminate,
        );
        if ours != theirs {
            return Err(format!(
                "counters (acked, failed, indeterminate) = {theirs:?} but the futures say {ours:?} (P8)"
            ));
        }
        Ok(())
    }

    /// No record still waiting longer than its bound at `now` (P9). Records are sent in id
    /// order and a clock jump never moves a bound past a later send's, so the oldest
    /// unresolved record has the nearest deadline.
    pub fn check_deadlines(&mut self, now: Millis) -> Result<(), Violation> {
        while self
            .fates
            .get(self.oldest_unresolved)
            .is_some_and(|f| f.outcome.is_some())
        {
            self.oldest_unresolved += 1;
        }
        let Some(fate) = self.fates.get(self.oldest_unresolved) else {
            return Ok(());
        };
        if let Some(sent) = fate.sent_ms
            && now > sent + self.delivery_bound_ms + self.allowance(sent)
        {
            return Err(format!(
                "record {} sent at {sent} ms still unresolved at {now} ms (P6, P9: no silent stall)",
                self.oldest_unresolved
            ));
        }
        Ok(())
    }

    /// The end of a run: every record sent and resolved; re-checks every outcome against the
    /// final logs.
    pub fn at_end(&self) -> Result<(), Violation> {
        for (id, fate) in self.fates.iter().enumerate() {
            let id = u64::try_from(id).unwrap_or(u64::MAX);
            let located = self.located.get(&id);
            match (&fate.outcome, located) {
                (None, _) => return Err(format!("record {id} never resolved (P6)")),
                (Some(Outcome::Acked(_)), None) => {
                    return Err(format!("record {id} acknowledged but not in the log (P6)"));
                }
                (Some(Outcome::Failed(e) | Outcome::Refused(e)), Some((tp, at))) => {
                    return Err(format!(
                        "record {id} failed for good ({e}) but is in {tp:?} at offset {at} (P6)"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}
