//! The tokio driver: one task that feeds the engine events, carries out its actions over the
//! broker links, keeps metadata fresh and sleeps until the engine's next deadline. It decides
//! nothing about delivery itself: that is the engine's job (ARCHITECTURE.md, layers).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::shared::Shared;
use crate::engine::accumulator::Accumulator;
use crate::engine::transaction::{CoordinatorKey, TxnRequest, TxnResponse};
use crate::engine::{Action, Engine, Event, PartitionResponse, ProducerIdentity, RequestId};
use crate::error::Error;
use crate::net::connection::{BrokerLink, LinkConfig, LinkSecurity};
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::frame::RequestFrame;
use crate::protocol::messages::add_offsets_to_txn::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
};
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction, TopicPartitionErrors,
};
use crate::protocol::messages::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::protocol::messages::find_coordinator::FindCoordinatorRequest;
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use crate::protocol::messages::produce::{
    PartitionProduceData, ProduceRecords, ProduceRequest, ProduceResponse, TopicProduceData,
    ZSTD_MIN_VERSION,
};
use crate::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
};
use crate::protocol::record_batch::{Codec, SealedBatch};
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Message};
use crate::reachability::Reachability;
use crate::types::{BrokerId, TopicPartition};

/// Produce v13 names topics by id; this producer names them, so it stays at v12.
const PRODUCE_VERSION_CAP: i16 = 12;

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
        }
    }

    pub async fn run(mut self) {
        let metadata_max_age = Duration::from_millis(self.shared.config.metadata_max_age_ms);
        let mut next_metadata = tokio::time::Instant::now();
        #[cfg(feature = "metrics")]
        let mut next_publish = tokio::time::Instant::now();
        loop {
            let now = self.shared.now_ms();
            if tokio::time::Instant::now() >= next_metadata {
                self.refresh_metadata();
                next_metadata = tokio::time::Instant::now() + metadata_max_age;
            }
            // The loop wakes at least once a second (see the sleep below).
            #[cfg(feature = "metrics")]
            if tokio::time::Instant::now() >= next_publish {
                self.shared.metrics().publish(&self.shared.config.client_id);
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
                        let leaders = {
                            let mut metadata = self
                                .shared
                                .metadata
                                .write()
                                .unwrap_or_else(|e| e.into_inner());
                            metadata.update(&response);
                            metadata.leaders()
                        };
                        self.shared.metadata_changed.notify_waiters();
                        self.with_engine(|engine, acc| {
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
        let topics: Vec<MetadataRequestTopic> = self
            .shared
            .wanted_topics()
            .into_iter()
            .map(|name| MetadataRequestTopic {
                name: Some(name.to_string()),
                ..MetadataRequestTopic::default()
            })
            .collect();
        let Some(link) = self.any_link() else { return };
        self.metadata_in_flight = true;
        let request = MetadataRequest {
            topics: Some(topics),
            allow_auto_topic_creation: false,
            ..MetadataRequest::default()
        };
        let tx = self.inbound_tx.clone();
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        // Bounded like every request: a connection that takes the request and never answers
        // (a black-holed network) must not hold the refreshes back for good.
        let timeout = Duration::from_millis(self.shared.config.request_timeout_ms);
        tokio::spawn(async move {
            let address: Arc<str> = Arc::from(link.address());
            let result =
                match tokio::time::timeout(timeout, link.call(request, None, client_id)).await {
                    Ok(result) => result,
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
        let produce = ProduceRequest {
            transactional_id: config.transactional_id.clone(),
            acks: config.acks.as_i16(),
            timeout_ms: i32::try_from(config.request_timeout_ms).unwrap_or(i32::MAX),
            topic_data: group_by_topic(&batches),
        };
        let expects_response = produce.acks != 0;
        // Transactional data under transactions v1 must not use Produce v12, which would add
        // the partition to the transaction implicitly (KIP-890).
        let transactional_v1 =
            config.transactional_id.is_some() && !self.shared.lock_engine().transactions_v2();
        let cap = if transactional_v1 {
            11
        } else {
            PRODUCE_VERSION_CAP
        };
        let client_id = config.client_id.clone();
        let zstd = batches.iter().any(|(_, b)| b.codec() == Codec::Zstd);
        link.send(
            Box::new(move |versions, correlation_id| {
                let version = versions
                    .negotiate::<ProduceRequest>(Some(cap))
                    .ok_or_else(|| Error::broker(ErrorCode::UNSUPPORTED_VERSION))?;
                if zstd && version < ZSTD_MIN_VERSION {
                    return Err(zstd_unsupported(version));
                }
                // The batches' bytes are referenced, not copied.
                let frame =
                    RequestFrame::produce(&produce, version, correlation_id, Some(&client_id));
                Ok((frame, version, expects_response))
            }),
            Box::new(move |result| {
                let _answer = span.enter();
                let event = match result {
                    Ok((version, body)) => {
                        match decode_produce(&body, version, &batches, expects_response) {
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
        let (key_type, key) = match key {
            CoordinatorKey::Transaction(id) => (FindCoordinatorRequest::KEY_TYPE_TRANSACTION, id),
            CoordinatorKey::Group(id) => (FindCoordinatorRequest::KEY_TYPE_GROUP, id),
        };
        let tx = self.inbound_tx.clone();
        let shared = Arc::clone(&self.shared);
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        tokio::spawn(async move {
            let result = match link
                .call(
                    FindCoordinatorRequest::single(key_type, key),
                    None,
                    client_id,
                )
                .await
            {
                Ok(response) => match response.coordinators.into_iter().next() {
                    Some(c) if c.error_code == 0 => {
                        // The coordinator may not be in our metadata yet: remember its address.
                        let address = format!("{}:{}", c.host, c.port);
                        shared
                            .metadata
                            .write()
                            .unwrap_or_else(|e| e.into_inner())
                            .brokers
                            .entry(c.node_id)
                            .or_insert(address);
                        Ok(TxnResponse::Coordinator(c.node_id))
                    }
                    Some(c) => Err(Error::Broker {
                        code: ErrorCode(c.error_code),
                        message: c.error_message,
                    }),
                    None => Err(Error::Timeout(
                        "FindCoordinator answered without a coordinator".into(),
                    )),
                },
                Err(error) => Err(error),
            };
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
        // Transactions v1 caps EndTxn and TxnOffsetCommit at v4 (v5 means v2: KIP-890).
        let txn_cap = if v2 { None } else { Some(4) };
        let tx = &self.inbound_tx;
        match body {
            TxnRequest::InitProducerId { current } => {
                let body = InitProducerIdRequest {
                    transactional_id: Some(transactional_id),
                    transaction_timeout_ms: i32::try_from(config.transaction_timeout_ms)
                        .unwrap_or(i32::MAX),
                    producer_id: current.map_or(-1, |c| c.producer_id),
                    producer_epoch: current.map_or(-1, |c| c.epoch),
                };
                spawn_txn_call(
                    tx,
                    link,
                    request,
                    body,
                    None,
                    client_id,
                    |r: InitProducerIdResponse, versions| {
                        Ok(TxnResponse::InitProducerId {
                            error: ErrorCode(r.error_code),
                            identity: ProducerIdentity {
                                producer_id: r.producer_id,
                                epoch: r.producer_epoch,
                            },
                            transactions_v2: versions.transactions_v2(),
                        })
                    },
                );
            }
            TxnRequest::AddPartitions {
                identity,
                partitions,
            } => {
                let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
                for tp in &partitions {
                    match topics.iter_mut().find(|t| *t.name == *tp.topic) {
                        Some(t) => t.partitions.push(tp.partition),
                        None => topics.push(AddPartitionsToTxnTopic {
                            name: tp.topic.to_string(),
                            partitions: vec![tp.partition],
                        }),
                    }
                }
                let body = AddPartitionsToTxnRequest {
                    transactions: vec![AddPartitionsToTxnTransaction {
                        transactional_id,
                        producer_id: identity.producer_id,
                        producer_epoch: identity.epoch,
                        verify_only: false,
                        topics,
                    }],
                };
                // v4+ is the brokers' batched form; clients use at most v3.
                spawn_txn_call(
                    tx,
                    link,
                    request,
                    body,
                    Some(3),
                    client_id,
                    move |r: AddPartitionsToTxnResponse, _| {
                        let top = ErrorCode(r.error_code);
                        let mut results = partition_codes(
                            r.results_by_transaction
                                .into_iter()
                                .flat_map(|t| t.topic_results)
                                .collect(),
                        );
                        if !top.is_ok() || results.is_empty() {
                            let code = if top.is_ok() {
                                ErrorCode::UNKNOWN_SERVER_ERROR
                            } else {
                                top
                            };
                            results = partitions.into_iter().map(|tp| (tp, code)).collect();
                        }
                        Ok(TxnResponse::AddPartitions(results))
                    },
                );
            }
            TxnRequest::AddOffsets { identity, group_id } => {
                let body = AddOffsetsToTxnRequest {
                    transactional_id,
                    producer_id: identity.producer_id,
                    producer_epoch: identity.epoch,
                    group_id,
                };
                spawn_txn_call(
                    tx,
                    link,
                    request,
                    body,
                    None,
                    client_id,
                    |r: AddOffsetsToTxnResponse, _| {
                        Ok(TxnResponse::AddOffsets(ErrorCode(r.error_code)))
                    },
                );
            }
            TxnRequest::TxnOffsetCommit {
                identity,
                group,
                offsets,
            } => {
                let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
                for o in offsets {
                    let partition = TxnOffsetCommitRequestPartition {
                        partition_index: o.partition.partition,
                        committed_offset: o.offset,
                        committed_leader_epoch: -1,
                        committed_metadata: o.metadata,
                    };
                    match topics.iter_mut().find(|t| *t.name == *o.partition.topic) {
                        Some(t) => t.partitions.push(partition),
                        None => topics.push(TxnOffsetCommitRequestTopic {
                            name: o.partition.topic.to_string(),
                            partitions: vec![partition],
                        }),
                    }
                }
                let body = TxnOffsetCommitRequest {
                    transactional_id,
                    group_id: group.group_id,
                    producer_id: identity.producer_id,
                    producer_epoch: identity.epoch,
                    generation_id: group.generation_id,
                    member_id: group.member_id,
                    group_instance_id: group.group_instance_id,
                    topics,
                };
                spawn_txn_call(
                    tx,
                    link,
                    request,
                    body,
                    txn_cap,
                    client_id,
                    |r: TxnOffsetCommitResponse, _| {
                        Ok(TxnResponse::TxnOffsetCommit(partition_codes(r.topics)))
                    },
                );
            }
            TxnRequest::EndTxn { identity, commit } => {
                let body = EndTxnRequest {
                    transactional_id,
                    producer_id: identity.producer_id,
                    producer_epoch: identity.epoch,
                    committed: commit,
                };
                spawn_txn_call(
                    tx,
                    link,
                    request,
                    body,
                    txn_cap,
                    client_id,
                    |r: EndTxnResponse, _| {
                        // v5 (transactions v2) carries the identity for the next transaction.
                        let identity = (r.producer_id >= 0).then_some(ProducerIdentity {
                            producer_id: r.producer_id,
                            epoch: r.producer_epoch,
                        });
                        Ok(TxnResponse::EndTxn {
                            error: ErrorCode(r.error_code),
                            identity,
                        })
                    },
                );
            }
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
        let body = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::try_from(self.shared.config.transaction_timeout_ms)
                .unwrap_or(i32::MAX),
            producer_id: -1,
            producer_epoch: -1,
        };
        let client_id: Arc<str> = Arc::from(self.shared.config.client_id.as_str());
        self.next_any_broker += 1;
        tokio::spawn(async move {
            let result = match link.call(body, None, client_id).await {
                Ok(InitProducerIdResponse {
                    error_code: 0,
                    producer_id,
                    producer_epoch,
                    ..
                }) => Ok(ProducerIdentity {
                    producer_id,
                    epoch: producer_epoch,
                }),
                Ok(response) => Err(Error::broker(ErrorCode(response.error_code))),
                Err(error) => Err(error),
            };
            let _ = tx.send(Inbound::Engine(Event::ProducerId { request, result }));
        });
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// Sends `call` to `link` in its own task and feeds the answer, mapped by `answer`, back to
/// the engine as the result of `request`.
fn spawn_txn_call<R, F>(
    tx: &mpsc::UnboundedSender<Inbound>,
    link: BrokerLink,
    request: RequestId,
    body: R,
    cap: Option<i16>,
    client_id: Arc<str>,
    answer: F,
) where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
    F: FnOnce(R::Response, &BrokerApiVersions) -> Result<TxnResponse, Error> + Send + 'static,
{
    let tx = tx.clone();
    tokio::spawn(async move {
        let result = match link.call_with_versions(body, cap, client_id).await {
            Ok((response, versions)) => answer(response, &versions),
            Err(error) => Err(error),
        };
        let _ = tx.send(Inbound::Engine(Event::Txn { request, result }));
    });
}

fn partition_codes(topics: Vec<TopicPartitionErrors>) -> Vec<(TopicPartition, ErrorCode)> {
    topics
        .into_iter()
        .flat_map(|t| {
            let topic: Arc<str> = Arc::from(t.name.as_str());
            t.partitions.into_iter().map(move |p| {
                (
                    TopicPartition::new(Arc::clone(&topic), p.partition_index),
                    ErrorCode(p.error_code),
                )
            })
        })
        .collect()
}

/// Why zstd batches cannot go to a broker whose highest Produce version is `version`: as
/// the Java client, an unsupported-version error (fatal, T5), which names the setting.
fn zstd_unsupported(version: i16) -> Error {
    Error::Broker {
        code: ErrorCode::UNSUPPORTED_VERSION,
        message: Some(format!(
            "compression.type=zstd needs Produce v{ZSTD_MIN_VERSION} (Kafka 2.1+); \
             this broker takes at most v{version}"
        )),
    }
}

/// Groups `(partition, batch)` pairs into Produce topic data, keeping their order.
fn group_by_topic(batches: &[(TopicPartition, SealedBatch)]) -> Vec<TopicProduceData> {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for (tp, batch) in batches {
        let partition = PartitionProduceData {
            index: tp.partition,
            // The stamped header (61 bytes, copied) and the body (shared, not copied).
            records: Some(ProduceRecords::from_parts(vec![
                Bytes::copy_from_slice(batch.header()),
                batch.body().clone(),
            ])),
        };
        match topics.iter_mut().find(|t| *t.name == *tp.topic) {
            Some(topic) => topic.partition_data.push(partition),
            None => topics.push(TopicProduceData {
                name: tp.topic.to_string(),
                partition_data: vec![partition],
                ..TopicProduceData::default()
            }),
        }
    }
    topics
}

/// Maps a Produce response onto the request's partitions, with the broker's throttle time.
/// With acks=0 there is no response: every batch counts as written with an unknown offset, as
/// in the Java client.
fn decode_produce(
    body: &[u8],
    version: i16,
    batches: &[(TopicPartition, SealedBatch)],
    expects_response: bool,
) -> Result<(Vec<PartitionResponse>, u64), Error> {
    if !expects_response {
        let partitions = batches
            .iter()
            .map(|(tp, _)| PartitionResponse {
                partition: tp.clone(),
                error: ErrorCode::NONE,
                base_offset: -1,
                log_append_time: -1,
                log_start_offset: -1,
                message: None,
            })
            .collect();
        return Ok((partitions, 0));
    }
    let mut d = Decoder::new(body);
    let response = ProduceResponse::decode(&mut d, version)?;
    d.finish("ProduceResponse")?;
    let mut out = Vec::new();
    for topic in response.responses {
        for p in topic.partition_responses {
            let Some((tp, _)) = batches
                .iter()
                .find(|(tp, _)| *tp.topic == *topic.name && tp.partition == p.index)
            else {
                continue;
            };
            out.push(PartitionResponse {
                partition: tp.clone(),
                error: ErrorCode(p.error_code),
                base_offset: p.base_offset,
                log_append_time: p.log_append_time_ms,
                log_start_offset: p.log_start_offset,
                message: p.error_message,
            });
        }
    }
    Ok((out, u64::try_from(response.throttle_time_ms).unwrap_or(0)))
}
