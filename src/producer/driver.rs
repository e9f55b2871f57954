//! The tokio driver: one task that feeds the engine events, carries out its actions over the
//! broker links, keeps metadata fresh and sleeps until the engine's next deadline. It decides
//! nothing about delivery itself: that is the engine's job (ARCHITECTURE.md, layers).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::metrics::Publisher;
use super::shared::Shared;
use crate::engine::accumulator::Accumulator;
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::engine::wire::{self, CoordinatorMessage};
use crate::engine::{Action, Engine, Event, RequestId};
use crate::error::Error;
use crate::net::connection::{BrokerLink, LinkConfig, LinkSecurity};
use crate::net::coordinator::{coordinator_answer, find_coordinator_request};
use crate::net::metadata::metadata_request;
use crate::protocol::Request;
use crate::protocol::frame::RequestFrame;
use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::record_batch::SealedBatch;
use crate::protocol::versions::BrokerApiVersions;
use crate::reachability::Reachability;
use crate::telemetry::{InstanceIdCell, Telemetry, TelemetryConfig, link_samples};
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, TopicPartition};

/// Requests from producer handles to the driver task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Fetch metadata now (a `send` waits for a topic's partitions).
    RefreshMetadata,
    /// Resolve the sender once every record handed over so far is resolved.
    Flush(oneshot::Sender<()>),
    /// Flush, then stop the task.
    Close(oneshot::Sender<()>),
}

/// Messages from link callbacks back into the driver task.
enum Inbound {
    Engine(Event),
    /// The answer to a metadata request, or how the request to `address` failed.
    Metadata {
        address: Arc<str>,
        result: Result<MetadataResponse, Error>,
    },
}

pub(crate) struct Driver {
    shared: Arc<Shared>,
    links: HashMap<BrokerId, BrokerLink>,
    bootstrap: Vec<String>,
    link_config: LinkConfig,
    inbound_tx: mpsc::UnboundedSender<Inbound>,
    inbound_rx: mpsc::UnboundedReceiver<Inbound>,
    commands: mpsc::UnboundedReceiver<Command>,
    flush_waiters: Vec<oneshot::Sender<()>>,
    close_waiter: Option<oneshot::Sender<()>>,
    metadata_in_flight: bool,
    /// Whether metadata requests succeed, to log a failing streak once, not per request.
    metadata_reachability: Reachability,
    /// Rotates the broker asked for metadata and producer ids, so one dead broker is not
    /// asked forever.
    next_any_broker: usize,
    /// The KIP-714 metrics pusher (its own task); its terminating push goes out on close.
    telemetry: Telemetry,
}

impl Driver {
    /// A driver whose links secure their connections with `security` (built from the
    /// configuration by [`LinkSecurity::from_config`], so key material is read once).
    pub fn new(
        shared: Arc<Shared>,
        commands: mpsc::UnboundedReceiver<Command>,
        security: LinkSecurity,
    ) -> Self {
        let (inbound_tx, inbound_rx) = mpsc::unbounded_channel();
        let config = &shared.config;
        let link_config = LinkConfig::new(
            config.client_id.clone(),
            Duration::from_millis(config.request_timeout_ms),
            Duration::from_millis(config.reconnect_backoff_ms),
            Duration::from_millis(config.reconnect_backoff_max_ms),
            security,
        );
        let telemetry = if config.enable_metrics_push {
            let snapshot = Arc::clone(&shared);
            let links = link_config.counters();
            Telemetry::start(
                TelemetryConfig {
                    links: config
                        .bootstrap_servers
                        .iter()
                        .map(|address| BrokerLink::spawn(address.clone(), link_config.clone()))
                        .collect(),
                    client_id: Arc::from(config.client_id.as_str()),
                    request_timeout: Duration::from_millis(config.request_timeout_ms),
                    prefix: "org.apache.kafka.producer.",
                },
                Box::new(move || {
                    let mut samples = super::telemetry_samples::samples(&snapshot.metrics());
                    let metadata = snapshot.metadata.read().unwrap_or_else(|e| e.into_inner());
                    samples.extend(link_samples(&links.read(), &metadata));
                    samples
                }),
            )
        } else {
            Telemetry::disabled()
        };
        Self {
            bootstrap: config.bootstrap_servers.clone(),
            shared,
            links: HashMap::new(),
            link_config,
            inbound_tx,
            inbound_rx,
            commands,
            flush_waiters: Vec::new(),
            close_waiter: None,
            metadata_in_flight: false,
            metadata_reachability: Reachability::default(),
            next_any_broker: 0,
            telemetry,
        }
    }

