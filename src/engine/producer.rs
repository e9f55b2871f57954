//! The idempotent producer's state machine: which batch goes out when, stamped with what, and
//! what each answer means for it (rules P1–P9 of ARCHITECTURE.md).

use std::collections::{BTreeMap, HashMap};

use tracing::{error, info, warn};

use super::accumulator::Accumulator;
use super::backoff::RetryBackoff;
use super::completion::BatchOutcome;
use super::metrics::DeliveryMetrics;
use super::partition::{PartitionState, ProducerBatch, WireState};
use super::transaction::{TransactionConfig, TransactionManager};
use super::{Action, Event, ProducerIdentity, RequestId, RequestIds};
use crate::error::{Error, ErrorChain};
use crate::protocol::error_code::ErrorCode;
use crate::reachability::Reachability;
use crate::types::{BrokerId, Millis, TopicPartition};

mod answers;
mod dispatch;
mod split;
mod transactional;

/// The engine's settings (the delivery-related part of the producer configuration).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `max.in.flight.requests.per.connection`, at most 5: the broker remembers the last five
    /// batches per producer and partition, so more could not be de-duplicated (P4).
    pub max_in_flight: usize,
    /// `retries`: how many times a batch is re-sent at most.
    pub retries: u32,
    /// `retry.backoff.ms`: the first retry's delay; it doubles per attempt, with jitter.
    pub retry_backoff_ms: Millis,
    /// `retry.backoff.max.ms`: the cap of that delay.
    pub retry_backoff_max_ms: Millis,
    /// `delivery.timeout.ms`: a record is resolved within this (plus one request timeout).
    pub delivery_timeout_ms: Millis,
    /// `request.timeout.ms`: an unanswered request is given up after this.
    pub request_timeout_ms: Millis,
    /// `produce.request.max.bytes`: the most batch bytes put in one Produce request (a
    /// request always carries at least one batch; a batch itself is bounded by
    /// `max.request.size` in the accumulator).
    pub produce_request_max_bytes: usize,
    /// Least time between two metadata refreshes the engine asks for.
    pub metadata_refresh_backoff_ms: Millis,
    /// Set for a transactional producer.
    pub transaction: Option<TransactionConfig>,
    /// `enable.idempotence`. Off only by explicit opt-out (with `acks=0` or `acks=1`):
    /// batches then carry no producer id, epoch or sequence (-1, as in the Java client), no
    /// epoch is ever bumped, and a retry may write a batch twice or out of order, as the
    /// user chose.
    pub idempotent: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 5,
            retries: u32::MAX,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            delivery_timeout_ms: 120_000,
            request_timeout_ms: 30_000,
            produce_request_max_bytes: 16 * 1024 * 1024,
            metadata_refresh_backoff_ms: 100,
            transaction: None,
            idempotent: true,
        }
    }
}

/// Counters that move only on outcomes the broker confirmed, or on decisions the engine took
/// (rule P8): nothing here counts an attempt as a success.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Records the broker acknowledged.
    pub records_acked: u64,
    /// Records whose delivery failed and that are not in the log.
    pub records_failed: u64,
    /// Records whose delivery failed but that may be in the log.
    pub records_indeterminate: u64,
    /// Batches sent again after a failed or unanswered attempt.
    pub batch_retries: u64,
    /// Epoch bumps (including moves to a new producer id).
    pub epoch_bumps: u64,
    /// Batches split in two after the broker rejected them as too large.
    pub batch_splits: u64,
    /// The current producer id (-1 before the first InitProducerId answer).
    pub producer_id: i64,
    /// The current epoch (-1 before the first InitProducerId answer).
    pub epoch: i16,
}

#[derive(Debug)]
enum Outstanding {
    Produce {
        broker: BrokerId,
        sent_ms: Millis,
        partitions: Vec<TopicPartition>,
        /// Records in the request's batches.
        records: u64,
    },
    InitProducerId {
        sent_ms: Millis,
    },
}

