//! Dispatch: which batches go out in a poll, to which broker, stamped with what. Retries go
//! first and alone once their partition's pipeline drained (P4); new batches are stamped at
//! dispatch, never earlier (P1, the single stamping point `PartitionState::stamp_next`), up
//! to `max.in.flight.requests.per.connection` per partition and broker and
//! `produce.request.max.bytes` per request.

use std::collections::{BTreeMap, HashMap, HashSet};

use tracing::{debug, debug_span};

use super::{Engine, Outstanding};
use crate::engine::partition::{PartitionState, WireState};
use crate::engine::{Action, ProducerIdentity};
use crate::observe::semconv;
use crate::types::{BrokerId, Millis, TopicPartition};

/// How a partition's batch goes out in a dispatch round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sendable {
    /// The first batch awaiting a retry, with the identity it carries (P2).
    Retry,
    /// The next queued batch, stamped now (P1).
    Stamp,
}

impl Engine {
    /// Fills every free in-flight slot: round after round, each round building at most one
    /// Produce request per broker with at most one batch per partition (Produce v3+ carries
    /// one batch per partition), until no broker has a free slot or no partition has a
    /// sendable batch. One request per broker per poll let a backlog's pipeline shrink to one
    /// request after answers that arrived together (500 records behind 300 ms of latency
    /// took 73 s, and some timed out).
    pub(super) fn dispatch(&mut self, now: Millis) {
        let Some(identity) = self.identity else {
            return;
        };
        // Bounded: a round that sends nothing ends the loop, and every round that sends puts a
        // request on a broker that takes at most `max_in_flight` of them.
        loop {
            let round = self.sendable_round(now);
            if round.is_empty() || !self.send_round(round, identity, now) {
                break;
            }
        }
    }

    /// Produce requests in flight per broker.
    pub(super) fn broker_in_flight(&self) -> HashMap<BrokerId, usize> {
        let mut in_flight: HashMap<BrokerId, usize> = HashMap::new();
        for o in self.outstanding.values() {
            if let Outstanding::Produce { broker, .. } = o {
                *in_flight.entry(*broker).or_default() += 1;
            }
        }
        in_flight
    }

    /// Whether a new batch of this partition would have to wait for the pipeline: its leader
    /// or the partition has every in-flight slot taken, an earlier batch is already queued
    /// for the next free one, or the identity's first batch is still unacknowledged (it goes
    /// alone, KAFKA-15591). Its open batch then keeps taking records past its linger time,
    /// as Java's and franz-go's do (they close a batch when a request takes it), instead of
    /// closing into a queue of small batches: under load the broker gets fewer, fuller
    /// batches. Only these waits hold a batch open, and each ends without the application (an
    /// answer, a request timeout, or the batch filling), so no record waits unbounded (P9).
    pub(super) fn pipeline_busy(
        &self,
        state: &PartitionState,
        broker_in_flight: &HashMap<BrokerId, usize>,
    ) -> bool {
        let max_in_flight = self.config.max_in_flight;
        state.leader.is_some_and(|broker| {
            broker_in_flight.get(&broker).copied().unwrap_or(0) >= max_in_flight
                || state.in_flight() >= max_in_flight
                || !state.queued.is_empty()
                || (self.config.idempotent && !state.unacked.is_empty() && !state.confirmed)
        })
    }

