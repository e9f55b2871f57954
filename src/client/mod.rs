//! The tokio driver: broker connections, metadata, the task that runs the engine, and the
//! producer's configuration and partitioning.

pub mod config;
pub(crate) mod connection;
pub(crate) mod driver;
pub(crate) mod jaas;
pub(crate) mod metadata;
pub mod metrics;
pub mod partitioner;
pub(crate) mod producer_shared;
pub(crate) mod ready;
pub(crate) mod reconnect;
pub(crate) mod sasl;
pub mod secret;
pub mod security;
#[cfg(feature = "tls")]
pub(crate) mod tls;