/// The idempotent producer engine. See the module documentation of `crate::engine`.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    identity: Option<ProducerIdentity>,
    /// No InitProducerId before this time (backoff after a failed one).
    identity_retry_at: Millis,
    identity_attempts: u32,
    /// Whether InitProducerId gets answered, to log a failing streak once.
    identity_streak: Reachability,
    /// Whether each broker answers produce requests, to log a failing streak once per broker.
    produce_streaks: BTreeMap<BrokerId, Reachability>,
    /// Why the next identity must differ from the current one, if it must (P5, P7).
    bump_reason: Option<&'static str>,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// The engine's own requests awaiting an answer (the transaction manager keeps its own).
    outstanding: HashMap<RequestId, Outstanding>,
    requests: RequestIds,
    metadata_wanted: bool,
    metadata_requested_at: Option<Millis>,
    flushing: bool,
    fatal: Option<Error>,
    retry_backoff: RetryBackoff,
    tally: Tally,
    /// Brokers a quota throttled, and until when nothing is sent to them (KIP-219).
    throttled_until: HashMap<BrokerId, Millis>,
    actions: Vec<Action>,
    /// The transactional state, for a producer with a `transactional.id`.
    txn: Option<TransactionManager>,
}

/// What the engine counted and measured of resolved deliveries: kept together because a
/// batch's resolution moves both, from places that hold other fields of the engine borrowed.
#[derive(Debug)]
struct Tally {
    counters: Counters,
    delivery: DeliveryMetrics,
}

impl Engine {
    /// A new engine. `seed` drives the retry jitter, so a simulation seed replays exactly.
    pub fn new(config: EngineConfig, seed: u64) -> Self {
        let txn = config.transaction.clone().map(TransactionManager::new);
        // Without idempotence there is no producer id to ask for: batches go out at once,
        // stamped "no producer" (-1).
        let identity = (!config.idempotent).then_some(ProducerIdentity {
            producer_id: -1,
            epoch: -1,
        });
        let retry_backoff =
            RetryBackoff::new(config.retry_backoff_ms, config.retry_backoff_max_ms, seed);
        Self {
            txn,
            config,
            identity,
            identity_retry_at: 0,
            identity_attempts: 0,
            identity_streak: Reachability::default(),
            produce_streaks: BTreeMap::new(),
            bump_reason: None,
            partitions: BTreeMap::new(),
            outstanding: HashMap::new(),
            requests: RequestIds::default(),
            metadata_wanted: false,
            metadata_requested_at: None,
            flushing: false,
            fatal: None,
            retry_backoff,
            tally: Tally {
                counters: Counters {
                    producer_id: -1,
                    epoch: -1,
                    ..Counters::default()
                },
                delivery: DeliveryMetrics::default(),
            },
            throttled_until: HashMap::new(),
            actions: Vec::new(),
        }
    }

    /// The configuration.
    #[cfg(any(test, feature = "internals"))]
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Confirmed-outcome counters and the current identity.
    pub fn counters(&self) -> &Counters {
        &self.tally.counters
    }

    /// Latencies, sizes, throttling and the recent ack rate (P8: confirmed outcomes only).
    pub fn metrics(&self) -> &DeliveryMetrics {
        &self.tally.delivery
    }

    /// Publishes the engine's observations (request latency, batch size, ...) through the
    /// `metrics` facade labelled with `client_id`.
    pub fn observe_as(&mut self, client_id: &str) {
        self.tally.delivery.observe_as(client_id);
    }

    /// The address (`host:port`) metadata gives `broker`, for the `server.address` and
    /// `server.port` of its observations.
    pub fn broker_address(&mut self, broker: BrokerId, address: &str) {
        self.tally.delivery.broker_address(broker, address);
    }

    /// Produce requests awaiting an answer, per broker.
    pub fn in_flight_per_broker(&self) -> BTreeMap<BrokerId, usize> {
        let mut in_flight = BTreeMap::new();
        for o in self.outstanding.values() {
            if let Outstanding::Produce { broker, .. } = o {
                *in_flight.entry(*broker).or_default() += 1;
            }
        }
        in_flight
    }

    /// The producer id and epoch batches are stamped with now, once there is one.
    #[cfg(any(test, feature = "internals"))]
    pub fn identity(&self) -> Option<ProducerIdentity> {
        self.identity
    }

