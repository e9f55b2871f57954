//! Where an admin request goes, within the call's deadline: any broker that answers, one
//! broker by node id, or the coordinator of a group or a transactional id (found with
//! FindCoordinator and asked again when it moved or is still loading).
//!
//! The links are the clients' [`BrokerLink`]s (one per address, connected on demand), and a
//! request that no broker answered ends in [`Error::NoBrokerAnswered`] with each address's last
//! failure, as the clients' readiness probe does (`net/ready.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::{Admin, BrokerInfo, ClusterView, PartitionDescription, TopicDescription};
use crate::error::{Error, Result};
use crate::net::connection::BrokerLink;
use crate::net::coordinator::{coordinator_answer, find_coordinator_request};
use crate::net::metadata::metadata_request;
use crate::net::ready::MetadataAnswers;
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::metadata::{MetadataResponse, MetadataResponseTopic};
use crate::types::CoordinatorKey;

/// How many times one call asks again (a coordinator that moved, a broker that did not
/// answer) before its deadline; the deadline usually ends it first.
const MAX_ATTEMPTS: usize = 50;

/// Which coordinator a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CoordinatorKind {
    /// A consumer group's (the key is the group id).
    Group,
    /// A transactional id's (the key is the transactional id).
    Transaction,
}

impl CoordinatorKind {
    fn key(self, key: &str) -> CoordinatorKey {
        match self {
            CoordinatorKind::Group => CoordinatorKey::Group(key.to_owned()),
            CoordinatorKind::Transaction => CoordinatorKey::Transaction(key.to_owned()),
        }
    }

    fn name(self) -> &'static str {
        match self {
            CoordinatorKind::Group => "group",
            CoordinatorKind::Transaction => "transaction",
        }
    }
}

/// An answer from a coordinator that may say the coordinator moved or is still loading.
pub(crate) trait CoordinatorAnswer {
    /// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, if the
    /// answer carries one (then the request is sent again); `None` otherwise.
    fn coordinator_error(&self) -> Option<ErrorCode>;
}

/// The first of `codes` that sends a request to its coordinator again (see
/// [`CoordinatorAnswer`]): what an implementation returns over its error codes.
pub(crate) fn coordinator_error(codes: impl IntoIterator<Item = i16>) -> Option<ErrorCode> {
    codes.into_iter().map(ErrorCode).find(|&code| {
        code == ErrorCode::NOT_COORDINATOR
            || code == ErrorCode::COORDINATOR_NOT_AVAILABLE
            || code == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
    })
}

/// Builds a request for the version negotiated with the broker, for requests whose fields
/// depend on it (see `BrokerLink::call_built`); called once per broker tried.
trait BuildRequest<R>: Fn(i16) -> Result<R> + Clone + Send + 'static {}

impl<R, F: Fn(i16) -> Result<R> + Clone + Send + 'static> BuildRequest<R> for F {}

/// The builder of a request that is the same at every version.
fn as_built<R: Clone + Send + 'static>(request: R) -> impl BuildRequest<R> {
    move |_| Ok(request.clone())
}

/// A broker's link and address, as metadata or FindCoordinator named it.
#[derive(Clone)]
pub(super) struct KnownBroker {
    address: String,
    link: BrokerLink,
}

/// The brokers and coordinators an admin client learnt.
#[derive(Default)]
pub(super) struct Directory {
    brokers: BTreeMap<i32, KnownBroker>,
    coordinators: HashMap<(CoordinatorKind, String), i32>,
}