    /// Which open batches this poll closes, given the partitions whose open batch lingered
    /// its time. A lingered batch closes unless its pipeline is busy (see
    /// [`Engine::pipeline_busy`]); and when a request leaves for a broker anyway (a lingered
    /// batch or a queued one goes to it now), every partition of that broker with room joins
    /// it with its open batch, lingered or not, as Java's drain and franz-go's sink do: one
    /// request per broker carries every ready partition, rather than one request per
    /// partition's linger deadline. Sealing stays where it is and stamping at dispatch (P1).
    pub(super) fn batches_to_close(
        &self,
        now: Millis,
        lingered: &[TopicPartition],
    ) -> HashSet<TopicPartition> {
        let broker_in_flight = self.broker_in_flight();
        let max_in_flight = self.config.max_in_flight;
        let has_room = |state: &PartitionState| {
            state.leader.is_some_and(|broker| {
                !self.pipeline_busy(state, &broker_in_flight)
                    && !state.has_retry()
                    && !state.diverged
                    && self.throttled_until.get(&broker).is_none_or(|&t| now >= t)
            })
        };
        let mut close = HashSet::new();
        let mut leaving: HashSet<BrokerId> = HashSet::new();
        for tp in lingered {
            match self.partitions.get(tp) {
                Some(state) if self.pipeline_busy(state, &broker_in_flight) => {}
                Some(state) => {
                    if has_room(state) {
                        leaving.extend(state.leader);
                    }
                    close.insert(tp.clone());
                }
                None => {
                    close.insert(tp.clone());
                }
            }
        }
        for state in self.partitions.values() {
            if let Some(broker) = state.leader
                && !state.queued.is_empty()
                && !state.has_retry()
                && state.in_flight() < max_in_flight
                && broker_in_flight.get(&broker).copied().unwrap_or(0) < max_in_flight
            {
                leaving.insert(broker);
            }
        }
        if !leaving.is_empty() {
            for (tp, state) in &self.partitions {
                if state.leader.is_some_and(|b| leaving.contains(&b)) && has_room(state) {
                    close.insert(tp.clone());
                }
            }
        }
        close
    }

    /// What one dispatch round would send, per broker: retries first and alone (after the
    /// partition's pipeline drained, P4), then new batches to be stamped now (P1), up to
    /// `max_in_flight` per partition and per broker and `produce.request.max.bytes` per
    /// request.
    /// Decides only; [`Engine::send_round`] acts. Empty after a poll: no slot is left unused
    /// while something could use it (an invariant the simulation checks).
    pub(crate) fn sendable_round(
        &self,
        now: Millis,
    ) -> BTreeMap<BrokerId, Vec<(TopicPartition, Sendable)>> {
        let mut round: BTreeMap<BrokerId, Vec<(TopicPartition, Sendable)>> = BTreeMap::new();
        if self.identity.is_none() {
            return round;
        }
        let broker_in_flight = self.broker_in_flight();
        let mut request_bytes: HashMap<BrokerId, usize> = HashMap::new();
        let bumping = self.bump_reason.is_some();
        let max_in_flight = self.config.max_in_flight;
        for (tp, state) in &self.partitions {
            let Some(broker) = state.leader else { continue };
            let throttled = self.throttled_until.get(&broker).is_some_and(|&t| now < t);
            if throttled
                || state.diverged
                || broker_in_flight.get(&broker).copied().unwrap_or(0) >= max_in_flight
            {
                continue;
            }
            let (sendable, size) = if state.has_retry() {
                if state.in_flight() > 0 || now < state.retry_at {
                    continue;
                }
                let Some(batch) = state.unacked.iter().find(|b| b.awaits_retry()) else {
                    continue;
                };
                (Sendable::Retry, batch.batch.size_in_bytes())
            } else {
                let waiting_retry = state
                    .unacked
                    .iter()
                    .any(|b| b.wire.is_some_and(|w| !matches!(w, WireState::InFlight(_))));
                // A transactional producer sends new batches only inside a transaction, and
                // under transactions v1 only to partitions the coordinator added to it (T2).
                let txn_blocks = self.txn.as_ref().is_some_and(|t| !t.allows_dispatch(tp));
                // A broker without state for this producer (a new producer id, or state
                // expired after `producer.id.expiration.ms`) accepts any first sequence up to
                // Kafka 4.4: a batch pipelined behind a first one rejected retriably would be
                // appended ahead of it, and one behind a first one rejected for good would be
                // re-stamped and written twice (P4; KAFKA-15591). So until the broker
                // acknowledged a batch of this identity one batch goes alone (see
                // `PartitionState::confirmed`). Found by the simulation (regression tests
                // `kafka_15591_*` in tests/simulation.rs).
                let opener_unconfirmed =
                    self.config.idempotent && !state.unacked.is_empty() && !state.confirmed;
                if bumping
                    || txn_blocks
                    || opener_unconfirmed
                    || waiting_retry
                    || state.in_flight() >= max_in_flight
                    || now < state.retry_at
                {
                    continue;
                }
                let Some(next) = state.queued.front() else {
                    continue;
                };
                (Sendable::Stamp, next.batch.size_in_bytes())
            };
            let bytes = request_bytes.entry(broker).or_default();
            if *bytes > 0 && *bytes + size > self.config.produce_request_max_bytes {
                continue;
            }
            *bytes += size;
            round
                .entry(broker)
                .or_default()
                .push((tp.clone(), sendable));
        }
        round
    }