    /// The error that made the producer unusable, if one did.
    pub fn fatal_error(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// Closes every open batch at the next [`Engine::poll`] regardless of linger, until
    /// [`Engine::is_idle`]; used by `flush` and `close`.
    pub fn begin_flush(&mut self) {
        self.flushing = true;
    }

    /// Whether every record handed to the engine is resolved and nothing waits anywhere.
    pub fn is_idle(&self, acc: &Accumulator) -> bool {
        !acc.has_pending() && self.partitions.values().all(PartitionState::is_idle)
    }

    /// Simulation only: batches taken out of the accumulator that are not resolved yet (a
    /// run's end checks none is left, P6).
    #[cfg(feature = "sim")]
    pub fn unresolved_batches(&self) -> usize {
        self.partitions
            .values()
            .map(|p| p.queued.len() + p.unacked.len())
            .sum()
    }

    /// Simulation only: makes `partition`'s next batch take `sequence`, so a run can start
    /// near `i32::MAX` and cross the wrap (franz-go #216) without sending 2^31 records. The
    /// simulation gives the model broker the matching producer state.
    #[cfg(feature = "sim")]
    pub fn set_next_sequence(&mut self, partition: TopicPartition, sequence: i32) {
        self.partitions.entry(partition).or_default().next_sequence = sequence;
    }

    /// Takes an event into account. Actions it leads to come out of the next [`Engine::poll`].
    pub fn handle(&mut self, event: Event, now: Millis, acc: &Accumulator) {
        match event {
            Event::Leaders(leaders) => {
                for (tp, leader) in leaders {
                    self.partitions.entry(tp).or_default().leader = leader;
                }
            }
            Event::ProducerId { request, result } => {
                // Only the answer to the InitProducerId still outstanding counts. One the engine
                // gave up on (request timeout) and asked again for can still arrive; installing
                // it would switch the producer id under batches stamped with the other one,
                // without a sequence reset (P2, P3, P9). Found by the simulation (regression
                // test `late_init_producer_id_answer` in tests/simulation.rs).
                if let Some(Outstanding::InitProducerId { .. }) = self.outstanding.remove(&request)
                {
                    self.on_producer_id(request, result, now, acc);
                }
            }
            Event::ProduceResponse {
                request,
                partitions,
                throttle_ms,
            } => {
                if let Some(Outstanding::Produce {
                    broker,
                    sent_ms,
                    records,
                    ..
                }) = self.outstanding.remove(&request)
                {
                    self.produce_streaks
                        .entry(broker)
                        .or_default()
                        .log_success(format_args!("produce requests to broker {broker}"));
                    self.tally.delivery.answered(
                        broker,
                        now.saturating_sub(sent_ms),
                        records,
                        throttle_ms,
                    );
                    if throttle_ms > 0 {
                        // KIP-219: the broker answered at once and expects nothing more from
                        // us until the throttle time passed (or it mutes the connection).
                        self.throttled_until.insert(broker, now + throttle_ms);
                    }
                    for response in partitions {
                        self.on_partition_response(request, response, now, acc);
                    }
                    // A partition the broker left out of its answer was not handled: treat it
                    // as unanswered (conservative: it may have been written).
                    self.fail_request_batches(request, true, now);
                }
            }
            Event::RequestFailed {
                request,
                written,
                error,
            } => match self.outstanding.remove(&request) {
                Some(Outstanding::Produce {
                    broker, partitions, ..
                }) => {
                    self.produce_streaks.entry(broker).or_default().log_failure(
                        format_args!(
                            "produce request {request} to broker {broker} ({} partitions, \
                             written: {written})",
                            partitions.len()
                        ),
                        &error,
                    );
                    self.fail_request_batches(request, written, now);
                    // No version of the request the broker takes can carry these batches (e.g.
                    // zstd before Produce v7): a retry cannot succeed (T5).
                    if error.code() == Some(ErrorCode::UNSUPPORTED_VERSION) {
                        self.fail_fatally(error, acc);
                        return;
                    }
                    self.want_metadata();
                }
                Some(Outstanding::InitProducerId { .. }) => {
                    self.on_producer_id(request, Err(error), now, acc)
                }
                None => {
                    if self.take_txn_request(request) {
                        self.on_txn_response(request, Err(error), now, acc);
                    }
                }
            },
            Event::Fatal(error) => self.fail_fatally(error, acc),
            Event::Txn { request, result } => {
                if self.take_txn_request(request) {
                    self.on_txn_response(request, result, now, acc);
                }
            }
        }
    }

    fn on_producer_id(
        &mut self,
        request: RequestId,
        result: Result<ProducerIdentity, Error>,
        now: Millis,
        acc: &Accumulator,
    ) {
        self.outstanding.remove(&request);
        match result {
            Ok(identity) => {
                self.identity_streak.log_success("InitProducerId");
                info!(
                    producer_id = identity.producer_id,
                    epoch = identity.epoch,
                    "producer id assigned"
                );
                self.install_identity(identity);
            }
            Err(error) if error.is_fatal() => self.fail_fatally(error, acc),
            Err(error) => {
                self.identity_attempts += 1;
                let delay = self.retry_backoff.delay(self.identity_attempts);
                self.identity_streak.log_failure(
                    format_args!("InitProducerId (next attempt in {delay} ms)"),
                    &error,
                );
                self.identity_retry_at = now + delay;
            }
        }
    }

    fn install_identity(&mut self, identity: ProducerIdentity) {
        self.identity = Some(identity);
        self.identity_attempts = 0;
        self.tally.counters.producer_id = identity.producer_id;
        self.tally.counters.epoch = identity.epoch;
    }

    /// The sequence state of the current identity is broken (a sent batch failed for good or
    /// expired, or the broker disagrees): an idempotent producer bumps its epoch once the old
    /// one drained (P5, P7); a transactional one must abort the transaction (T5).
    fn sequence_broken(&mut self, reason: &'static str) {
        if !self.config.idempotent {
            // No sequences, nothing to repair.
            return;
        }
        if let Some(txn) = &mut self.txn {
            txn.make_abortable(Error::Broker {
                code: ErrorCode::TRANSACTION_ABORTABLE,
                message: Some(reason.to_owned()),
            });
        } else {
            self.bump_reason.get_or_insert(reason);
        }
    }

    fn want_metadata(&mut self) {
        self.metadata_wanted = true;
    }

    /// Resolves a batch: completes its records' futures, returns its memory, counts it.
    fn resolve(tally: &mut Tally, acc: &Accumulator, batch: ProducerBatch, outcome: BatchOutcome) {
        let records = u64::try_from(batch.batch.record_count()).unwrap_or(0);
        let counters = &mut tally.counters;
        match &outcome {
            Ok(_) => counters.records_acked += records,
            Err(e) if e.is_indeterminate() => counters.records_indeterminate += records,
            Err(_) => counters.records_failed += records,
        }
        if let Err(e) = &outcome {
            tally
                .delivery
                .failed(batch.completion.partition(), records, e.type_name());
        }
        acc.release(batch.batch.uncompressed_size_in_bytes());
        batch.spans.resolved(&outcome);
        if let Some(observer) = acc.observer() {
            observer.resolved(
                batch.completion.partition(),
                batch.batch.record_count(),
                &outcome,
            );
        }
        batch.completion.complete(outcome);
    }

    fn fail_fatally(&mut self, error: Error, acc: &Accumulator) {
        // The first fatal error is the one reported (and logged, once); a second one, e.g. the
        // same authentication failure on another link, changes nothing.
        if self.fatal.is_some() {
            return;
        }
        error!(error = %ErrorChain(&error), "producer failed fatally; it is unusable");
        let fatal = Error::Fatal(std::sync::Arc::new(error));
        self.fail_everything(fatal, acc);
        // A transactional call waiting on this producer ends with the fatal error (P9).
        if let Some(txn) = &mut self.txn {
            txn.enter_fatal();
        }
    }

    /// Resolves every record the engine and the accumulator hold because the producer is
    /// going away: the last handle was dropped, or a close ran out of time (P6,
    /// shutdown included). What never went out fails with `error` (not written); what went out
    /// unconfirmed fails as indeterminate. The producer is unusable afterwards.
    pub fn abandon(&mut self, error: Error, acc: &Accumulator) {
        if self.fatal.is_none() {
            self.fail_everything(error, acc);
        }
    }

    /// Makes `error` the producer's last word and resolves everything with it (P6), ending
    /// any transactional call (P9).
    fn fail_everything(&mut self, error: Error, acc: &Accumulator) {
        self.fatal = Some(error.clone());
        for state in self.partitions.values_mut() {
            for batch in state.queued.drain(..).chain(state.unacked.drain(..)) {
                // A batch that went out may be in the log: say so (P6).
                let outcome = if batch.wire.is_some_and(|w| w != WireState::NotWritten) {
                    Err(Error::Indeterminate {
                        cause: std::sync::Arc::new(error.clone()),
                    })
                } else {
                    Err(error.clone())
                };
                Self::resolve(&mut self.tally, acc, batch, outcome);
            }
        }
        self.fail_accumulated(acc, &error);
        if let Some(txn) = &mut self.txn {
            txn.finish_call(Err(error));
        }
    }

    /// Fails every record not yet put on the wire with [`Error::Purged`]: the accumulator's
    /// and the batches waiting for their first dispatch (none holds a sequence, P1). Batches
    /// in flight or awaiting a retry under their identity go on. Returns the records purged.
    /// A transaction that loses records this way can only abort (T4: a commit sees them
    /// failed).
    pub fn purge(&mut self, acc: &Accumulator) -> u64 {
        let before = self.tally.counters.records_failed;
        for state in self.partitions.values_mut() {
            for batch in state.queued.drain(..) {
                Self::resolve(&mut self.tally, acc, batch, Err(Error::Purged));
            }
        }
        self.fail_accumulated(acc, &Error::Purged);
        self.tally.counters.records_failed - before
    }

    /// Fails every record still in the accumulator (never stamped, so never in the log).
    fn fail_accumulated(&mut self, acc: &Accumulator, error: &Error) {
        let taken = acc.take_all();
        let closed = taken.closed.into_iter().map(|closed| {
            let bytes = closed.batch.uncompressed_size_in_bytes();
            let records = closed.batch.record_count();
            (records, bytes, closed.completion, closed.spans)
        });
        let sealing = taken.sealing.into_iter().map(|unsealed| {
            let (records, bytes) = (unsealed.record_count, unsealed.uncompressed_bytes);
            (records, bytes, unsealed.completion, unsealed.spans)
        });
        for (records, bytes, completion, spans) in closed.chain(sealing) {
            spans.failed(error);
            let records = u64::try_from(records).unwrap_or(0);
            self.tally.counters.records_failed += records;
            self.tally
                .delivery
                .failed(completion.partition(), records, error.type_name());
            acc.release(bytes);
            completion.complete(Err(error.clone()));
        }
    }

    /// Runs every decision that is due at `now` and returns the actions for the driver.
    pub fn poll(&mut self, now: Millis, acc: &Accumulator) -> Vec<Action> {
        if self.fatal.is_some() {
            self.fail_fatally_remaining(acc);
            return std::mem::take(&mut self.actions);
        }
        let lingered = acc.lingered_partitions(now);
        let close = self.batches_to_close(now, &lingered);
        for closed in acc.take_ready(self.flushing, |tp| close.contains(tp)) {
            let state = self.partitions.entry(closed.partition).or_default();
            state.queued.push_back(ProducerBatch::new(
                closed.batch,
                closed.completion,
                closed.created_ms,
                closed.spans,
            ));
        }
        self.expire_requests(now, acc);
        let delivery_timeout = self.config.delivery_timeout_ms;
        let idempotent = self.config.idempotent;
        for state in self.partitions.values_mut() {
            if idempotent && state.in_flight() == 0 {
                state.unstamp_unwritten_tail();
            }
            // After a delivery timeout without an acknowledgement the broker may have expired
            // our producer state, so the next batch opens alone again (KAFKA-15591).
            if state.unacked.is_empty() && now.saturating_sub(state.last_ack_ms) >= delivery_timeout
            {
                state.confirmed = false;
            }
        }
        self.expire_batches(now, acc);
        self.maybe_bump(acc);
        self.request_identity(now);
        self.drive_transaction(now, acc);
        self.dispatch(now);
        self.request_metadata(now);
        if self.flushing && self.is_idle(acc) {
            self.flushing = false;
        }
        std::mem::take(&mut self.actions)
    }

    fn fail_fatally_remaining(&mut self, acc: &Accumulator) {
        if let Some(fatal) = self.fatal.clone() {
            self.fail_accumulated(acc, &fatal);
        }
    }

    /// Gives up on requests unanswered for `request.timeout.ms`: their batches become
    /// unresolved and the connection is closed (P9).
    fn expire_requests(&mut self, now: Millis, acc: &Accumulator) {
        let timeout = self.config.request_timeout_ms;
        let mut expired: Vec<RequestId> =
            self.outstanding
                .iter()
                .filter(|(_, o)| match o {
                    Outstanding::Produce { sent_ms, .. }
                    | Outstanding::InitProducerId { sent_ms } => sent_ms + timeout <= now,
                })
                .map(|(&id, _)| id)
                .collect();
        if let Some(txn) = &self.txn {
            expired.extend(txn.expired_requests(now, timeout));
        }
        // HashMap order is random; handle them in a fixed order so a seed replays exactly.
        expired.sort_unstable();
        for request in expired {
            match self.outstanding.remove(&request) {
                Some(Outstanding::Produce { broker, .. }) => {
                    let error = Error::Timeout(format!("no answer within {timeout} ms"));
                    self.produce_streaks.entry(broker).or_default().log_failure(
                        format_args!("produce request {request} to broker {broker}"),
                        &error,
                    );
                    self.fail_request_batches(request, true, now);
                    self.actions.push(Action::Disconnect { broker });
                    self.want_metadata();
                }
                Some(Outstanding::InitProducerId { .. }) => {
                    self.identity_attempts += 1;
                    self.identity_retry_at = now + self.config.retry_backoff_ms;
                }
                None => {
                    if self.take_txn_request(request) {
                        let error = Error::Timeout(format!(
                            "coordinator request unanswered after {timeout} ms"
                        ));
                        self.on_txn_response(request, Err(error), now, acc);
                    }
                }
            }
        }
    }

    /// Fails batches whose `delivery.timeout.ms` has passed or whose `retries` are spent. A
    /// batch still in flight waits for its request to be answered or to time out, so that its
    /// outcome is as precise as it can be. Failing a batch that went out leaves a hole in the
    /// sequence: epoch bump (P5).
    fn expire_batches(&mut self, now: Millis, acc: &Accumulator) {
        let timeout = self.config.delivery_timeout_ms;
        let retries = self.config.retries;
        let mut broken = false;
        for (tp, state) in self.partitions.iter_mut() {
            // A batch refused as certainly not written gave its sequences back and waits at the
            // front of the queue to be stamped again (`unstamp_unwritten_tail`): its attempts
            // count there too, or `retries` would never end it. The queue is in creation
            // order behind it, so the first batch in time stops the walk.
            while let Some(batch) = state.queued.front() {
                if batch.created_ms + timeout > now && batch.attempts <= retries {
                    break;
                }
                let batch = state.queued.pop_front().expect("front exists");
                let error = Error::DeliveryTimeout {
                    elapsed_ms: now - batch.created_ms,
                    indeterminate: false,
                };
                Self::resolve(&mut self.tally, acc, batch, Err(error));
            }
            let mut position = 0;
            while position < state.unacked.len() {
                let batch = &state.unacked[position];
                let out_of_time = batch.created_ms + timeout <= now;
                let out_of_retries = batch.attempts > retries;
                let waiting = matches!(batch.wire, Some(WireState::InFlight(_)));
                if waiting || !(out_of_time || out_of_retries) {
                    position += 1;
                    continue;
                }
                let batch = state
                    .unacked
                    .remove(position)
                    .expect("position is in range");
                let indeterminate = batch.wire == Some(WireState::Unresolved) && !batch.behind_gap;
                warn!(partition = ?tp, base_sequence = batch.batch.base_sequence(), indeterminate, "batch expired");
                // Only a batch certainly not in the log leaves a gap. One that may be there
                // leaves later batches as they are: an unresolved one may be in the log too, and
                // re-stamping it after the bump would write it twice; it fails as indeterminate
                // at the bump instead (P5). Found by the simulation (regression test
                // `expired_unresolved_batch_does_not_orphan_later_ones` in tests/simulation.rs).
                if !indeterminate && self.config.idempotent {
                    state.mark_gap_from(position);
                }
                broken = true;
                let error = Error::DeliveryTimeout {
                    elapsed_ms: now - batch.created_ms,
                    indeterminate,
                };
                Self::resolve(&mut self.tally, acc, batch, Err(error));
            }
        }
        if broken {
            self.sequence_broken("a sent batch expired");
        }
    }

    /// Bumps the epoch once nothing of the old one is in flight or can still be resolved
    /// under it, and resets every partition's sequence (P5, KAFKA-12152): idle partitions
    /// too, since the broker expects sequence 0 of the new epoch everywhere.
    fn maybe_bump(&mut self, acc: &Accumulator) {
        let Some(reason) = self.bump_reason else {
            return;
        };
        let produce_in_flight = self
            .outstanding
            .values()
            .any(|o| matches!(o, Outstanding::Produce { .. }));
        if produce_in_flight || self.partitions.values().any(PartitionState::has_retry) {
            return;
        }
        for (tp, state) in self.partitions.iter_mut() {
            for batch in state.reset_for_new_identity() {
                // It went out under the old identity and its outcome is unknown: re-stamping it
                // could write it twice, so it fails as indeterminate (P5, P6).
                warn!(partition = ?tp, base_sequence = batch.batch.base_sequence(), "unresolved batch failed at epoch bump");
                let error = Error::Indeterminate {
                    cause: std::sync::Arc::new(Error::Timeout(format!(
                        "no answer for this batch before the epoch had to be bumped ({reason})"
                    ))),
                };
                Self::resolve(&mut self.tally, acc, batch, Err(error));
            }
        }
        self.bump_reason = None;
        self.tally.counters.epoch_bumps += 1;
        match self.identity {
            Some(current) if current.epoch < i16::MAX => {
                let next = ProducerIdentity {
                    producer_id: current.producer_id,
                    epoch: current.epoch + 1,
                };
                info!(
                    producer_id = next.producer_id,
                    epoch = next.epoch,
                    reason,
                    "epoch bumped"
                );
                self.install_identity(next);
            }
            _ => {
                // Epoch exhausted (or no identity yet): a new producer id starts at epoch 0.
                info!(reason, "new producer id needed");
                self.identity = None;
            }
        }
    }

    fn request_identity(&mut self, now: Millis) {
        let asked = self
            .outstanding
            .values()
            .any(|o| matches!(o, Outstanding::InitProducerId { .. }));
        // A transactional producer gets its identity from init_transactions, not on its own.
        if self.txn.is_some() || self.identity.is_some() || asked || now < self.identity_retry_at {
            return;
        }
        let request = self.requests.allocate();
        self.outstanding
            .insert(request, Outstanding::InitProducerId { sent_ms: now });
        self.actions.push(Action::InitProducerId { request });
    }

    fn request_metadata(&mut self, now: Millis) {
        if self
            .partitions
            .values()
            .any(|p| p.leader.is_none() && !p.is_idle())
        {
            self.metadata_wanted = true;
        }
        let due = self
            .metadata_requested_at
            .is_none_or(|at| at + self.config.metadata_refresh_backoff_ms <= now);
        if self.metadata_wanted && due {
            self.metadata_wanted = false;
            self.metadata_requested_at = Some(now);
            self.actions.push(Action::RefreshMetadata);
        }
    }

    /// The earliest time after `now` at which [`Engine::poll`] has something to do without a
    /// new event (deadlines at or before `now` were handled by the poll that just ran).
    pub fn next_wakeup(&self, now: Millis, acc: &Accumulator) -> Option<Millis> {
        let mut wake: Option<Millis> = None;
        let mut consider = |t: Millis| {
            if t > now {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        };
        // A lingered batch kept open for a busy pipeline closes on the answer that frees it,
        // not on a timer.
        let broker_in_flight = self.broker_in_flight();
        let counts = |tp: &TopicPartition| {
            self.partitions
                .get(tp)
                .is_none_or(|state| !self.pipeline_busy(state, &broker_in_flight))
        };
        if let Some(linger) = acc.next_linger_deadline(counts) {
            consider(linger.max(now + 1));
        }
        let timeout = self.config.delivery_timeout_ms;
        for state in self.partitions.values() {
            if let Some(b) = state.queued.front() {
                consider(b.created_ms + timeout);
            }
            for b in &state.unacked {
                consider(b.created_ms + timeout);
            }
            if !state.is_idle() {
                consider(state.retry_at);
            }
        }
        for o in self.outstanding.values() {
            match o {
                Outstanding::Produce { sent_ms, .. } | Outstanding::InitProducerId { sent_ms } => {
                    consider(sent_ms + self.config.request_timeout_ms)
                }
            }
        }
        if let Some(txn) = &self.txn {
            for sent_ms in txn.in_flight_sent_times() {
                consider(sent_ms + self.config.request_timeout_ms);
            }
        }
        if self.identity.is_none() {
            consider(self.identity_retry_at);
        }
        for &until in self.throttled_until.values() {
            consider(until);
        }
        if let Some(t) = self.txn.as_ref().and_then(|txn| txn.wakeup(now)) {
            consider(t);
        }
        if self.metadata_wanted {
            consider(
                self.metadata_requested_at
                    .map_or(0, |at| at + self.config.metadata_refresh_backoff_ms),
            );
        }
        wake
    }
}
