//! The admin client's configuration: the settings it shares with the producer and the consumer
//! (bootstrap servers, client id, security), under Kafka's property names, and the builder.
//!
//! As for the clients, both ways in (the builder's typed setters and `set(name, value)`) end
//! in one validation that names the Kafka property at fault.

use std::time::Duration;

use crate::error::Error;
use crate::net::properties::{self, check_bootstrap_servers, config_error, parse_number};
use crate::net::security::SecurityConfig;
use crate::types::millis;

const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
const CLIENT_ID: &str = "client.id";
const REQUEST_TIMEOUT_MS: &str = "request.timeout.ms";
const DEFAULT_API_TIMEOUT_MS: &str = "default.api.timeout.ms";
const RETRY_BACKOFF_MS: &str = "retry.backoff.ms";
const RECONNECT_BACKOFF_MS: &str = "reconnect.backoff.ms";
const RECONNECT_BACKOFF_MAX_MS: &str = "reconnect.backoff.max.ms";

/// Every property name [`AdminConfig::set`] accepts (besides the `security.*`, `ssl.*` and
/// `sasl.*` ones every client takes).
const ADMIN_PROPERTY_NAMES: [&str; 7] = [
    BOOTSTRAP_SERVERS,
    CLIENT_ID,
    REQUEST_TIMEOUT_MS,
    DEFAULT_API_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    RECONNECT_BACKOFF_MS,
    RECONNECT_BACKOFF_MAX_MS,
];

/// The admin client's settings.
///
/// An admin call has one bound, its deadline: every request it sends, every retry (a
/// coordinator that moved or is loading) and every broker it tries fit in it. Java's admin
/// client has two settings for this (`default.api.timeout.ms` for the call,
/// `request.timeout.ms` for each request); here either property sets the one deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminConfig {
    /// `bootstrap.servers`. Required.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// Every call's deadline (default 30 s): `request.timeout.ms` or
    /// `default.api.timeout.ms`; [`crate::Admin::with_timeout`] changes it for some calls.
    pub request_timeout_ms: u64,
    /// `retry.backoff.ms`: the pause before a call asks a coordinator again.
    pub retry_backoff_ms: u64,
    /// `reconnect.backoff.ms`.
    pub reconnect_backoff_ms: u64,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max_ms: u64,
    /// `security.protocol` and the `ssl.*` / `sasl.*` settings, as the clients take them.
    pub security: SecurityConfig,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            bootstrap_servers: Vec::new(),
            client_id: "exactly-admin".to_owned(),
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            reconnect_backoff_ms: 50,
            reconnect_backoff_max_ms: 1_000,
            security: SecurityConfig::default(),
        }
    }
}

impl AdminConfig {
    /// A validated configuration from `(property, value)` pairs under Kafka's names.
    pub fn from_properties<I, K, V>(props: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        properties::from_properties(props, Self::set, Self::validate)
    }

    /// Sets one property by its Kafka name (value trimmed, parsed as Java's `ConfigDef` does).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let value = value.trim();
        match key {
            BOOTSTRAP_SERVERS => {
                self.bootstrap_servers = properties::bootstrap_entries(value);
            }
            CLIENT_ID => self.client_id = value.to_owned(),
            REQUEST_TIMEOUT_MS | DEFAULT_API_TIMEOUT_MS => {
                self.request_timeout_ms = parse_number(key, value)?
            }
            RETRY_BACKOFF_MS => self.retry_backoff_ms = parse_number(key, value)?,
            RECONNECT_BACKOFF_MS => self.reconnect_backoff_ms = parse_number(key, value)?,
            RECONNECT_BACKOFF_MAX_MS => self.reconnect_backoff_max_ms = parse_number(key, value)?,
            _ => {
                return properties::set_shared_property(
                    &mut self.security,
                    key,
                    value,
                    &ADMIN_PROPERTY_NAMES,
                    "admin",
                );
            }
        }
        Ok(())
    }

    /// Checks every setting; the first problem found names the property to change.
    pub fn validate(&self) -> Result<(), Error> {
        check_bootstrap_servers(BOOTSTRAP_SERVERS, &self.bootstrap_servers)?;
        if self.request_timeout_ms == 0 {
            return Err(config_error(REQUEST_TIMEOUT_MS, "must be positive"));
        }
        self.security.validate()
    }

    /// Every call's deadline.
    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// The pause before asking again, at least a millisecond.
    pub(crate) fn retry_backoff(&self) -> Duration {
        Duration::from_millis(self.retry_backoff_ms.max(1))
    }
}