    /// Where the producer handles read the client instance id the broker assigned (KIP-714).
    pub fn client_instance_id(&self) -> InstanceIdCell {
        self.telemetry.instance_id()
    }

    pub async fn run(mut self) {
        let metadata_max_age = Duration::from_millis(self.shared.config.metadata_max_age_ms);
        let mut next_metadata = tokio::time::Instant::now();
        let mut publisher = Publisher::new(&self.shared.config.client_id);
        let mut next_publish = tokio::time::Instant::now();
        loop {
            let now = self.shared.now_ms();
            if tokio::time::Instant::now() >= next_metadata {
                self.refresh_metadata();
                next_metadata = tokio::time::Instant::now() + metadata_max_age;
            }
            // The loop wakes at least once a second (see the sleep below).
            if cfg!(feature = "metrics") && tokio::time::Instant::now() >= next_publish {
                publisher.publish(&self.shared.metrics());
                next_publish = tokio::time::Instant::now() + Duration::from_secs(1);
            }
            let (actions, idle, wake_at) = self.with_engine(|engine, acc| {
                let actions = engine.poll(now, acc);
                (actions, engine.is_idle(acc), engine.next_wakeup(now, acc))
            });
            for action in actions {
                self.execute(action);
            }
            if idle {
                self.flush_waiters.drain(..).for_each(|w| {
                    let _ = w.send(());
                });
                if let Some(waiter) = self.close_waiter.take() {
                    self.telemetry.close();
                    let _ = waiter.send(());
                    return;
                }
            }
            let sleep = wake_at.map_or(Duration::from_secs(1), |at| {
                Duration::from_millis(at.saturating_sub(now))
            });
            tokio::select! {
                _ = self.shared.wake.notified() => {}
                inbound = self.inbound_rx.recv() => {
                    if let Some(inbound) = inbound {
                        self.receive(inbound);
                        while let Ok(more) = self.inbound_rx.try_recv() {
                            self.receive(more);
                        }
                    }
                }
                command = self.commands.recv() => match command {
                    Some(Command::RefreshMetadata) => self.refresh_metadata(),
                    Some(Command::Flush(waiter)) => {
                        self.with_engine(|engine, _| engine.begin_flush());
                        self.flush_waiters.push(waiter);
                    }
                    Some(Command::Close(waiter)) => {
                        self.with_engine(|engine, _| engine.begin_flush());
                        self.close_waiter = Some(waiter);
                    }
                    // Every handle is gone: what is outstanding is resolved (see `Drop`).
                    None => return,
                },
                _ = tokio::time::sleep(sleep.min(Duration::from_secs(1))) => {}
            }
        }
    }

    /// Resolves whatever is still outstanding once the driver stops, whether because every
    /// handle was dropped or because the runtime shut its task down: records never written
    /// fail as not written ([`Error::Closed`]), records possibly written as indeterminate, so
    /// no delivery future outlives the producer unresolved (P6, shutdown included).
    fn abandon(&mut self) {
        self.with_engine(|engine, acc| engine.abandon(Error::Closed, acc));
    }

    /// Runs `f` on the engine under its lock, and wakes the `send`s waiting for buffer space
    /// if `f` resolved batches (their memory went back to the buffer).
    fn with_engine<R>(&mut self, f: impl FnOnce(&mut Engine, &Accumulator) -> R) -> R {
        let acc = &self.shared.acc;
        let mut engine = self.shared.lock_engine();
        let before = acc.released_bytes();
        let result = f(&mut engine, acc);
        let released = acc.released_bytes() > before;
        let finished = engine.take_finished_calls();
        drop(engine);
        if released {
            self.shared.space.notify_waiters();
        }
        self.shared.finish_calls(finished);
        result
    }

