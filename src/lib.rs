//! `exactly`: a Kafka producer that speaks the Kafka wire protocol itself and delivers records
//! idempotently and transactionally, holding its guarantees when brokers die, acknowledgements
//! get lost and connections reset.
//!
//! ```no_run
//! use std::time::Duration;
//! use exactly::{Producer, Record};
//!
//! # #[tokio::main] async fn main() -> exactly::Result<()> {
//! let producer = Producer::builder()
//!     .bootstrap("127.0.0.1:9092")
//!     .linger(Duration::from_millis(5))
//!     .build()
//!     .await?;
//! // `send` waits only for buffer space; the returned future resolves with the record's
//! // exact offset, or with an error that says whether it may have been written.
//! let ack = producer.send(Record::to("orders").key("customer-7").value("paid")).await?;
//! match ack.await {
//!     Ok(meta) => println!("{}-{}@{}", meta.topic, meta.partition, meta.offset),
//!     Err(e) if e.is_indeterminate() => eprintln!("may have been written: {e}"),
//!     Err(e) => eprintln!("not written: {e}"),
//! }
//! producer.close().await?;
//! # Ok(()) }
//! ```
//!
//! Start at [`Producer`]: [`Producer::builder`] or [`Producer::from_properties`] (Kafka's
//! property names), [`Producer::send`], the transactional calls
//! ([`Producer::init_transactions`], [`Producer::begin_transaction`],
//! [`Producer::send_offsets_to_transaction`], [`Producer::commit_transaction`]),
//! [`Producer::metrics`] and the shutdown calls ([`Producer::close_with_timeout`]). Every
//! failure is an [`Error`], classified by [`Error::is_retriable`], [`Error::is_abortable`],
//! [`Error::is_fatal`] and [`Error::is_indeterminate`].
//!
//! The read side is [`Consumer`]: group membership (KIP-848, or the classic protocol),
//! `read_committed` by default, rebalance events before partitions change hands, and the
//! [`ConsumerGroupMetadata`] that [`Producer::send_offsets_to_transaction`] needs (KIP-447)
//! to close an exactly-once copy loop.
//!
//! [`eos`] closes the loop: [`eos::CopyLoop`] consumes, transforms, produces and commits the
//! consumed offsets in one transaction, reporting exact source → destination offsets, and
//! [`eos::OffsetTranslator`] turns a group's source offsets into destination offsets that never
//! skip a record (the MirrorMaker 2 offset translation bug, KAFKA-12468).
//!
//! [`Admin`] manages the cluster: topics ([`Admin::create_topics`], [`Admin::describe_topics`]),
//! configs, offsets ([`Admin::list_offsets`], [`Admin::delete_records`]) and consumer groups
//! ([`Admin::describe_groups`], [`Admin::list_group_offsets`], [`Admin::alter_group_offsets`]).
//!
//! Everything meant for users is re-exported here. The crate's layers (the wire codec, the
//! sans-I/O producer engine, the network layer, the simulation) are private; ARCHITECTURE.md
//! in the repository maps them.
#![deny(unsafe_code)]
// docs.rs (nightly, `--cfg docsrs`) marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod admin;
mod consumer;
mod engine;
pub mod eos;
pub mod error;
mod net;
mod observe;
mod producer;
mod protocol;
mod reachability;
// The deterministic simulation, for the crate's own simulation tests and fuzz targets: not a
// stable API. Its documentation is the module's own (an outer doc comment here would make
// rustdoc resolve the module's links from the crate root).
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod sim;
mod telemetry;
#[cfg(feature = "opentelemetry")]
mod trace_context;
mod types;

/// The crate's layers, for its own tests, fuzz targets and benchmarks: **not a stable API**.
/// Anything here may change or go in any release, patch releases included; the `internals`
/// feature that opens it is not for applications (docs.rs does not build it).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod __private {
    /// The sans-I/O producer engine.
    pub mod engine {
        pub use crate::engine::*;
    }
    /// The network layer both clients share.
    pub mod net {
        pub use crate::net::*;
    }
    /// The wire codec.
    pub mod protocol {
        pub use crate::protocol::*;
    }
    pub use crate::types::{BrokerId, Millis};
}

pub use admin::{
    Admin, AdminBuilder, AdminConfig, AlterConfig, BrokerInfo, ClusterView, CommittedOffset,
    ConfigEntry, ConfigResource, ConfigSource, CreatedTopic, GroupDescription, GroupListing,
    GroupMember, GroupType, ListedOffset, NewTopic, OffsetSpec, PartitionDescription,
    TopicDescription,
};
// The operator's calls: ACLs, quotas, SCRAM users, replicas, log dirs, features, tokens.
pub use admin::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission,
    ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter, DelegationToken, DeletedAcls,
    ElectionType, FeatureLevels, FeatureMetadata, FeatureUpgrade, LogDirDescription,
    NewDelegationToken, PartitionReassignment, PatternType, QuotaFilterComponent, ReplicaInfo,
    ResourcePattern, ResourceType, ScramCredentialAlteration, ScramCredentialInfo, ScramMechanism,
};
// The transaction doctor (KIP-664), the safe abort and the LSO explanation.
pub use admin::{
    AbortTransactionOptions, AbortTransactionSpec, ActiveProducer, FencedProducer,
    FindHangingOptions, HangingTransaction, LastStableOffsetExplanation, ListTransactionsFilter,
    OpenTransaction, SuggestedAction, TransactionDescription, TransactionListing, TransactionState,
    TransactionVerdict,
};
pub use consumer::fetcher::PartitionLag;
pub use consumer::hooks::{ConsumerHooks, Rebalance};
pub use consumer::metrics::ConsumerMetrics;
pub use consumer::{
    AssignmentStrategy, Consumer, ConsumerBuilder, ConsumerConfig, ConsumerEvent, ConsumerRecord,
    GenerationHold, GroupProtocol, IsolationLevel, OffsetReset,
};
pub use engine::Counters;
pub use engine::transaction::TxnState;
pub use error::{BrokerFailure, Error, Result};
pub use net::connection::ConnectionState;
pub use net::properties_file::{load_properties, parse_properties};
pub use net::secret::Secret;
#[cfg(feature = "aws-msk-iam")]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
pub use net::security::{AwsCredentials, AwsCredentialsProvider};
pub use net::security::{
    KerberosLogin, Pem, SaslConfig, SaslMechanism, SecurityConfig, SecurityProtocol, StoreType,
    TlsConfig, TokenEndpointLogin,
};
#[cfg(feature = "sasl-oauthbearer")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
pub use net::security::{OAuthBearerToken, OAuthBearerTokenProvider};
pub use observe::semconv::DURATION_BUCKETS_SECONDS;
pub use producer::config::CompressionConfig;
pub use producer::config::{Acks, ProducerBuilder, ProducerConfig};
pub use producer::hooks::ProducerHooks;
pub use producer::metrics::{BrokerMetrics, ProducerMetrics};
pub use producer::{DeliveryFuture, Producer, Record, RecordMetadata};
pub use protocol::error_code::ErrorCode;
pub use protocol::record_batch::Header;
pub use protocol::record_batch::{Codec, Compression, TimestampType};
pub use telemetry::ClientInstanceId;
pub use types::{ConsumerGroupMetadata, OffsetToCommit, PendingOffsets, TopicPartition};

/// The README's examples, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
