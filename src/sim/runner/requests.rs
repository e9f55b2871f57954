//! The producer run as the interpreter's [`Host`]: requests go to a live broker of the model
//! cluster through the fault schedule (a broker down refuses them, some are not written, some
//! answers are lost, injected errors answer some batches), every batch on the wire and every
//! append is shown to the checkers, and a closed connection fails what is outstanding on it.

use super::{CLIENT, Pending, Run};
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::engine::{Event, PartitionResponse, ProducerIdentity};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::SealedBatch;
use crate::sim::cluster::reject;
use crate::sim::faults::{ErrorTiming, draw_identity_error, draw_produce_error, timing};
use crate::sim::interpreter::Host;
use crate::sim::invariants::Violation;
use crate::sim::network::{Address, Body, Network};
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

impl Run {
    /// Network latency, plus a fault delay sometimes.
    fn latency(&mut self) -> Millis {
        let (latency, delayed) = self.latency.draw(&mut self.entropy);
        if delayed {
            self.stats.fault("delay");
        }
        latency
    }

    /// Writes `body` on the broker's connection.
    fn write(&mut self, address: Address, broker: BrokerId, body: Body) {
        let extra = self.slow.get(&broker).copied().unwrap_or(0);
        let at = self.now + self.latency() + extra;
        let at = self.network.write(address, broker, body, at, self.now);
        self.schedule(at, Pending::Arrive(address));
    }

    /// Whether a request to `broker` fails before it is written (broker down, or the fault
    /// schedule drops it); if so its failure is scheduled.
    fn unwritable(&mut self, address: Address, broker: Option<BrokerId>) -> bool {
        let refused = broker.is_none_or(|b| !self.cluster.is_up(b));
        if !refused && !self.entropy.chance(self.rates.drop_request) {
            return false;
        }
        self.stats.fault("request not written");
        self.note(format!(
            "request {} to {broker:?} not written ({})",
            address.request,
            if refused { "refused" } else { "dropped" }
        ));
        let at = self.now + self.entropy.range(0, 5);
        self.schedule(
            at,
            Pending::Failed {
                request: address.request,
                written: false,
            },
        );
        true
    }

    /// Closes a connection: everything outstanding on it fails with `written: true`; what
    /// has not reached the broker yet may still (unless the broker crashed).
    pub(super) fn close(&mut self, connection: usize, crash: bool) {
        let Some((broker, outstanding)) = self.network.close(connection) else {
            return;
        };
        self.note(format!(
            "connection {connection} to broker {broker} closed ({} outstanding)",
            outstanding.len()
        ));
        let v1 = self
            .cluster
            .coordinator()
            .is_some_and(|c| !c.transactions_v2());
        for o in outstanding {
            self.schedule(
                self.now,
                Pending::Failed {
                    request: o.address.request,
                    written: true,
                },
            );
            // Transactions v1 cannot tell a late EndTxn of the previous transaction from one
            // for the current (same epoch): a stale commit arriving after the next transaction
            // began would commit it. That hazard is what KIP-890 part 2 closes with an epoch
            // per transaction; under v1 the model broker drains a closed connection's requests
            // before the client's next call (coordinator requests are not left on the way).
            let v1_coordinator_request = o.coordinator_request && v1;
            if o.on_its_way && !crash && !v1_coordinator_request && self.entropy.chance(500) {
                self.network.orphan(o.address);
            } else {
                self.network.forget(o.address);
            }
        }
    }