    fn receive(&mut self, inbound: Inbound) {
        let now = self.shared.now_ms();
        // An authentication or certificate failure ends the producer (T5): every
        // pending delivery fails as not written, and no link retries.
        let security_failure = match &inbound {
            Inbound::Metadata {
                result: Err(error), ..
            }
            | Inbound::Engine(Event::RequestFailed { error, .. })
            | Inbound::Engine(Event::ProducerId {
                result: Err(error), ..
            })
            | Inbound::Engine(Event::Txn {
                result: Err(error), ..
            }) if error.is_security_failure() => Some(error.clone()),
            _ => None,
        };
        if let Some(error) = security_failure {
            self.with_engine(|engine, acc| engine.handle(Event::Fatal(error), now, acc));
        }
        match inbound {
            Inbound::Engine(event) => {
                self.with_engine(|engine, acc| engine.handle(event, now, acc))
            }
            Inbound::Metadata { address, result } => {
                self.metadata_in_flight = false;
                match result {
                    Ok(response) => {
                        self.metadata_reachability.log_success("metadata request");
                        self.shared.metadata_answers().answered();
                        let (leaders, brokers) = {
                            let mut metadata = self
                                .shared
                                .metadata
                                .write()
                                .unwrap_or_else(|e| e.into_inner());
                            metadata.update(&response);
                            (metadata.leaders(), metadata.brokers.clone())
                        };
                        self.shared.metadata_updated();
                        self.with_engine(|engine, acc| {
                            for (broker, address) in &brokers {
                                engine.broker_address(*broker, address);
                            }
                            engine.handle(Event::Leaders(leaders), now, acc)
                        });
                    }
                    Err(error) => {
                        // A fatal error is logged once, by the engine, as fatal.
                        if !error.is_security_failure() {
                            self.metadata_reachability
                                .log_failure("metadata request", &error);
                        }
                        self.shared.metadata_answers().failed(&address, error);
                        self.next_any_broker += 1;
                        self.shared.metadata_changed.notify_waiters();
                    }
                }
            }
        }
    }

    fn link(&mut self, broker: BrokerId) -> Option<BrokerLink> {
        if let Some(link) = self.links.get(&broker) {
            return Some(link.clone());
        }
        let address = if broker < 0 {
            self.bootstrap
                .get(usize::try_from(-broker - 1).ok()?)?
                .clone()
        } else {
            self.shared
                .metadata
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .brokers
                .get(&broker)?
                .clone()
        };
        let link = BrokerLink::spawn(address, self.link_config.clone());
        if broker >= 0 {
            self.shared
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(broker, Arc::clone(&link.state));
        }
        self.links.insert(broker, link.clone());
        Some(link)
    }

    /// Some broker to ask cluster-wide questions: known brokers first, then the bootstrap
    /// addresses (as negative ids), rotating after failures.
    fn any_link(&mut self) -> Option<BrokerLink> {
        let mut candidates: Vec<BrokerId> = self
            .shared
            .metadata
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .brokers
            .keys()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.extend((0..self.bootstrap.len()).map(|i| -(i as BrokerId) - 1));
        let pick = *candidates.get(self.next_any_broker % candidates.len().max(1))?;
        self.link(pick)
    }

    fn refresh_metadata(&mut self) {
        if self.metadata_in_flight {
            return;
        }
        let topics: Vec<String> = self
            .shared
            .wanted_topics()
            .into_iter()
            .map(|name| name.to_string())
            .collect();
        let Some(link) = self.any_link() else { return };
        self.metadata_in_flight = true;
        let request = move |version| Ok(metadata_request(Some(topics), version));
        let tx = self.inbound_tx.clone();
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        // Bounded like every request: a connection that takes the request and never answers
        // (a black-holed network) must not hold the refreshes back for good.
        let timeout = Duration::from_millis(self.shared.config.request_timeout_ms);
        tokio::spawn(async move {
            let address: Arc<str> = Arc::from(link.address());
            let call = link.call_built(request, None, client_id);
            let result = match tokio::time::timeout(timeout, call).await {
                Ok(result) => result.map(|(response, _)| response),
                Err(_) => Err(Error::Timeout(format!(
                    "no answer to Metadata from {address} within request.timeout.ms \
                     ({timeout:?})"
                ))),
            };
            let _ = tx.send(Inbound::Metadata { address, result });
        });
    }

