//! `exactly`: a Kafka producer that speaks the Kafka wire protocol itself and delivers records
//! idempotently and transactionally, holding its guarantees when brokers die, acknowledgements
//! get lost and connections reset.
//!
//! The crate is layered (see the project's DESIGN.md):
//! - [`protocol`]: a pure codec for the Kafka wire protocol and RecordBatch v2.
//! - [`engine`]: the sans-I/O producer core (accumulator, sequences, retries, epoch bumps).
//! - [`client`]: the tokio driver (connections, metadata) and configuration.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod engine;
pub mod error;
mod producer;
pub mod protocol;
#[cfg(feature = "sim")]
pub mod sim;

pub use client::config::{Acks, ProducerBuilder, ProducerConfig};
pub use client::metrics::{BrokerMetrics, ConnectionState, ProducerMetrics};
pub use client::secret::Secret;
#[cfg(feature = "sasl-oauthbearer")]
pub use client::security::{OAuthBearerToken, OAuthBearerTokenProvider};
pub use client::security::{SaslMechanism, SecurityProtocol};
pub use engine::Counters;
pub use engine::transaction::{ConsumerGroupMetadata, OffsetToCommit, PendingOffsets, TxnState};
pub use error::{Error, Result};
pub use producer::{DeliveryFuture, Producer, Record, RecordMetadata};
pub use protocol::record_batch::Header;
pub use protocol::record_batch::{Codec, Compression};

/// The README's examples, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
