//! The simulated network both runners use: what a request carries there and back, the
//! connections with their ordering and their failures, the timeline events wait on, and the
//! trace of what happened.
//!
//! A request is written on its client's connection to a broker and reaches the broker in the
//! order it was written (TCP); a delay holds back what follows it on the same connection.
//! Kafka answers a connection's requests in order too; the producer run keeps that, the copy
//! loop lets answers pass one another ([`Network::new`]). When a connection closes, every
//! request outstanding on it is the runner's to fail; one still on its way may yet reach the
//! broker (its bytes were sent), and its answer is then thrown away ([`Network::orphan`]).

use std::collections::{BTreeMap, VecDeque};

use super::entropy::Entropy;
use super::invariants::{FNV_OFFSET, fnv1a};
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::engine::{PartitionResponse, ProducerIdentity, RequestId};
use crate::error::Error;
use crate::protocol::record_batch::SealedBatch;
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

/// A request in the simulation: which client wrote it, in which incarnation (a restarted
/// copier is a new one), and the engine's id for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Address {
    /// The client (the producer run has one, 0; the copy loop one per copier).
    pub(super) client: usize,
    /// The client's incarnation.
    pub(super) incarnation: u32,
    /// The engine's id of the request.
    pub(super) request: RequestId,
}

/// What a request asks of the broker that reads it.
#[derive(Debug)]
pub(super) enum Body {
    /// A Produce request, one batch per partition.
    Produce(Vec<(TopicPartition, SealedBatch)>),
    /// InitProducerId of an idempotent producer.
    InitProducerId,
    /// FindCoordinator.
    FindCoordinator(CoordinatorKey),
    /// A request to the transaction or group coordinator.
    Coordinator(TxnRequest),
}

/// What a broker answers.
#[derive(Debug)]
pub(super) enum Answer {
    /// Per partition of a Produce request.
    Produce(Vec<PartitionResponse>),
    /// InitProducerId of an idempotent producer.
    Identity(Result<ProducerIdentity, Error>),
    /// FindCoordinator or a coordinator request.
    Txn(TxnResponse),
}

/// A request written and not yet answered, failed or forgotten.
#[derive(Debug)]
struct Travelling {
    connection: usize,
    /// Taken when the request reaches the broker.
    body: Option<Body>,
    /// Its connection closed after it was written (or its client crashed): it may still reach
    /// the broker, but nobody reads its answer.
    orphan: bool,
    /// Set when the broker answered.
    answer: Option<Answer>,
}

#[derive(Debug)]
struct Connection {
    client: usize,
    broker: BrokerId,
    open: bool,
    /// The latest arrival of a request written on it (requests arrive in order).
    last_arrival: Millis,
    /// The latest arrival of an answer on it (answers come back in order).
    last_answer: Millis,
}

/// A request that reached its broker.
#[derive(Debug)]
pub(super) struct Arrived {
    /// What it asks.
    pub(super) body: Body,
    /// The broker that reads it.
    pub(super) broker: BrokerId,
    /// The connection it came on.
    pub(super) connection: usize,
    /// Nobody reads its answer.
    pub(super) orphan: bool,
}

/// A request outstanding on a connection that closes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outstanding {
    /// The request.
    pub(super) address: Address,
    /// It has not reached the broker yet.
    pub(super) on_its_way: bool,
    /// It is a coordinator request still on its way.
    pub(super) coordinator_request: bool,
}

/// The connections and the requests on them.
#[derive(Debug)]
pub(super) struct Network {
    connections: Vec<Connection>,
    /// Each client's open connection to each broker.
    current: BTreeMap<(usize, BrokerId), usize>,
    in_flight: BTreeMap<Address, Travelling>,
    ordered_answers: bool,
}

impl Network {
    /// A network without connections; `ordered_answers`: a connection's answers come back in
    /// the order of its requests.
    pub(super) fn new(ordered_answers: bool) -> Self {
        Self {
            connections: Vec::new(),
            current: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            ordered_answers,
        }
    }

