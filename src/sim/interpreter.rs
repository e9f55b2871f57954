//! The simulation's one interpreter of the engine's actions, shared by the producer run and
//! the copy loop: an [`Action`] becomes a request on the simulated [`Network`] (or a metadata
//! refresh, or a closed connection), a request that reaches its broker is answered by the
//! model cluster and coordinators, and an answer that comes back becomes the engine's
//! [`Event`].
//!
//! What the runners do differently (which broker answers a request any broker may answer,
//! which faults a request or an answer meets, what the consumer side of the copy loop sends)
//! they say through [`Host`]; the order of every random choice is the runner's, so a seed
//! replays exactly.

use std::collections::BTreeSet;

use super::invariants::Violation;
use super::network::{Address, Answer, Body, Network};
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::engine::{Action, Event, PartitionResponse, ProducerIdentity, RequestId};
use crate::error::Error;
use crate::protocol::record_batch::SealedBatch;
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

/// A runner, as the interpreter sees it: its clock, its network, the model brokers behind it
/// and the faults it injects.
pub(super) trait Host {
    /// Virtual time.
    fn now(&self) -> Millis;
    /// Notes a line in the trace.
    fn note(&mut self, line: String);
    /// The simulated network.
    fn network(&mut self) -> &mut Network;

    // ---- the client side ----

    /// The broker a request that any broker answers goes to (InitProducerId of an idempotent
    /// producer, FindCoordinator), if one can be reached.
    fn any_broker(&mut self, client: usize) -> Option<BrokerId>;
    /// Writes `body` to `broker` (`None`: no broker to write to), or fails it unwritten.
    fn send(
        &mut self,
        address: Address,
        broker: Option<BrokerId>,
        body: Body,
    ) -> Result<(), Violation>;
    /// The engine asked for metadata.
    fn refresh_metadata(&mut self, client: usize, incarnation: u32);
    /// The engine closes its connection to `broker`.
    fn disconnect(&mut self, client: usize, incarnation: u32, broker: BrokerId);
    /// Hands `event` to the engine of the request's client.
    fn handle(&mut self, address: Address, event: Event);

    // ---- the broker side ----

    /// One partition of a Produce request that reached `broker`.
    fn produce(
        &mut self,
        address: Address,
        broker: BrokerId,
        partition: &TopicPartition,
        batch: &SealedBatch,
    ) -> Result<PartitionResponse, Violation>;
    /// InitProducerId of an idempotent producer, at `broker`.
    fn init_producer_id(
        &mut self,
        address: Address,
        broker: BrokerId,
    ) -> Result<ProducerIdentity, Error>;
    /// FindCoordinator.
    fn find_coordinator(
        &mut self,
        address: Address,
        key: &CoordinatorKey,
    ) -> Result<BrokerId, Violation>;
    /// A coordinator request that reached `broker`.
    fn coordinator(
        &mut self,
        address: Address,
        broker: BrokerId,
        body: &TxnRequest,
    ) -> Result<TxnResponse, Violation>;

    // ---- the way back ----

    /// Whether the answer to `address` is lost on `connection` from `broker`.
    fn answer_lost(&mut self, address: Address, broker: BrokerId, connection: usize) -> bool;
    /// How long an answer takes.
    fn answer_latency(&mut self) -> Millis;
    /// The answer to `address` reaches its client at `at`.
    fn schedule_delivery(&mut self, at: Millis, address: Address);
}

/// Carries out one poll's actions of the engine of `client` (`incarnation`).
pub(super) fn carry_out(
    host: &mut impl Host,
    client: usize,
    incarnation: u32,
    actions: Vec<Action>,
) -> Result<(), Violation> {
    let address = |request| Address {
        client,
        incarnation,
        request,
    };
    // The engine emits `Disconnect` while expiring requests, before it dispatches new ones in
    // the same poll; close first, in broker order (the engine's own order comes from a
    // HashMap and would make a run irreproducible).
    let disconnects: BTreeSet<BrokerId> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Disconnect { broker } => Some(*broker),
            _ => None,
        })
        .collect();
    for broker in disconnects {
        host.disconnect(client, incarnation, broker);
    }
    for action in actions {
        match action {
            Action::Produce {
                request,
                broker,
                batches,
                ..
            } => host.send(address(request), Some(broker), Body::Produce(batches))?,
            Action::InitProducerId { request } => {
                let broker = host.any_broker(client);
                host.send(address(request), broker, Body::InitProducerId)?;
            }
            Action::RefreshMetadata => host.refresh_metadata(client, incarnation),
            Action::Disconnect { .. } => {}
            Action::FindCoordinator { request, key } => {
                let broker = host.any_broker(client);
                host.send(address(request), broker, Body::FindCoordinator(key))?;
            }
            Action::Coordinator {
                request,
                broker,
                body,
            } => host.send(address(request), Some(broker), Body::Coordinator(body))?,
        }
    }
    Ok(())
}

/// A request reaches its broker: the model answers it, and the answer is put on its way
/// back unless nobody reads it or it is lost.
pub(super) fn arrive(host: &mut impl Host, address: Address) -> Result<(), Violation> {
    let Some(arrived) = host.network().arrive(address) else {
        return Ok(());
    };
    let broker = arrived.broker;
    let answer = match arrived.body {
        Body::Produce(batches) => {
            let mut responses = Vec::with_capacity(batches.len());
            for (tp, batch) in &batches {
                responses.push(host.produce(address, broker, tp, batch)?);
            }
            Answer::Produce(responses)
        }
        Body::InitProducerId => Answer::Identity(host.init_producer_id(address, broker)),
        Body::FindCoordinator(key) => Answer::Txn(TxnResponse::Coordinator(
            host.find_coordinator(address, &key)?,
        )),
        Body::Coordinator(body) => Answer::Txn(host.coordinator(address, broker, &body)?),
    };
    if arrived.orphan {
        host.note(format!(
            "answer to {} discarded: its connection closed",
            address.request
        ));
        host.network().forget(address);
        return Ok(());
    }
    if host.answer_lost(address, broker, arrived.connection) {
        // The request stays outstanding until its connection closes (the engine's request
        // timeout, or a reset).
        return Ok(());
    }
    let at = host.now() + host.answer_latency();
    let at = host.network().answer(address, answer, at);
    host.schedule_delivery(at, address);
    Ok(())
}

/// An answer reaches its client: the engine gets it, if the client still reads it.
pub(super) fn deliver(host: &mut impl Host, address: Address) {
    let Some(answer) = host.network().deliver(address) else {
        return;
    };
    let request = address.request;
    let event = match answer {
        Answer::Produce(partitions) => {
            host.note(format!("answer to {request} delivered"));
            Event::ProduceResponse {
                request,
                partitions,
                throttle_ms: 0,
            }
        }
        Answer::Identity(result) => {
            host.note(format!("InitProducerId answer {request} delivered"));
            Event::ProducerId { request, result }
        }
        Answer::Txn(response) => {
            host.note(format!("coordinator answer {request} delivered"));
            Event::Txn {
                request,
                result: Ok(response),
            }
        }
    };
    host.handle(address, event);
}

/// The event of a request that failed without answer: its connection closed (`written`), or
/// it could not be written.
pub(super) fn request_failed(request: RequestId, written: bool) -> Event {
    let error = Error::io(
        "sim",
        std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection failed"),
    );
    Event::RequestFailed {
        request,
        written,
        error,
    }
}
