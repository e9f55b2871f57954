//! The admin client: topics, configs, offsets, groups, transactions, ACLs, quotas, SCRAM
//! users, leader elections, reassignments, log directories, features and delegation tokens,
//! on the connection layer the producer and the consumer share (`src/net`) and on
//! `kafka-protocol`'s generated requests and responses (`src/protocol/generated.rs`).
//!
//! Legacy AlterConfigs (which replaces a resource's whole config, dropping every setting not
//! named) is absent by design: [`Admin::incremental_alter_configs`] (KIP-339) changes only
//! what it names, and Java's admin deprecated the other.
//!
//! Every call has one deadline ([`AdminConfig::request_timeout_ms`], or
//! [`Admin::with_timeout`] for some calls) that bounds all it does: the requests, the brokers
//! tried, a coordinator asked again. Failures are the crate's [`Error`]: a broker's refusal is
//! [`Error::Broker`] with Kafka's error code and the broker's message; a call that touches
//! several topics or groups returns one result per item.

mod acls;
mod config;
mod configs;
mod features;
mod groups;
mod log_dirs;
mod offsets;
mod quotas;
mod replicas;
mod routing;
mod tokens;
mod topics;
mod transactions;
mod users;
mod wire;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

pub use acls::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, DeletedAcls,
    PatternType, ResourcePattern, ResourceType,
};
pub use config::{AdminBuilder, AdminConfig};
pub use configs::{AlterConfig, ConfigEntry, ConfigResource, ConfigSource};
pub use features::{FeatureLevels, FeatureMetadata, FeatureUpgrade};
pub use groups::{CommittedOffset, GroupDescription, GroupListing, GroupMember, GroupType};
pub use log_dirs::{LogDirDescription, ReplicaInfo};
pub use offsets::{ListedOffset, OffsetSpec};
pub use quotas::{
    ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter, QuotaFilterComponent,
};
pub use replicas::{ElectionType, PartitionReassignment};
pub(crate) use routing::{CoordinatorAnswer, CoordinatorKind, coordinator_error};
pub use tokens::{DelegationToken, NewDelegationToken};
pub use topics::{CreatedTopic, NewTopic};
pub use transactions::{
    AbortTransactionOptions, AbortTransactionSpec, ActiveProducer, FencedProducer,
    FindHangingOptions, HangingTransaction, LastStableOffsetExplanation, ListTransactionsFilter,
    OpenTransaction, SuggestedAction, TransactionDescription, TransactionListing, TransactionState,
    TransactionVerdict,
};
pub use users::{ScramCredentialAlteration, ScramCredentialInfo, ScramMechanism};

use kafka_protocol::messages::DescribeClusterRequest;

use crate::error::Result;
use crate::net::connection::{BrokerLink, LinkConfig};
use crate::net::ready::{BootstrapLinks, Probe, bootstrap_links, first_metadata};
use crate::protocol::error_code::ErrorCode;

/// A Kafka admin client: a cheap, cloneable handle (clones share the connections).
///
/// ```no_run
/// # async fn run() -> exactly::Result<()> {
/// let admin = exactly::Admin::builder().bootstrap("127.0.0.1:9092").build().await?;
/// let cluster = admin.describe_cluster().await?;
/// println!("{} brokers", cluster.brokers.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Admin {
    shared: Arc<Shared>,
    /// The deadline of each call made through this handle.
    timeout: Duration,
}

/// What every clone of an [`Admin`] shares.
struct Shared {
    config: AdminConfig,
    client_id: Arc<str>,
    link_config: LinkConfig,
    bootstrap: Vec<BrokerLink>,
    /// Which known broker a request to any broker tries first (turns spread the calls).
    next: AtomicUsize,
    directory: Mutex<routing::Directory>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("bootstrap_servers", &self.shared.config.bootstrap_servers)
            .field("client_id", &self.shared.config.client_id)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// A builder with the default configuration.
    pub fn builder() -> AdminBuilder {
        AdminBuilder::new()
    }

