//! The network layer the clients share: broker connections (framing, version negotiation,
//! TLS, SASL), the security settings and secrets they are built from, the settings tables'
//! machinery and the rows every client shares, the property value parsers and the Java
//! properties file format, cluster metadata, coordinator look-up, reconnection backoff and the
//! readiness probe.
//! Nothing here knows about producing or consuming (ARCHITECTURE.md, "Layers").

pub(crate) mod connection;
pub(crate) mod coordinator;
pub(crate) mod jaas;
pub(crate) mod metadata;
pub(crate) mod properties;
pub(crate) mod properties_file;
pub(crate) mod ready;
pub(crate) mod reconnect;
pub(crate) mod sasl;
pub mod secret;
pub mod security;
pub(crate) mod settings;
#[cfg(feature = "tls")]
pub(crate) mod stores;
#[cfg(feature = "tls")]
pub(crate) mod tls;