    /// The open connection of `client` to `broker`, if any.
    pub(super) fn current(&self, client: usize, broker: BrokerId) -> Option<usize> {
        self.current.get(&(client, broker)).copied()
    }

    /// The brokers `client` has an open connection to, in id order.
    pub(super) fn open_brokers(&self, client: usize) -> Vec<BrokerId> {
        self.current
            .keys()
            .filter(|(c, _)| *c == client)
            .map(|&(_, broker)| broker)
            .collect()
    }

    fn connection(&mut self, client: usize, broker: BrokerId, now: Millis) -> usize {
        if let Some(c) = self.current(client, broker)
            && self.connections.get(c).is_some_and(|c| c.open)
        {
            return c;
        }
        self.connections.push(Connection {
            client,
            broker,
            open: true,
            last_arrival: now,
            last_answer: now,
        });
        let c = self.connections.len() - 1;
        self.current.insert((client, broker), c);
        c
    }

    /// Writes `body` to `broker` on its client's connection (opened if there is none) at
    /// `now`, to arrive at `at` or after what was written on it before; returns when it
    /// arrives (the runner schedules that).
    pub(super) fn write(
        &mut self,
        address: Address,
        broker: BrokerId,
        body: Body,
        at: Millis,
        now: Millis,
    ) -> Millis {
        let connection = self.connection(address.client, broker, now);
        let Some(c) = self.connections.get_mut(connection) else {
            return at;
        };
        let at = at.max(c.last_arrival);
        c.last_arrival = at;
        self.in_flight.insert(
            address,
            Travelling {
                connection,
                body: Some(body),
                orphan: false,
                answer: None,
            },
        );
        at
    }

    /// The request reaches its broker (`None` if it was forgotten or arrived already).
    pub(super) fn arrive(&mut self, address: Address) -> Option<Arrived> {
        let t = self.in_flight.get_mut(&address)?;
        let body = t.body.take()?;
        let (connection, orphan) = (t.connection, t.orphan);
        let broker = self.connections.get(connection)?.broker;
        Some(Arrived {
            body,
            broker,
            connection,
            orphan,
        })
    }

    /// Puts the broker's answer on its way back, to arrive at `at` (or, with ordered
    /// answers, after the answers before it on the connection); returns when it arrives.
    pub(super) fn answer(&mut self, address: Address, answer: Answer, at: Millis) -> Millis {
        let Some(t) = self.in_flight.get_mut(&address) else {
            return at;
        };
        let at = match self.connections.get_mut(t.connection) {
            Some(c) if self.ordered_answers => {
                let at = at.max(c.last_answer);
                c.last_answer = at;
                at
            }
            _ => at,
        };
        t.answer = Some(answer);
        at
    }

    /// The answer reaches the client: `None` if nobody reads it any more.
    pub(super) fn deliver(&mut self, address: Address) -> Option<Answer> {
        let t = self.in_flight.remove(&address)?;
        if t.orphan { None } else { t.answer }
    }

    /// Forgets a request: it never arrives, or its answer is thrown away.
    pub(super) fn forget(&mut self, address: Address) {
        self.in_flight.remove(&address);
    }

    /// Nobody reads the request's answer any more; it may still reach the broker.
    pub(super) fn orphan(&mut self, address: Address) {
        if let Some(t) = self.in_flight.get_mut(&address) {
            t.orphan = true;
        }
    }

    /// A crashed client: nobody reads the answers of its requests, which may still land.
    pub(super) fn abandon(&mut self, client: usize) {
        for (_, t) in self
            .in_flight
            .iter_mut()
            .filter(|(address, _)| address.client == client)
        {
            t.orphan = true;
        }
    }

