//! The transaction doctor of KIP-664: list and describe transactions, describe the producers
//! a partition's leader knows, find hanging transactions and abort them.
//!
//! A transaction *hangs* when a partition holds an open transaction that its coordinator will
//! never end there, so the partition's last stable offset stops and every `read_committed`
//! reader with it (KAFKA-12671). The coordinator cannot help; the only way out is to write
//! the abort marker on the partition directly, as the coordinator would have:
//! WriteTxnMarkers to the partition's leader, with the producer's id, epoch and the
//! coordinator epoch the leader last saw (Java's `Admin.abortTransaction`).
//!
//! Routing: ListTransactions goes to every broker (each lists the transactional ids it
//! coordinates), DescribeTransactions to each id's transaction coordinator, DescribeProducers
//! and WriteTxnMarkers to each partition's leader.

mod explain;
mod fence;
mod hanging;

pub use explain::{
    LastStableOffsetExplanation, OpenTransaction, SuggestedAction, TransactionVerdict,
};
pub use fence::FencedProducer;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, DescribeTransactionsResponse,
    ListTransactionsRequest, ProducerId, TransactionalId, WriteTxnMarkersRequest,
};

use super::configs::ConfigResource;
use super::offsets::{AsyncLeaderCall, OffsetSpec};
use super::wire::{by_topic, outcome, string};
use super::{Admin, CoordinatorAnswer, CoordinatorKind, coordinator_error};
use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::{str_bytes, topic_name};
use crate::types::IsolationLevel;
use crate::types::{BrokerId, TopicPartition};

/// `transaction.max.timeout.ms`'s default: no transaction the brokers accept may run longer.
const DEFAULT_MAX_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// How many times a broker still loading its transaction state is asked again by
/// [`Admin::list_transactions`], within the call's deadline.
const LOADING_ROUNDS: usize = 20;

/// A transaction's state as its coordinator reports it (Kafka's `TransactionState`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum TransactionState {
    /// Registered, no transaction open.
    Empty,
    /// A transaction is open.
    Ongoing,
    /// Committing: the coordinator is writing commit markers.
    PrepareCommit,
    /// Aborting: the coordinator is writing abort markers.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The transactional id expired and is being removed.
    Dead,
    /// A newer producer fenced this one; its transaction is being aborted.
    PrepareEpochFence,
    /// A state this crate does not know, by the name the broker sent.
    Other(String),
}

impl TransactionState {
    /// The state named `name` on the wire.
    pub fn from_name(name: &str) -> Self {
        match name {
            "Empty" => TransactionState::Empty,
            "Ongoing" => TransactionState::Ongoing,
            "PrepareCommit" => TransactionState::PrepareCommit,
            "PrepareAbort" => TransactionState::PrepareAbort,
            "CompleteCommit" => TransactionState::CompleteCommit,
            "CompleteAbort" => TransactionState::CompleteAbort,
            "Dead" => TransactionState::Dead,
            "PrepareEpochFence" => TransactionState::PrepareEpochFence,
            other => TransactionState::Other(other.to_owned()),
        }
    }

    /// The state's name on the wire (what ListTransactions filters by).
    pub fn name(&self) -> &str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
            TransactionState::Other(name) => name,
        }
    }

    /// Whether the coordinator will still write markers to the transaction's partitions:
    /// it is open, or committing or aborting. DescribeTransactions lists partitions only in
    /// these states.
    pub fn writes_markers(&self) -> bool {
        matches!(
            self,
            TransactionState::Ongoing
                | TransactionState::PrepareCommit
                | TransactionState::PrepareAbort
        )
    }
}

/// Which transactions [`Admin::list_transactions`] returns; the default lists them all.
/// The conditions combine: a transaction must meet each one set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListTransactionsFilter {
    /// Only these states (empty: any).
    pub states: Vec<TransactionState>,
    /// Only these producer ids (empty: any).
    pub producer_ids: Vec<i64>,
    /// Only transactions open for longer than this (KIP-994; brokers from Kafka 3.8).
    pub running_longer_than: Option<Duration>,
}