    /// An admin client from `(property, value)` pairs under Kafka's names
    /// (`bootstrap.servers`, `client.id`, `security.protocol`, `ssl.*`, `sasl.*`,
    /// `default.api.timeout.ms` / `request.timeout.ms`).
    pub async fn from_properties<I, K, V>(props: I) -> Result<Admin>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Admin::with_config(AdminConfig::from_properties(props)?).await
    }

    /// Connects with a validated configuration: asks the bootstrap servers for the cluster's
    /// brokers until one answers, within the deadline. When none does, the error
    /// ([`crate::Error::NoBrokerAnswered`]) names each address with its last failure; an
    /// authentication or TLS failure ends the wait at once.
    pub async fn with_config(config: AdminConfig) -> Result<Admin> {
        config.validate()?;
        let timeout = config.request_timeout();
        let BootstrapLinks {
            link_config,
            client_id,
            links: bootstrap,
        } = bootstrap_links(
            &config.client_id,
            timeout,
            (
                Duration::from_millis(config.reconnect_backoff_ms),
                Duration::from_millis(config.reconnect_backoff_max_ms),
            ),
            &config.security,
            &config.bootstrap_servers,
        )?;
        let probe = Probe {
            request_timeout: timeout,
            retry_backoff: config.retry_backoff(),
            deadline: Some((Instant::now() + timeout).into_std()),
        };
        let (response, _) = first_metadata(&bootstrap, &client_id, probe).await?;
        let admin = Admin {
            shared: Arc::new(Shared {
                config,
                client_id,
                link_config,
                bootstrap,
                next: AtomicUsize::new(0),
                directory: Mutex::default(),
            }),
            timeout,
        };
        admin.learn_brokers(&response);
        Ok(admin)
    }

    /// The same client with another deadline for each call made through the returned handle
    /// (the connections are shared).
    pub fn with_timeout(&self, timeout: Duration) -> Admin {
        Admin {
            shared: Arc::clone(&self.shared),
            timeout,
        }
    }

    /// The settings.
    pub fn config(&self) -> &AdminConfig {
        &self.shared.config
    }

    /// The node id of `group`'s coordinator (FindCoordinator; kept for later calls).
    pub async fn group_coordinator(&self, group: &str) -> Result<i32> {
        let find = self.coordinator_node(CoordinatorKind::Group, group);
        self.within("FindCoordinator", find).await
    }

    /// The node id of the transaction coordinator of `transactional_id` (FindCoordinator;
    /// kept for later calls).
    pub async fn transaction_coordinator(&self, transactional_id: &str) -> Result<i32> {
        let find = self.coordinator_node(CoordinatorKind::Transaction, transactional_id);
        self.within("FindCoordinator", find).await
    }

    /// The cluster: its id, brokers, controller and what the caller may do to it
    /// (DescribeCluster, KIP-700, with the authorized operations of KIP-430), and its topics,
    /// internal ones included (Metadata). From a broker older than Kafka 2.8, which has no
    /// DescribeCluster, the metadata alone (no authorized operations).
    pub async fn describe_cluster(&self) -> Result<ClusterView> {
        self.within("DescribeCluster", async {
            let mut view = self.cluster().await?;
            let request =
                DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
            match self.call_any(request).await {
                Ok(answer) => {
                    wire::outcome(answer.error_code, answer.error_message.as_ref())?;
                    view.cluster_id = Some(wire::string(&answer.cluster_id));
                    view.controller =
                        (answer.controller_id.0 >= 0).then_some(answer.controller_id.0);
                    view.brokers = answer
                        .brokers
                        .iter()
                        .map(|b| {
                            let broker = BrokerInfo {
                                id: b.broker_id.0,
                                host: wire::string(&b.host),
                                port: b.port,
                                rack: b.rack.as_ref().map(wire::string),
                            };
                            (broker.id, broker)
                        })
                        .collect();
                    view.authorized_operations =
                        AclOperation::from_bits(answer.cluster_authorized_operations);
                }
                Err(e) if e.code() == Some(ErrorCode::UNSUPPORTED_VERSION) => {}
                Err(e) => return Err(e),
            }
            Ok(view)
        })
        .await
    }
}

/// The cluster as its metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterView {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The node id the metadata names as controller (under KRaft a broker, which forwards
    /// to the active controller); `None` if it named none.
    pub controller: Option<i32>,
    /// The brokers, by node id.
    pub brokers: std::collections::BTreeMap<i32, BrokerInfo>,
    /// The topics, by name (internal ones included, see [`TopicDescription::internal`]; a
    /// topic the metadata gives an error for, such as one being created, is left out).
    pub topics: std::collections::BTreeMap<String, TopicDescription>,
    /// What the caller may do to the cluster resource (`Alter`, `Describe`,
    /// `ClusterAction`, ...), as the broker's authorizer says; `None` when not known (a
    /// broker without DescribeCluster).
    pub authorized_operations: Option<Vec<AclOperation>>,
}

impl ClusterView {
    /// The leader of a partition, if the metadata names one.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.topics
            .get(topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)?
            .leader
    }
}

/// One broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerInfo {
    /// Its node id.
    pub id: i32,
    /// The host it advertises.
    pub host: String,
    /// The port it advertises.
    pub port: i32,
    /// Its rack, if it has one.
    pub rack: Option<String>,
}

/// One topic: its partitions with their leaders and replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// Its id (KIP-516).
    pub topic_id: [u8; 16],
    /// Whether it is one of Kafka's own (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
    /// Its partitions, by partition number.
    pub partitions: Vec<PartitionDescription>,
}

impl TopicDescription {
    /// The replication factor: the replicas of its first partition.
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionDescription {
    /// The partition number.
    pub partition: i32,
    /// Its leader's node id; `None` when it has no leader right now.
    pub leader: Option<i32>,
    /// The leader's epoch.
    pub leader_epoch: i32,
    /// The replicas' node ids, the preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas that are offline.
    pub offline_replicas: Vec<i32>,
}