    /// The broker's handling of one partition of a Produce request, injected errors included.
    fn broker_produce(
        &mut self,
        broker: BrokerId,
        tp: &TopicPartition,
        batch: &SealedBatch,
    ) -> Result<PartitionResponse, Violation> {
        let bytes = batch.to_bytes();
        let scripted = self.injected.iter_mut().find(|e| {
            e.times > 0
                && e.partition == *tp
                && e.base_sequence.is_none_or(|s| s == batch.base_sequence())
                && e.epoch.is_none_or(|s| s == batch.producer_epoch())
        });
        let injected = match scripted {
            Some(rule) => {
                rule.times -= 1;
                Some(rule.code)
            }
            None => draw_produce_error(&mut self.entropy, &self.rates),
        };
        let verdict = match injected {
            None => self.cluster.produce(broker, tp, &bytes, self.now),
            Some(code) => {
                self.stats.fault("injected error");
                let appends = match timing(code) {
                    ErrorTiming::BeforeAppend => false,
                    ErrorTiming::AfterAppend => true,
                    ErrorTiming::Either => self.entropy.chance(500),
                };
                if appends {
                    let mut verdict = self.cluster.produce(broker, tp, &bytes, self.now);
                    if verdict.response.error == ErrorCode::NONE {
                        verdict.response.error = code;
                        verdict.response.base_offset = -1;
                    }
                    verdict
                } else {
                    let log_start = self
                        .cluster
                        .partitions()
                        .get(tp)
                        .map_or(-1, |p| p.log_start_offset);
                    reject(tp, code, log_start)
                }
            }
        };
        if let Some(violation) = verdict.violation {
            return Err(violation);
        }
        self.checker.on_append(tp, &verdict.appended)?;
        let code = verdict.response.error;
        self.stats.answer(code, !verdict.appended.is_empty());
        self.note(format!(
            "broker {broker}: {tp:?} seq {}..={} epoch {} -> {code} offset {} ({} appended)",
            batch.base_sequence(),
            batch.last_sequence(),
            batch.producer_epoch(),
            verdict.response.base_offset,
            verdict.appended.len()
        ));
        Ok(verdict.response)
    }
}

/// A broker for the trace.
fn named(broker: Option<BrokerId>) -> String {
    broker.map_or_else(|| "none".into(), |b| b.to_string())
}

impl Host for Run {
    fn now(&self) -> Millis {
        self.now
    }

    fn note(&mut self, line: String) {
        Run::note(self, line);
    }

    fn network(&mut self) -> &mut Network {
        &mut self.network
    }

    /// Any live broker finds the coordinator, and answers an idempotent producer's
    /// InitProducerId.
    fn any_broker(&mut self, _client: usize) -> Option<BrokerId> {
        let live = self.cluster.live_brokers();
        self.entropy.pick(&live).copied()
    }

    fn send(
        &mut self,
        address: Address,
        broker: Option<BrokerId>,
        body: Body,
    ) -> Result<(), Violation> {
        let request = address.request;
        match &body {
            Body::Produce(batches) => {
                self.stats.produce_requests += 1;
                let summary: Vec<String> = batches
                    .iter()
                    .map(|(tp, b)| {
                        format!(
                            "{tp:?}[{}/{} seq {}..={}]",
                            b.producer_id(),
                            b.producer_epoch(),
                            b.base_sequence(),
                            b.last_sequence()
                        )
                    })
                    .collect();
                self.note(format!(
                    "engine: produce {request} to broker {}: {}",
                    named(broker),
                    summary.join(" ")
                ));
                let unwritable = self.unwritable(address, broker);
                self.checker.on_request(batches, self.now, !unwritable)?;
                if unwritable {
                    return Ok(());
                }
                self.stats.batches_written += u64::try_from(batches.len()).unwrap_or(0);
            }
            Body::FindCoordinator(_) | Body::Coordinator(_)
                if self.cluster.coordinator().is_none() =>
            {
                return Err(format!(
                    "transactional request {request} from a producer without transactional.id"
                ));
            }
            Body::InitProducerId => {
                self.stats.init_producer_id_requests += 1;
                self.note(format!("engine: InitProducerId {request} via {broker:?}"));
                if self.unwritable(address, broker) {
                    return Ok(());
                }
            }
            Body::FindCoordinator(key) => {
                self.note(format!(
                    "engine: FindCoordinator {request} {key:?} via {broker:?}"
                ));
                if self.unwritable(address, broker) {
                    return Ok(());
                }
            }
            Body::Coordinator(body) => {
                self.note(format!(
                    "engine: {request} to coordinator {}: {body:?}",
                    named(broker)
                ));
                if self.unwritable(address, broker) {
                    return Ok(());
                }
            }
        }
        if let Some(broker) = broker {
            self.write(address, broker, body);
        }
        Ok(())
    }