impl Admin {
    /// The deadline of a call starting now.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Runs a whole admin call (however many requests it takes) within the deadline.
    pub(crate) async fn within<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout(format!(
                "{what} did not finish within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    fn directory(&self) -> std::sync::MutexGuard<'_, Directory> {
        self.shared
            .directory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The link to `address` for node `broker`, made on first use.
    fn link_to(&self, broker: i32, address: String) -> BrokerLink {
        let mut directory = self.directory();
        match directory.brokers.get(&broker) {
            Some(known) if known.address == address => known.link.clone(),
            _ => {
                let link = BrokerLink::spawn(address.clone(), self.shared.link_config.clone());
                directory.brokers.insert(
                    broker,
                    KnownBroker {
                        address,
                        link: link.clone(),
                    },
                );
                link
            }
        }
    }

    /// Learns the brokers of a Metadata answer.
    pub(super) fn learn_brokers(&self, response: &MetadataResponse) {
        for broker in &response.brokers {
            self.link_to(broker.node_id, format!("{}:{}", broker.host, broker.port));
        }
    }

    /// The links to try for a request to any broker: the known brokers, starting at the next
    /// one in turn (so calls spread), then the bootstrap servers.
    fn any_links(&self) -> Vec<BrokerLink> {
        let mut links: Vec<BrokerLink> = self
            .directory()
            .brokers
            .values()
            .map(|b| b.link.clone())
            .collect();
        if !links.is_empty() {
            let start = self.shared.next.fetch_add(1, Ordering::Relaxed) % links.len();
            links.rotate_left(start);
        }
        links.extend(self.shared.bootstrap.iter().cloned());
        links
    }

    /// One request on `link`, built for the version negotiated, bounded by `deadline`.
    async fn call_link<R>(
        &self,
        link: &BrokerLink,
        build: impl BuildRequest<R>,
        deadline: Instant,
    ) -> Result<R::Response>
    where
        R: Request,
        R::Response: Send + 'static,
    {
        let call = link.call_built(build, None, Arc::clone(&self.shared.client_id));
        match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => result.map(|(response, _)| response),
            Err(_) => Err(Error::Timeout(format!(
                "no answer from {} within the call's deadline",
                link.address()
            ))),
        }
    }

    /// Sends `request` to any broker that answers (the known brokers in turn, then the
    /// bootstrap servers), within the call's deadline.
    pub(crate) async fn call_any<R>(&self, request: R) -> Result<R::Response>
    where
        R: Request + Clone + Send + 'static,
        R::Response: Send + 'static,
    {
        self.call_any_until(as_built(request), self.deadline())
            .await
    }

    /// Sends the request `build` makes for the version negotiated with the broker (for a
    /// request whose fields move between versions) to any broker, as [`Admin::call_any`].
    pub(crate) async fn call_any_built<R, B>(&self, build: B) -> Result<R::Response>
    where
        R: Request,
        R::Response: Send + 'static,
        B: Fn(i16) -> Result<R> + Clone + Send + 'static,
    {
        self.call_any_until(build, self.deadline()).await
    }

    async fn call_any_until<R>(
        &self,
        build: impl BuildRequest<R>,
        deadline: Instant,
    ) -> Result<R::Response>
    where
        R: Request,
        R::Response: Send + 'static,
    {
        let started = Instant::now();
        let mut answers = MetadataAnswers::default();
        for _ in 0..MAX_ATTEMPTS {
            for link in self.any_links() {
                if Instant::now() >= deadline {
                    return Err(answers.no_broker_answered(started.elapsed()));
                }
                match self.call_link(&link, build.clone(), deadline).await {
                    Ok(response) => return Ok(response),
                    // A broker that could not be reached: the next may answer.
                    Err(e) if e.is_retriable() && !e.is_fatal() => {
                        answers.failed(link.address(), e)
                    }
                    Err(e) => return Err(e),
                }
            }
            self.pause_until(deadline).await;
        }
        Err(answers.no_broker_answered(started.elapsed()))
    }

    /// Waits `retry.backoff.ms`, or until the deadline if that comes first.
    async fn pause_until(&self, deadline: Instant) {
        let wake = (Instant::now() + self.shared.config.retry_backoff()).min(deadline);
        tokio::time::sleep_until(wake).await;
    }

    /// Sends `request` to broker `broker` (a node id from the cluster's metadata), within the
    /// call's deadline.
    pub(crate) async fn call_broker<R>(&self, broker: i32, request: R) -> Result<R::Response>
    where
        R: Request + Clone + Send + 'static,
        R::Response: Send + 'static,
    {
        self.call_broker_until(broker, as_built(request), self.deadline())
            .await
    }

    async fn call_broker_until<R>(
        &self,
        broker: i32,
        build: impl BuildRequest<R>,
        deadline: Instant,
    ) -> Result<R::Response>
    where
        R: Request,
        R::Response: Send + 'static,
    {
        let known = self
            .directory()
            .brokers
            .get(&broker)
            .map(|b| b.link.clone());
        let link = match known {
            Some(link) => link,
            None => {
                // A broker that joined since: the cluster's current metadata names it.
                self.metadata_until(Some(Vec::new()), deadline).await?;
                let known = self
                    .directory()
                    .brokers
                    .get(&broker)
                    .map(|b| b.link.clone());
                known.ok_or_else(|| Error::Broker {
                    code: ErrorCode::BROKER_NOT_AVAILABLE,
                    message: Some(format!("broker {broker} is not in the cluster's metadata")),
                })?
            }
        };
        self.call_link(&link, build, deadline).await
    }

    /// Sends `request` to the coordinator of `key`: FindCoordinator first (the answer is kept
    /// for the next call), then the request; asked again, within the call's deadline, when
    /// the answer says the coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) or
    /// is loading (COORDINATOR_LOAD_IN_PROGRESS), or the coordinator could not be reached.
    pub(crate) async fn call_coordinator<R>(
        &self,
        kind: CoordinatorKind,
        key: &str,
        request: R,
    ) -> Result<R::Response>
    where
        R: Request + Clone + Send + 'static,
        R::Response: CoordinatorAnswer + Send + 'static,
    {
        let deadline = self.deadline();
        let entry = (kind, key.to_owned());
        let mut last: Option<Error> = None;
        for _ in 0..MAX_ATTEMPTS {
            if Instant::now() >= deadline {
                break;
            }
            let node = match self.known_coordinator(kind, key) {
                Some(node) => node,
                None => match self.find_coordinator(kind, key, deadline).await {
                    Ok(node) => node,
                    Err(e) if e.is_retriable() && !e.is_fatal() => {
                        last = Some(e);
                        self.pause_until(deadline).await;
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            let code = match self
                .call_broker_until(node, as_built(request.clone()), deadline)
                .await
            {
                Ok(response) => match response.coordinator_error() {
                    None => return Ok(response),
                    Some(code) => code,
                },
                Err(e) if e.is_retriable() && !e.is_fatal() => {
                    self.directory().coordinators.remove(&entry);
                    last = Some(e);
                    self.pause_until(deadline).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if code != ErrorCode::COORDINATOR_LOAD_IN_PROGRESS {
                self.directory().coordinators.remove(&entry);
            }
            last = Some(Error::broker(code));
            self.pause_until(deadline).await;
        }
        Err(self.gave_up(
            format!("the {} coordinator of {key:?} did not answer", kind.name()),
            last,
        ))
    }

    /// The node id of the coordinator of `key`: the one found before, or FindCoordinator's
    /// answer, within the call's deadline.
    pub(crate) async fn coordinator_node(&self, kind: CoordinatorKind, key: &str) -> Result<i32> {
        match self.known_coordinator(kind, key) {
            Some(node) => Ok(node),
            None => self.find_coordinator(kind, key, self.deadline()).await,
        }
    }

    /// FindCoordinator for one key: the coordinator's node id, remembered with its address.
    /// Asked again, within `deadline`, while the answer is that no coordinator is available
    /// yet (as for the first transactional id or group of a cluster, whose internal topic is
    /// being created) or it is loading.
    async fn find_coordinator(
        &self,
        kind: CoordinatorKind,
        key: &str,
        deadline: Instant,
    ) -> Result<i32> {
        let mut last = None;
        for _ in 0..MAX_ATTEMPTS {
            let wanted = key.to_owned();
            let build = move |version| find_coordinator_request(kind.key(&wanted), version);
            let response = self.call_any_until(build, deadline).await?;
            match coordinator_answer(response) {
                Ok(found) => {
                    self.link_to(found.node_id, found.address);
                    self.directory()
                        .coordinators
                        .insert((kind, key.to_owned()), found.node_id);
                    return Ok(found.node_id);
                }
                Err(Error::Broker { code, message }) if coordinator_error([code.0]).is_some() => {
                    last = Some(Error::Broker {
                        code,
                        message: message.filter(|m| !m.is_empty()),
                    });
                }
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                break;
            }
            self.pause_until(deadline).await;
        }
        Err(self.gave_up(format!("no {} coordinator of {key:?}", kind.name()), last))
    }

    /// The [`Error::Timeout`] of a call that gave up on `what` at its deadline, with the last
    /// retriable error seen.
    fn gave_up(&self, what: String, last: Option<Error>) -> Error {
        let last = last.map_or_else(String::new, |e| format!(" (last: {e})"));
        Error::Timeout(format!(
            "{what} within {} ms{last}",
            self.timeout.as_millis()
        ))
    }

    /// The coordinator of `key` found before, if any.
    fn known_coordinator(&self, kind: CoordinatorKind, key: &str) -> Option<i32> {
        self.directory()
            .coordinators
            .get(&(kind, key.to_owned()))
            .copied()
    }

    /// Metadata for `topics` (`None`: every topic; `Some(vec![])`: brokers only), within
    /// `deadline`; the brokers it names are learnt.
    async fn metadata_until(
        &self,
        topics: Option<Vec<String>>,
        deadline: Instant,
    ) -> Result<MetadataResponse> {
        let build = move |version| Ok(metadata_request(topics.clone(), version));
        let response = self.call_any_until(build, deadline).await?;
        if response.error_code != 0 {
            return Err(Error::broker(ErrorCode(response.error_code)));
        }
        self.learn_brokers(&response);
        Ok(response)
    }

    /// Metadata for `topics` (`None`: every topic), within the call's deadline.
    pub(crate) async fn metadata(&self, topics: Option<Vec<String>>) -> Result<MetadataResponse> {
        self.metadata_until(topics, self.deadline()).await
    }

    /// The cluster as its metadata describes it: brokers, controller, and every topic's
    /// partitions with leader, replicas and in-sync replicas.
    pub(crate) async fn cluster(&self) -> Result<ClusterView> {
        let response = self.metadata(None).await?;
        Ok(ClusterView::from_metadata(&response))
    }
}

impl ClusterView {
    /// The view of a Metadata answer (topics it has an error for are left out).
    pub(crate) fn from_metadata(response: &MetadataResponse) -> Self {
        ClusterView {
            cluster_id: response.cluster_id.clone(),
            controller: (response.controller_id >= 0).then_some(response.controller_id),
            brokers: response
                .brokers
                .iter()
                .map(|b| {
                    (
                        b.node_id,
                        BrokerInfo {
                            id: b.node_id,
                            host: b.host.clone(),
                            port: b.port,
                            rack: b.rack.clone(),
                        },
                    )
                })
                .collect(),
            topics: response
                .topics
                .iter()
                .filter_map(|t| topic_description(t).ok())
                .map(|t| (t.name.clone(), t))
                .collect(),
            authorized_operations: None,
        }
    }
}

/// One topic of a Metadata answer, or the error the broker gave for it.
pub(crate) fn topic_description(topic: &MetadataResponseTopic) -> Result<TopicDescription> {
    let name = topic.name.clone().unwrap_or_default();
    if topic.error_code != 0 {
        return Err(Error::Broker {
            code: ErrorCode(topic.error_code),
            message: Some(format!("topic {name:?}")),
        });
    }
    let mut partitions: Vec<PartitionDescription> = topic
        .partitions
        .iter()
        .map(|p| PartitionDescription {
            partition: p.partition_index,
            leader: (p.leader_id >= 0).then_some(p.leader_id),
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.clone(),
            isr: p.isr_nodes.clone(),
            offline_replicas: p.offline_replicas.clone(),
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(TopicDescription {
        name,
        topic_id: topic.topic_id,
        internal: topic.is_internal,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::metadata::{
        BrokerEndpoint, MetadataResponsePartition, MetadataResponseTopic,
    };

    #[test]
    fn only_a_moved_or_loading_coordinator_sends_a_request_again() {
        assert_eq!(coordinator_error([0, 0]), None);
        assert_eq!(
            coordinator_error([0, 69]),
            None,
            "GROUP_ID_NOT_FOUND is an answer"
        );
        assert_eq!(coordinator_error([0, 16]), Some(ErrorCode::NOT_COORDINATOR));
        assert_eq!(
            coordinator_error([14, 15]),
            Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
        );
        assert_eq!(
            coordinator_error([15]),
            Some(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        );
    }

    fn partition(index: i32, leader: i32, replicas: &[i32]) -> MetadataResponsePartition {
        MetadataResponsePartition {
            partition_index: index,
            leader_id: leader,
            replica_nodes: replicas.to_vec(),
            isr_nodes: replicas[..1].to_vec(),
            ..MetadataResponsePartition::default()
        }
    }

    #[test]
    fn the_cluster_view_of_a_metadata_answer() {
        let response = MetadataResponse {
            controller_id: 2,
            brokers: vec![
                BrokerEndpoint {
                    node_id: 2,
                    host: "b".into(),
                    port: 9093,
                    rack: None,
                },
                BrokerEndpoint {
                    node_id: 1,
                    host: "a".into(),
                    port: 9092,
                    rack: Some("r1".into()),
                },
            ],
            topics: vec![
                MetadataResponseTopic {
                    name: Some("t".into()),
                    partitions: vec![partition(1, -1, &[1, 2]), partition(0, 2, &[2, 1])],
                    ..MetadataResponseTopic::default()
                },
                MetadataResponseTopic {
                    name: Some("gone".into()),
                    error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
                    ..MetadataResponseTopic::default()
                },
            ],
            ..MetadataResponse::default()
        };
        let view = ClusterView::from_metadata(&response);
        assert_eq!(view.controller, Some(2));
        assert_eq!(view.brokers.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(view.brokers[&1].rack.as_deref(), Some("r1"));
        assert_eq!(
            view.topics.keys().collect::<Vec<_>>(),
            ["t"],
            "errors left out"
        );
        let t = &view.topics["t"];
        assert_eq!(
            t.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(t.replication_factor(), 2);
        assert_eq!(view.leader("t", 0), Some(2));
        assert_eq!(view.leader("t", 1), None, "no leader right now");
        let Err(Error::Broker { code, message }) = topic_description(&response.topics[1]) else {
            panic!("an error topic is an error");
        };
        assert_eq!(code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(message.as_deref(), Some("topic \"gone\""));
    }
}