impl ListTransactionsFilter {
    /// Only transactions in `states`.
    pub fn states(mut self, states: impl IntoIterator<Item = TransactionState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Only transactions of these producer ids.
    pub fn producer_ids(mut self, ids: impl IntoIterator<Item = i64>) -> Self {
        self.producer_ids = ids.into_iter().collect();
        self
    }

    /// Only transactions open for longer than `duration`.
    pub fn running_longer_than(mut self, duration: Duration) -> Self {
        self.running_longer_than = Some(duration);
        self
    }

    fn request(&self) -> ListTransactionsRequest {
        let duration_ms = self
            .running_longer_than
            .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        ListTransactionsRequest::default()
            .with_state_filters(self.states.iter().map(|s| str_bytes(s.name())).collect())
            .with_producer_id_filters(self.producer_ids.iter().copied().map(ProducerId).collect())
            .with_duration_filter(duration_ms)
    }
}

/// One transactional id as the coordinator that holds it lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TransactionState,
    /// The node id of its transaction coordinator.
    pub coordinator: BrokerId,
}

/// A transactional id as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// The node id of its transaction coordinator.
    pub coordinator: BrokerId,
    /// Its state.
    pub state: TransactionState,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its current producer epoch.
    pub producer_epoch: i16,
    /// The transaction timeout its producer registered.
    pub timeout: Duration,
    /// When the open transaction started (milliseconds since the epoch); `None` when none is
    /// open.
    pub start_time_ms: Option<i64>,
    /// The partitions the coordinator will write markers to: those of the open transaction,
    /// or those still waiting for their marker while it commits or aborts.
    pub partitions: BTreeSet<TopicPartition>,
}

/// A producer a partition's leader keeps state for (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActiveProducer {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The sequence number of its last record on the partition (-1 if none).
    pub last_sequence: i32,
    /// The timestamp of its last record on the partition (milliseconds since the epoch, as
    /// the producer set it).
    pub last_timestamp_ms: i64,
    /// The epoch of the transaction coordinator that last wrote a marker for it here; `None`
    /// if none did.
    pub coordinator_epoch: Option<i32>,
    /// The offset its open transaction on the partition started at; `None` when it has none
    /// open there.
    pub current_txn_start_offset: Option<i64>,
}

/// Where [`Admin::find_hanging_transactions`] looks, and from what age.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FindHangingOptions {
    /// Only these topics (empty: every topic but Kafka's internal ones); one the cluster
    /// does not have fails the call with UNKNOWN_TOPIC_OR_PARTITION.
    pub topics: Vec<String>,
    /// Report open transactions whose producer last wrote longer ago than this. `None`:
    /// the brokers' `transaction.max.timeout.ms` (the largest if they differ), past which no
    /// live transaction can still be open.
    pub older_than: Option<Duration>,
}

impl FindHangingOptions {
    /// Only these topics.
    pub fn topics(mut self, topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// Report transactions older than `age`.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }
}

/// An open transaction on a partition that its coordinator will not end.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HangingTransaction {
    /// The partition it holds open.
    pub partition: TopicPartition,
    /// Its producer id.
    pub producer_id: i64,
    /// Its producer epoch.
    pub producer_epoch: i16,
    /// The coordinator epoch the partition's leader last saw for the producer.
    pub coordinator_epoch: Option<i32>,
    /// The offset it started at: the partition's last stable offset cannot pass it.
    pub start_offset: i64,
    /// The timestamp of the producer's last record on the partition.
    pub last_timestamp_ms: i64,
    /// How long ago that was, when it was found.
    pub age: Duration,
    /// The transactional id a coordinator holds the producer id under, if any.
    pub transactional_id: Option<String>,
}

impl HangingTransaction {
    /// What [`Admin::abort_transaction`] needs to abort it.
    pub fn abort_spec(&self) -> AbortTransactionSpec {
        AbortTransactionSpec {
            partition: self.partition.clone(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            coordinator_epoch: self.coordinator_epoch.unwrap_or(0),
        }
    }
}

/// An open transaction to abort on one partition (Java's `AbortTransactionSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AbortTransactionSpec {
    /// The partition.
    pub partition: TopicPartition,
    /// The producer id of the open transaction.
    pub producer_id: i64,
    /// Its producer epoch: the leader refuses an older one than it holds.
    pub producer_epoch: i16,
    /// The coordinator epoch: the leader refuses an older one than it last saw.
    pub coordinator_epoch: i32,
}