    fn refresh_metadata(&mut self, _client: usize, _incarnation: u32) {
        if self.cluster.live_brokers().is_empty() {
            self.note("engine: metadata refresh, no broker answers".into());
            return;
        }
        let brokers = self.cluster.config().brokers.clone();
        let leaders = self
            .cluster
            .leaders()
            .into_iter()
            .map(|(tp, leader)| {
                if !self.entropy.chance(self.rates.stale_metadata) {
                    return (tp, Some(leader));
                }
                self.stats.fault("stale metadata");
                if self.entropy.chance(500) {
                    (tp, None)
                } else {
                    (tp, self.entropy.pick(&brokers).copied())
                }
            })
            .collect::<Vec<_>>();
        self.note(format!("engine: metadata refresh -> {leaders:?}"));
        let at = self.now + self.entropy.range(1, 10);
        self.schedule(at, Pending::Metadata(leaders));
    }

    fn disconnect(&mut self, _client: usize, _incarnation: u32, broker: BrokerId) {
        self.note(format!("engine: disconnect broker {broker}"));
        if let Some(connection) = self.network.current(CLIENT, broker) {
            self.close(connection, false);
        }
    }

    fn handle(&mut self, _address: Address, event: Event) {
        let identity = matches!(event, Event::ProducerId { .. });
        self.engine.handle(event, self.now, &self.acc);
        if identity {
            self.after_first_identity();
        }
    }

    fn produce(
        &mut self,
        _address: Address,
        broker: BrokerId,
        partition: &TopicPartition,
        batch: &SealedBatch,
    ) -> Result<PartitionResponse, Violation> {
        self.broker_produce(broker, partition, batch)
    }

    fn init_producer_id(
        &mut self,
        address: Address,
        broker: BrokerId,
    ) -> Result<ProducerIdentity, Error> {
        let request = address.request;
        match draw_identity_error(&mut self.entropy, &self.rates) {
            Some(code) => {
                self.stats.fault("InitProducerId error");
                self.note(format!(
                    "broker {broker}: InitProducerId {request} -> {code}"
                ));
                Err(Error::broker(code))
            }
            None => {
                let identity = self.cluster.init_producer_id();
                self.note(format!(
                    "broker {broker}: InitProducerId {request} -> {identity:?}"
                ));
                Ok(identity)
            }
        }
    }

    fn find_coordinator(
        &mut self,
        _address: Address,
        key: &CoordinatorKey,
    ) -> Result<BrokerId, Violation> {
        self.cluster
            .find_coordinator(key)
            .ok_or_else(|| format!("FindCoordinator {key:?} without a coordinator"))
    }

    fn coordinator(
        &mut self,
        address: Address,
        broker: BrokerId,
        body: &TxnRequest,
    ) -> Result<TxnResponse, Violation> {
        let response = self.cluster.coordinator_request(broker, body, self.now);
        self.note(format!(
            "broker {broker}: {} -> {response:?}",
            address.request
        ));
        Ok(response)
    }

    /// Lost to a blackhole or to the fault schedule; sometimes the connection resets soon.
    fn answer_lost(&mut self, address: Address, broker: BrokerId, connection: usize) -> bool {
        let blackholed = self.blackholed.contains(&broker);
        if !blackholed && !self.entropy.chance(self.rates.drop_response) {
            return false;
        }
        self.stats.fault("answer lost");
        self.note(format!("answer to {} lost", address.request));
        if !blackholed && self.entropy.chance(500) {
            let at = self.now + self.entropy.range(1, self.rates.max_delay_ms.max(2));
            self.schedule(at, Pending::Close(connection));
        }
        true
    }

    fn answer_latency(&mut self) -> Millis {
        self.latency()
    }

    fn schedule_delivery(&mut self, at: Millis, address: Address) {
        self.schedule(at, Pending::Deliver(address));
    }
}