    /// The requests outstanding on `connection` whose answer is still read, in id order.
    pub(super) fn outstanding(&self, connection: usize) -> Vec<Outstanding> {
        self.in_flight
            .iter()
            .filter(|(_, t)| t.connection == connection && !t.orphan)
            .map(|(&address, t)| Outstanding {
                address,
                on_its_way: t.body.is_some(),
                coordinator_request: matches!(t.body, Some(Body::Coordinator(_))),
            })
            .collect()
    }

    /// Closes `connection` (the next request opens a new one): its broker and what was
    /// outstanding on it, or `None` if it was closed already.
    pub(super) fn close(&mut self, connection: usize) -> Option<(BrokerId, Vec<Outstanding>)> {
        let c = self.connections.get_mut(connection)?;
        if !c.open {
            return None;
        }
        c.open = false;
        let key = (c.client, c.broker);
        let broker = c.broker;
        if self.current.get(&key) == Some(&connection) {
            self.current.remove(&key);
        }
        Some((broker, self.outstanding(connection)))
    }
}

/// How long a message takes: `base_ms` (inclusive range), plus, with `delay` per mille, up to
/// `max_delay_ms` more.
#[derive(Debug, Clone, Copy)]
pub(super) struct Latency {
    /// The shortest and the longest usual latency.
    pub(super) base_ms: (Millis, Millis),
    /// Per mille of messages delayed.
    pub(super) delay: u32,
    /// The longest extra delay.
    pub(super) max_delay_ms: Millis,
}

impl Latency {
    /// A latency, and whether it was delayed.
    pub(super) fn draw(&self, entropy: &mut Entropy) -> (Millis, bool) {
        let mut latency = entropy.range(self.base_ms.0, self.base_ms.1);
        let delayed = entropy.chance(self.delay);
        if delayed {
            latency += entropy.range(0, self.max_delay_ms);
        }
        (latency, delayed)
    }
}

/// What is due when: events in time order, those at the same millisecond in the order they
/// were scheduled.
#[derive(Debug)]
pub(super) struct Timeline<P> {
    queue: BTreeMap<(Millis, u64), P>,
    scheduled: u64,
}

impl<P> Timeline<P> {
    /// Nothing due.
    pub(super) fn new() -> Self {
        Self {
            queue: BTreeMap::new(),
            scheduled: 0,
        }
    }

    /// `event` is due at `at`.
    pub(super) fn schedule(&mut self, at: Millis, event: P) {
        self.scheduled += 1;
        self.queue.insert((at, self.scheduled), event);
    }

    /// When the next event is due.
    pub(super) fn next_at(&self) -> Option<Millis> {
        self.queue.keys().next().map(|&(at, _)| at)
    }

    /// The next event and when it is due.
    pub(super) fn pop(&mut self) -> Option<(Millis, P)> {
        self.queue.pop_first().map(|((at, _), event)| (at, event))
    }

    /// How many events were ever scheduled.
    pub(super) fn scheduled(&self) -> u64 {
        self.scheduled
    }
}

/// The last lines of what happened, and a digest of all of it.
#[derive(Debug)]
pub(super) struct Trace {
    lines: VecDeque<String>,
    keep: usize,
    digest: u64,
}

impl Trace {
    /// An empty trace keeping the last `keep` lines.
    pub(super) fn new(keep: usize) -> Self {
        Self {
            lines: VecDeque::new(),
            keep,
            digest: FNV_OFFSET,
        }
    }

    /// Notes `line` at `now`.
    pub(super) fn note(&mut self, now: Millis, line: String) {
        let line = format!("{now:>8} ms  {line}");
        self.digest = fnv1a(self.digest, line.as_bytes());
        self.lines.push_back(line);
        if self.lines.len() > self.keep {
            self.lines.pop_front();
        }
    }

    /// The lines kept.
    pub(super) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }

    /// The digest of every line noted: equal digests, equal runs.
    pub(super) fn digest(&self) -> u64 {
        self.digest
    }
}