impl AbortTransactionSpec {
    /// The open transaction of `producer` on `partition`, as its leader described it.
    pub fn for_producer(partition: TopicPartition, producer: &ActiveProducer) -> Self {
        AbortTransactionSpec {
            partition,
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            coordinator_epoch: producer.coordinator_epoch.unwrap_or(0),
        }
    }
}

impl CoordinatorAnswer for DescribeTransactionsResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(self.transaction_states.iter().map(|s| s.error_code))
    }
}

/// DescribeProducers to one leader.
struct DescribeProducers;

impl AsyncLeaderCall<(), Vec<ActiveProducer>> for DescribeProducers {
    async fn call(
        &self,
        admin: &Admin,
        leader: i32,
        items: Vec<(TopicPartition, ())>,
    ) -> Result<Vec<(TopicPartition, Result<Vec<ActiveProducer>>)>> {
        let request = DescribeProducersRequest::default().with_topics(
            by_topic(items)
                .into_iter()
                .map(|(name, partitions)| {
                    TopicRequest::default()
                        .with_name(topic_name(&name))
                        .with_partition_indexes(partitions.into_iter().map(|(p, ())| p).collect())
                })
                .collect(),
        );
        let response = admin.call_broker(leader, request).await?;
        let mut out = Vec::new();
        for topic in response.topics {
            let name = string(&topic.name.0);
            for p in topic.partitions {
                let tp = TopicPartition::new(name.as_str(), p.partition_index);
                let producers = outcome(p.error_code, p.error_message.as_ref()).and_then(|()| {
                    p.active_producers
                        .iter()
                        .map(active_producer)
                        .collect::<Result<Vec<_>>>()
                });
                out.push((tp, producers));
            }
        }
        Ok(out)
    }
}

/// A producer state of a DescribeProducers answer. The schema carries the epoch in 32 bits;
/// Kafka's epochs are 16-bit, so a larger one is a broker's mistake.
fn active_producer(
    state: &kafka_protocol::messages::describe_producers_response::ProducerState,
) -> Result<ActiveProducer> {
    let producer_epoch = i16::try_from(state.producer_epoch).map_err(|_| {
        Error::InvalidState(format!(
            "DescribeProducers named producer {} with epoch {}, outside Kafka's 16-bit epochs",
            state.producer_id.0, state.producer_epoch
        ))
    })?;
    Ok(ActiveProducer {
        producer_id: state.producer_id.0,
        producer_epoch,
        last_sequence: state.last_sequence,
        last_timestamp_ms: state.last_timestamp,
        coordinator_epoch: (state.coordinator_epoch >= 0).then_some(state.coordinator_epoch),
        current_txn_start_offset: (state.current_txn_start_offset >= 0)
            .then_some(state.current_txn_start_offset),
    })
}

/// WriteTxnMarkers (abort) to one leader.
struct WriteAbortMarkers;

impl AsyncLeaderCall<AbortTransactionSpec, ()> for WriteAbortMarkers {
    async fn call(
        &self,
        admin: &Admin,
        leader: i32,
        items: Vec<(TopicPartition, AbortTransactionSpec)>,
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let markers = items
            .iter()
            .map(|(tp, spec)| {
                WritableTxnMarker::default()
                    .with_producer_id(ProducerId(spec.producer_id))
                    .with_producer_epoch(spec.producer_epoch)
                    .with_coordinator_epoch(spec.coordinator_epoch)
                    .with_transaction_result(false)
                    .with_topics(vec![
                        WritableTxnMarkerTopic::default()
                            .with_name(topic_name(&tp.topic))
                            .with_partition_indexes(vec![tp.partition]),
                    ])
            })
            .collect();
        let request = WriteTxnMarkersRequest::default().with_markers(markers);
        let response = admin.call_broker(leader, request).await?;
        let mut out = Vec::new();
        for marker in response.markers {
            for topic in marker.topics {
                let name = string(&topic.name.0);
                for p in topic.partitions {
                    let tp = TopicPartition::new(name.as_str(), p.partition_index);
                    out.push((tp, outcome(p.error_code, None)));
                }
            }
        }
        Ok(out)
    }
}