    fn execute(&mut self, action: Action) {
        match action {
            Action::Produce {
                request,
                broker,
                batches,
                span,
            } => span.in_scope(|| self.produce(request, broker, batches, span.clone())),
            Action::InitProducerId { request } => self.init_producer_id(request),
            Action::RefreshMetadata => self.refresh_metadata(),
            Action::FindCoordinator { request, key } => self.find_coordinator(request, key),
            Action::Coordinator {
                request,
                broker,
                body,
            } => self.coordinator_request(request, broker, body),
            Action::Disconnect { broker } => {
                debug!(broker, "closing connection after a request timeout");
                self.links.remove(&broker);
                self.shared
                    .connections
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&broker);
            }
        }
    }

    fn produce(
        &mut self,
        request: RequestId,
        broker: BrokerId,
        batches: Vec<(TopicPartition, SealedBatch)>,
        span: tracing::Span,
    ) {
        let tx = self.inbound_tx.clone();
        let Some(link) = self.link(broker) else {
            let error = Error::Timeout(format!("no address known for broker {broker}"));
            let _ = tx.send(Inbound::Engine(Event::RequestFailed {
                request,
                written: false,
                error,
            }));
            return;
        };
        let config = &self.shared.config;
        let produce = wire::produce_request(
            &batches,
            config.transactional_id.clone(),
            config.acks.as_i16(),
            config.request_timeout_ms,
        );
        let expects_response = produce.acks != 0;
        let transactional_v1 =
            config.transactional_id.is_some() && !self.shared.lock_engine().transactions_v2();
        let cap = wire::produce_version_cap(transactional_v1);
        let client_id = config.client_id.clone();
        let zstd = wire::uses_zstd(&batches);
        link.send(
            Box::new(move |versions, correlation_id| {
                let version = wire::produce_version(versions, cap, zstd)?;
                // The batches' bytes are referenced, not copied.
                let frame =
                    RequestFrame::produce(&produce, version, correlation_id, Some(&client_id));
                Ok((frame, version, expects_response))
            }),
            Box::new(move |result| {
                let _answer = span.enter();
                let event = match result {
                    Ok((version, body)) => {
                        match wire::decode_produce(&body, version, &batches, expects_response) {
                            Ok((partitions, throttle_ms)) => Event::ProduceResponse {
                                request,
                                partitions,
                                throttle_ms,
                            },
                            Err(error) => Event::RequestFailed {
                                request,
                                written: true,
                                error,
                            },
                        }
                    }
                    Err(failure) => Event::RequestFailed {
                        request,
                        written: failure.written(),
                        error: failure.into_error(),
                    },
                };
                let _ = tx.send(Inbound::Engine(event));
            }),
        );
    }

    fn fail_txn_request(&self, request: RequestId, error: Error) {
        let _ = self.inbound_tx.send(Inbound::Engine(Event::Txn {
            request,
            result: Err(error),
        }));
    }

    fn find_coordinator(&mut self, request: RequestId, key: CoordinatorKey) {
        let Some(link) = self.any_link() else {
            return self.fail_txn_request(
                request,
                Error::Timeout("no broker to ask for a coordinator".into()),
            );
        };
        self.next_any_broker += 1;
        let body = move |version| find_coordinator_request(key, version);
        let tx = self.inbound_tx.clone();
        let shared = Arc::clone(&self.shared);
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        tokio::spawn(async move {
            let found = match link.call_built(body, None, client_id).await {
                Ok((response, _)) => coordinator_answer(response),
                Err(error) => Err(error),
            };
            let result = found.map(|coordinator| {
                // The coordinator may not be in our metadata yet: remember its address.
                shared
                    .metadata
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .brokers
                    .entry(coordinator.node_id)
                    .or_insert(coordinator.address);
                TxnResponse::Coordinator(coordinator.node_id)
            });
            let _ = tx.send(Inbound::Engine(Event::Txn { request, result }));
        });
    }

    fn coordinator_request(&mut self, request: RequestId, broker: BrokerId, body: TxnRequest) {
        let Some(link) = self.link(broker) else {
            return self.fail_txn_request(
                request,
                Error::Timeout(format!("no address known for coordinator {broker}")),
            );
        };
        let config = &self.shared.config;
        let transactional_id = config.transactional_id.clone().unwrap_or_default();
        let client_id: Arc<str> = Arc::from(config.client_id.as_str());
        let v2 = self.shared.lock_engine().transactions_v2();
        let message =
            CoordinatorMessage::new(body, transactional_id, config.transaction_timeout_ms);
        let cap = message.version_cap(v2);
        let tx = &self.inbound_tx;
        match message {
            CoordinatorMessage::InitProducerId(body) => spawn_txn_call(
                tx,
                link,
                request,
                move |version| Ok(wire::init_producer_id_at(body, version)),
                cap,
                client_id,
                wire::init_producer_id_answer,
            ),
            CoordinatorMessage::AddPartitions {
                message,
                partitions,
            } => spawn_txn_call(
                tx,
                link,
                request,
                move |_| Ok(message),
                cap,
                client_id,
                move |r, _| wire::add_partitions_answer(r, partitions),
            ),
            CoordinatorMessage::AddOffsets(body) => spawn_txn_call(
                tx,
                link,
                request,
                move |_| Ok(body),
                cap,
                client_id,
                |r, _| wire::add_offsets_answer(r),
            ),
            CoordinatorMessage::TxnOffsetCommit(body) => spawn_txn_call(
                tx,
                link,
                request,
                move |version| wire::txn_offset_commit_at(body, version),
                cap,
                client_id,
                |r, _| wire::txn_offset_commit_answer(r),
            ),
            CoordinatorMessage::EndTxn(body) => spawn_txn_call(
                tx,
                link,
                request,
                move |_| Ok(body),
                cap,
                client_id,
                |r, _| wire::end_txn_answer(r),
            ),
        }
    }

    fn init_producer_id(&mut self, request: RequestId) {
        let tx = self.inbound_tx.clone();
        let Some(link) = self.any_link() else {
            let _ = tx.send(Inbound::Engine(Event::ProducerId {
                request,
                result: Err(Error::Timeout("no broker to ask for a producer id".into())),
            }));
            return;
        };
        let body = wire::idempotent_init_producer_id(self.shared.config.transaction_timeout_ms);
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        self.next_any_broker += 1;
        tokio::spawn(async move {
            let result = match link.call(body, None, client_id).await {
                Ok(response) => wire::producer_id_answer(response),
                Err(error) => Err(error),
            };
            let _ = tx.send(Inbound::Engine(Event::ProducerId { request, result }));
        });
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Before resolving, so a batch a compression worker puts back from now on is resolved
        // by the worker (`Shared::put_sealed`) and none is left behind.
        self.shared.driver_stopped.store(true, Ordering::SeqCst);
        self.abandon();
    }
}

/// Sends the body `build` makes for the version negotiated to `link` in its own task and
/// feeds the answer, mapped by `answer`, back to the engine as the result of `request`.
fn spawn_txn_call<R, B, F>(
    tx: &mpsc::UnboundedSender<Inbound>,
    link: BrokerLink,
    request: RequestId,
    build: B,
    cap: Option<i16>,
    client_id: Arc<str>,
    answer: F,
) where
    R: Request,
    R::Response: Send + 'static,
    B: FnOnce(i16) -> Result<R, Error> + Send + 'static,
    F: FnOnce(R::Response, &BrokerApiVersions) -> TxnResponse + Send + 'static,
{
    let tx = tx.clone();
    tokio::spawn(async move {
        let result = link
            .call_built(build, cap, client_id)
            .await
            .map(|(response, versions)| answer(response, &versions));
        let _ = tx.send(Inbound::Engine(Event::Txn { request, result }));
    });
}