/// Builds a [`crate::Admin`]: `Admin::builder().bootstrap(..).build().await`.
#[derive(Debug, Clone, Default)]
pub struct AdminBuilder {
    config: AdminConfig,
    /// The first property that failed to parse, reported by `build`.
    error: Option<Error>,
}

impl AdminBuilder {
    /// A builder with the default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    fn apply(mut self, key: &str, value: &str) -> Self {
        if self.error.is_none()
            && let Err(e) = self.config.set(key, value)
        {
            self.error = Some(e);
        }
        self
    }

    /// `bootstrap.servers`: one `host:port`, or several separated by commas.
    pub fn bootstrap(self, servers: impl Into<String>) -> Self {
        let servers = servers.into();
        self.apply(BOOTSTRAP_SERVERS, &servers)
    }

    /// `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.config.client_id = id.into();
        self
    }

    /// Every call's deadline (whole milliseconds; default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout_ms = millis(timeout);
        self
    }

    /// The security settings, the same type the producer and the consumer take.
    pub fn security(mut self, security: SecurityConfig) -> Self {
        self.config.security = security;
        self
    }

    /// Any property by its Kafka name; a bad one is reported by [`AdminBuilder::build`].
    pub fn set(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        self.apply(&key, &value)
    }

    /// The validated configuration.
    pub fn config(self) -> Result<AdminConfig, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.config.validate()?;
        Ok(self.config)
    }

    /// Validates the configuration and connects: see [`crate::Admin`].
    pub async fn build(self) -> Result<crate::Admin, Error> {
        crate::Admin::with_config(self.config()?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_under_kafka_names() {
        let config = AdminConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092, 127.0.0.1:9093"),
            ("client.id", "ops"),
            ("default.api.timeout.ms", "5000"),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            // A shared client.properties for the JVM and Schema Registry works as it is.
            ("schema.registry.url", "http://127.0.0.1:8081"),
        ])
        .unwrap();
        assert_eq!(config.bootstrap_servers.len(), 2);
        assert_eq!(config.client_id, "ops");
        assert_eq!(config.request_timeout(), Duration::from_secs(5));
        assert!(config.security.protocol.uses_sasl());
        assert!(
            !format!("{config:?}").contains("\"p\""),
            "no password in Debug"
        );
    }

    #[test]
    fn errors_name_the_property() {
        let setting =
            |props: &[(&str, &str)]| match AdminConfig::from_properties(props.iter().copied()) {
                Err(Error::Config { setting, reason }) => (setting, reason),
                other => panic!("expected a config error, got {other:?}"),
            };
        assert_eq!(setting(&[]).0, "bootstrap.servers");
        let (name, reason) = setting(&[("bootstrap.servers", "h:1"), ("client.idd", "x")]);
        assert_eq!(name, "client.idd");
        assert!(reason.contains("client.id"), "{reason}");
        assert_eq!(
            setting(&[("bootstrap.servers", "h:1"), ("request.timeout.ms", "0")]).0,
            "request.timeout.ms"
        );
        let built = AdminBuilder::new()
            .bootstrap("h:1")
            .set("request.timeout.ms", "soon")
            .config();
        assert!(
            matches!(built, Err(Error::Config { ref setting, .. }) if setting == "request.timeout.ms"),
            "{built:?}"
        );
    }
}