impl Admin {
    /// The transactional ids the cluster's coordinators hold, as `filter` narrows them:
    /// ListTransactions on every broker (each lists the ids it coordinates), sorted by
    /// transactional id.
    pub async fn list_transactions(
        &self,
        filter: &ListTransactionsFilter,
    ) -> Result<Vec<TransactionListing>> {
        self.within("ListTransactions", async {
            let cluster = self.cluster().await?;
            let mut listings = BTreeMap::new();
            for broker in cluster.brokers.keys().copied() {
                let mut rounds = 0;
                let response = loop {
                    let response = self.call_broker(broker, filter.request()).await?;
                    rounds += 1;
                    // A broker that just became a coordinator is still reading its log.
                    if response.error_code != ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0
                        || rounds == LOADING_ROUNDS
                    {
                        break response;
                    }
                    tokio::time::sleep(self.shared.config.retry_backoff()).await;
                };
                outcome(response.error_code, None)?;
                for state in response.transaction_states {
                    let listing = TransactionListing {
                        transactional_id: string(&state.transactional_id.0),
                        producer_id: state.producer_id.0,
                        state: TransactionState::from_name(state.transaction_state.as_str()),
                        coordinator: broker,
                    };
                    listings.insert(listing.transactional_id.clone(), listing);
                }
            }
            Ok(listings.into_values().collect())
        })
        .await
    }