    /// Puts one round on the wire: one Produce request per broker. Returns whether it sent
    /// anything.
    fn send_round(
        &mut self,
        round: BTreeMap<BrokerId, Vec<(TopicPartition, Sendable)>>,
        identity: ProducerIdentity,
        now: Millis,
    ) -> bool {
        let mut sent = false;
        for (broker, chosen) in round {
            let request = self.requests.allocate();
            // The conventions' `send` span of a batched send (a client span: the records'
            // `create` spans are the producer spans), linked to the records it carries. One
            // request may carry several topics, so the name has none.
            let span = debug_span!(
                parent: None,
                "send",
                otel.kind = "client",
                messaging.system = "kafka",
                messaging.operation.type = "send",
                messaging.operation.name = "send",
                messaging.batch.message_count = tracing::field::Empty,
                server.address = tracing::field::Empty,
                server.port = tracing::field::Empty,
                exactly.broker_id = broker,
                exactly.request = request,
                exactly.batches = chosen.len(),
            );
            if !span.is_disabled()
                && let Some(address) = self.tally.delivery.address_of(broker)
            {
                semconv::record_server(&span, address);
            }
            let mut batches = Vec::with_capacity(chosen.len());
            for (tp, sendable) in chosen {
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                let batch = match sendable {
                    Sendable::Retry => {
                        let Some(batch) = state.unacked.iter_mut().find(|b| b.awaits_retry())
                        else {
                            continue;
                        };
                        batch.wire = Some(WireState::InFlight(request));
                        batch.attempts += 1;
                        self.tally.counters.batch_retries += 1;
                        self.tally.delivery.records_retried +=
                            u64::try_from(batch.batch.record_count()).unwrap_or(0);
                        batch.spans.sent_in(&span);
                        debug!(partition = ?tp, base_sequence = batch.batch.base_sequence(), attempts = batch.attempts, "retrying batch");
                        &batch.batch
                    }
                    Sendable::Stamp => {
                        let Some(stamped) =
                            state.stamp_next(identity.producer_id, identity.epoch, request, now)
                        else {
                            continue;
                        };
                        // Recorded again at a re-stamp after an epoch bump (P2).
                        stamped.spans.stamped(&tp, &stamped.batch);
                        stamped.spans.sent_in(&span);
                        let batch = &stamped.batch;
                        debug!(partition = ?tp, producer_id = identity.producer_id, epoch = identity.epoch, base_sequence = batch.base_sequence(), records = batch.record_count(), "batch stamped");
                        if let Some(txn) = &mut self.txn {
                            txn.batch_stamped();
                        }
                        batch
                    }
                };
                batches.push((tp, batch.clone()));
            }
            if batches.is_empty() {
                continue;
            }
            sent = true;
            let partitions = batches.iter().map(|(tp, _)| tp.clone()).collect();
            let records = batches
                .iter()
                .map(|(_, b)| u64::try_from(b.record_count()).unwrap_or(0))
                .sum();
            span.record("messaging.batch.message_count", records);
            self.outstanding.insert(
                request,
                Outstanding::Produce {
                    broker,
                    sent_ms: now,
                    partitions,
                    records,
                },
            );
            self.actions.push(Action::Produce {
                request,
                broker,
                batches,
                span,
            });
        }
        sent
    }
}