    /// Describes transactional ids, each through its transaction coordinator: state,
    /// producer id and epoch, timeout, start time and partitions. One result per id
    /// (TRANSACTIONAL_ID_NOT_FOUND for one no coordinator holds).
    pub async fn describe_transactions(
        &self,
        transactional_ids: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<TransactionDescription>>> {
        self.per_transactional_id("DescribeTransactions", transactional_ids, async |id| {
            self.describe_transaction(id).await
        })
        .await
    }

    /// `one` for each distinct transactional id in turn, all within one deadline: one result
    /// per id.
    pub(super) async fn per_transactional_id<T>(
        &self,
        what: &str,
        transactional_ids: impl IntoIterator<Item = impl AsRef<str>>,
        one: impl AsyncFn(&str) -> Result<T>,
    ) -> Result<BTreeMap<String, Result<T>>> {
        let ids: BTreeSet<String> = transactional_ids
            .into_iter()
            .map(|id| id.as_ref().to_owned())
            .collect();
        self.within(what, async {
            let mut results = BTreeMap::new();
            for id in ids {
                let result = one(&id).await;
                results.insert(id, result);
            }
            Ok(results)
        })
        .await
    }

    async fn describe_transaction(&self, id: &str) -> Result<TransactionDescription> {
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(str_bytes(id))]);
        let response = self
            .call_coordinator(CoordinatorKind::Transaction, id, request)
            .await?;
        let coordinator = self
            .coordinator_node(CoordinatorKind::Transaction, id)
            .await?;
        let state = response
            .transaction_states
            .into_iter()
            .find(|s| s.transactional_id.0.as_str() == id)
            .ok_or_else(|| {
                Error::InvalidState(format!(
                    "the transaction coordinator did not describe {id:?}"
                ))
            })?;
        outcome(state.error_code, None)?;
        let partitions = state
            .topics
            .iter()
            .flat_map(|t| {
                let name = string(&t.topic.0);
                t.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(name.as_str(), *p))
            })
            .collect();
        Ok(TransactionDescription {
            transactional_id: id.to_owned(),
            coordinator,
            state: TransactionState::from_name(state.transaction_state.as_str()),
            producer_id: state.producer_id.0,
            producer_epoch: state.producer_epoch,
            timeout: Duration::from_millis(
                u64::try_from(state.transaction_timeout_ms).unwrap_or(0),
            ),
            start_time_ms: (state.transaction_start_time_ms >= 0)
                .then_some(state.transaction_start_time_ms),
            partitions,
        })
    }

    /// The producers each partition's leader keeps state for: id, epoch, last sequence and
    /// timestamp, coordinator epoch, and where its open transaction started. One result per
    /// partition.
    pub async fn describe_producers(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, Result<Vec<ActiveProducer>>>> {
        let items: Vec<(TopicPartition, ())> = partitions.into_iter().map(|tp| (tp, ())).collect();
        self.within(
            "DescribeProducers",
            self.on_leaders(items, DescribeProducers),
        )
        .await
    }

    /// The open transactions the partitions' leaders hold that their coordinators will never
    /// end (KIP-664's "find-hanging"): open for longer than the bound, and either of a
    /// producer id no coordinator holds, or not among the partitions its coordinator will
    /// write a marker to. A live transaction, open and tracked by its coordinator, is never
    /// reported; one the coordinator will still abort on its timeout neither.
    ///
    /// The age is that of the producer's last record on the partition (its timestamp), as
    /// Kafka's `kafka-transactions.sh find-hanging` measures it.
    pub async fn find_hanging_transactions(
        &self,
        options: &FindHangingOptions,
    ) -> Result<Vec<HangingTransaction>> {
        self.within("find hanging transactions", async {
            let cluster = self.cluster().await?;
            let older_than = match options.older_than {
                Some(age) => age,
                None => self.max_transaction_timeout(cluster.brokers.keys()).await?,
            };
            if let Some(missing) = options
                .topics
                .iter()
                .find(|t| !cluster.topics.contains_key(*t))
            {
                return Err(Error::Broker {
                    code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    message: Some(format!("topic {missing:?}")),
                });
            }
            let partitions: Vec<TopicPartition> = cluster
                .topics
                .values()
                .filter(|t| {
                    if options.topics.is_empty() {
                        !t.internal
                    } else {
                        options.topics.contains(&t.name)
                    }
                })
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| TopicPartition::new(t.name.as_str(), p.partition))
                })
                .collect();
            let mut producers = BTreeMap::new();
            for (tp, described) in self.describe_producers(partitions).await? {
                producers.insert(tp, described?);
            }
            let candidates =
                hanging::open_transactions_older_than(&producers, now_ms(), older_than);
            if candidates.is_empty() {
                return Ok(Vec::new());
            }
            let (transactional_ids, descriptions) = self
                .coordinators_of(candidates.iter().map(|c| c.producer.producer_id).collect())
                .await?;
            Ok(hanging::hanging(
                candidates,
                &transactional_ids,
                &descriptions,
            ))
        })
        .await
    }

    /// What the coordinators say about `producer_ids`: the transactional id each is held
    /// under (ListTransactions, a producer id no coordinator holds left out), and each of
    /// those ids' description (DescribeTransactions; an id that expired since it was listed
    /// left out: nobody will end its transaction).
    async fn coordinators_of(
        &self,
        producer_ids: BTreeSet<i64>,
    ) -> Result<(
        BTreeMap<i64, String>,
        BTreeMap<String, TransactionDescription>,
    )> {
        if producer_ids.is_empty() {
            return Ok(Default::default());
        }
        let filter = ListTransactionsFilter::default().producer_ids(producer_ids.clone());
        let transactional_ids: BTreeMap<i64, String> = self
            .list_transactions(&filter)
            .await?
            .into_iter()
            .filter(|l| producer_ids.contains(&l.producer_id))
            .map(|l| (l.producer_id, l.transactional_id))
            .collect();
        let mut descriptions = BTreeMap::new();
        for (id, described) in self
            .describe_transactions(transactional_ids.values())
            .await?
        {
            match described {
                Ok(description) => {
                    descriptions.insert(id, description);
                }
                Err(e) if e.code() == Some(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((transactional_ids, descriptions))
    }

    /// Why `partition`'s last stable offset is where it is: its last stable offset and high
    /// watermark (ListOffsets), every open transaction on it with its producer's id, epoch,
    /// first offset and last write (DescribeProducers), what its coordinator says (state,
    /// how long open, timeout and time left: ListTransactions, DescribeTransactions), which
    /// are hanging, and what can safely be done
    /// ([`LastStableOffsetExplanation::actions`]): wait for a live one or fence its
    /// transactional id ([`Admin::fence_producers`]), abort a hanging one. Its `Display` is
    /// the explanation to print.
    pub async fn explain_last_stable_offset(
        &self,
        partition: &TopicPartition,
    ) -> Result<LastStableOffsetExplanation> {
        self.within("explain the last stable offset", async {
            let mut ends = Vec::new();
            for isolation in [
                IsolationLevel::ReadCommitted,
                IsolationLevel::ReadUncommitted,
            ] {
                let mut listed = self
                    .list_offsets([(partition.clone(), OffsetSpec::Latest)], isolation)
                    .await?;
                let offset = listed.remove(partition).unwrap_or_else(|| {
                    Err(Error::InvalidState(format!(
                        "the leader of {partition:?} did not answer for it"
                    )))
                })?;
                ends.push(offset.offset);
            }
            let mut described = self.describe_producers([partition.clone()]).await?;
            let producers = described.remove(partition).unwrap_or_else(|| {
                Err(Error::InvalidState(format!(
                    "the leader of {partition:?} did not describe its producers"
                )))
            })?;
            let open_ids = producers
                .iter()
                .filter(|p| p.current_txn_start_offset.is_some())
                .map(|p| p.producer_id)
                .collect();
            let (transactional_ids, descriptions) = self.coordinators_of(open_ids).await?;
            Ok(LastStableOffsetExplanation {
                partition: partition.clone(),
                last_stable_offset: ends[0],
                high_watermark: ends[1],
                open_transactions: explain::open_transactions(
                    partition,
                    &producers,
                    &transactional_ids,
                    &descriptions,
                    now_ms(),
                ),
            })
        })
        .await
    }

    /// The largest `transaction.max.timeout.ms` of `brokers` (Kafka's default, 15 minutes,
    /// where a broker does not report it).
    async fn max_transaction_timeout(
        &self,
        brokers: impl Iterator<Item = &BrokerId>,
    ) -> Result<Duration> {
        let described = self
            .describe_configs(brokers.map(|b| ConfigResource::Broker(*b)))
            .await?;
        let mut max = None;
        for entries in described.into_values() {
            let timeout = entries?
                .into_iter()
                .find(|e| e.name == "transaction.max.timeout.ms")
                .and_then(|e| e.value?.parse::<u64>().ok())
                .map(Duration::from_millis);
            max = max.max(timeout);
        }
        Ok(max.unwrap_or(DEFAULT_MAX_TRANSACTION_TIMEOUT))
    }

    /// Aborts a *hanging* transaction on one partition by writing the abort marker there
    /// (WriteTxnMarkers to the partition's leader), as the coordinator would have: the
    /// partition's last stable offset moves past it. The call needs the CLUSTER_ACTION
    /// permission, as the coordinator's own markers do; the leader refuses an epoch or
    /// coordinator epoch older than it holds (INVALID_PRODUCER_EPOCH,
    /// TRANSACTION_COORDINATOR_FENCED).
    ///
    /// It checks with the transaction's coordinator first
    /// ([`Admin::explain_last_stable_offset`]): a transaction its coordinator still holds
    /// open on the partition (or is ending) is **refused** with [`Error::InvalidState`],
    /// which says how long it has been open, how long its producer has been silent and when
    /// the coordinator will time it out. Such a transaction is live: its producer may write
    /// more and commit, and an abort here would leave the committed transaction without the
    /// records written before it. Wait for the coordinator, or fence the transactional id
    /// ([`Admin::fence_producers`]), which aborts it whole. A transaction no coordinator will
    /// end there (hanging, KIP-664) is aborted. See [`Admin::abort_transaction_with`] to
    /// force it.
    pub async fn abort_transaction(&self, spec: &AbortTransactionSpec) -> Result<()> {
        self.abort_transaction_with(spec, &AbortTransactionOptions::default())
            .await
    }

    /// [`Admin::abort_transaction`] with options: with
    /// [`AbortTransactionOptions::force_live`] a transaction its coordinator still holds open
    /// is aborted on this partition too (see there for what that breaks).
    pub async fn abort_transaction_with(
        &self,
        spec: &AbortTransactionSpec,
        options: &AbortTransactionOptions,
    ) -> Result<()> {
        if !options.force_live {
            let explanation = self.explain_last_stable_offset(&spec.partition).await?;
            let live = explanation.open_transactions.iter().find(|open| {
                open.producer.producer_id == spec.producer_id
                    && open.verdict != TransactionVerdict::Hanging
            });
            if let Some(open) = live {
                return Err(Error::InvalidState(format!(
                    "refusing to abort a live transaction on {}-{}: {open}; aborting it here \
                     would break its atomicity (its producer may still commit): wait for its \
                     coordinator, fence its transactional id, or force the abort",
                    spec.partition.topic, spec.partition.partition
                )));
            }
        }
        let items = vec![(spec.partition.clone(), spec.clone())];
        let mut results = self
            .within("WriteTxnMarkers", self.on_leaders(items, WriteAbortMarkers))
            .await?;
        results.remove(&spec.partition).unwrap_or_else(|| {
            Err(Error::InvalidState(format!(
                "the leader of {:?} did not answer for it",
                spec.partition
            )))
        })
    }
}

/// How [`Admin::abort_transaction_with`] aborts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AbortTransactionOptions {
    /// Abort even a transaction its coordinator still holds open on the partition.
    pub force_live: bool,
}

impl AbortTransactionOptions {
    /// Abort even a *live* transaction: one its coordinator still holds open on the
    /// partition. **This breaks that transaction's atomicity.** The records it wrote to the
    /// partition so far are aborted at once, but neither the coordinator nor the producer
    /// learns it: the producer may write more there and commit, and the commit succeeds,
    /// showing `read_committed` readers only what it wrote after the abort (and all it wrote
    /// to its other partitions). Only for a transaction whose producer is known to be gone
    /// and that cannot wait for its coordinator's timeout, and even then fencing its
    /// transactional id ([`Admin::fence_producers`]) aborts it whole instead.
    pub fn force_live(mut self) -> Self {
        self.force_live = true;
        self
    }
}

/// The wall clock in milliseconds since the epoch, as record timestamps are.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_producers_response::ProducerState;

    use super::*;

    #[test]
    fn states_keep_their_wire_names() {
        for name in [
            "Empty",
            "Ongoing",
            "PrepareCommit",
            "PrepareAbort",
            "CompleteCommit",
            "CompleteAbort",
            "Dead",
            "PrepareEpochFence",
            "SomethingNewer",
        ] {
            assert_eq!(TransactionState::from_name(name).name(), name);
        }
        assert_eq!(
            TransactionState::from_name("SomethingNewer"),
            TransactionState::Other("SomethingNewer".into())
        );
        let writing: Vec<&str> = ["Ongoing", "PrepareCommit", "PrepareAbort", "CompleteAbort"]
            .into_iter()
            .filter(|n| TransactionState::from_name(n).writes_markers())
            .collect();
        assert_eq!(writing, ["Ongoing", "PrepareCommit", "PrepareAbort"]);
    }

    #[test]
    fn the_filter_becomes_the_request() {
        let all = ListTransactionsFilter::default().request();
        assert!(all.state_filters.is_empty() && all.producer_id_filters.is_empty());
        assert_eq!(all.duration_filter, -1, "no duration filter: any age");
        let narrow = ListTransactionsFilter::default()
            .states([TransactionState::Ongoing])
            .producer_ids([7])
            .running_longer_than(Duration::from_secs(2))
            .request();
        assert_eq!(narrow.state_filters, [str_bytes("Ongoing")]);
        assert_eq!(narrow.producer_id_filters, [ProducerId(7)]);
        assert_eq!(narrow.duration_filter, 2000);
    }

    #[test]
    fn producer_states_say_none_for_minus_one() {
        let state = ProducerState::default()
            .with_producer_id(ProducerId(9))
            .with_producer_epoch(4)
            .with_last_sequence(11)
            .with_last_timestamp(1_000)
            .with_coordinator_epoch(-1)
            .with_current_txn_start_offset(-1);
        let producer = active_producer(&state).expect("valid");
        assert_eq!(
            producer,
            ActiveProducer {
                producer_id: 9,
                producer_epoch: 4,
                last_sequence: 11,
                last_timestamp_ms: 1_000,
                coordinator_epoch: None,
                current_txn_start_offset: None,
            }
        );
        let open = active_producer(
            &state
                .clone()
                .with_coordinator_epoch(2)
                .with_current_txn_start_offset(40),
        )
        .expect("valid");
        assert_eq!(
            (open.coordinator_epoch, open.current_txn_start_offset),
            (Some(2), Some(40))
        );
        let spec = AbortTransactionSpec::for_producer(TopicPartition::new("t", 0), &open);
        assert_eq!((spec.producer_epoch, spec.coordinator_epoch), (4, 2));
    }

    #[test]
    fn an_epoch_beyond_16_bits_is_refused() {
        let state = ProducerState::default().with_producer_epoch(40_000);
        assert!(matches!(
            active_producer(&state),
            Err(Error::InvalidState(_))
        ));
    }
}
