//! The admin client's configuration: the settings it shares with the producer and the consumer
//! (bootstrap servers, client id, security), under Kafka's property names, and the builder.
//!
//! As for the clients, both ways in (the builder's typed setters and `set(name, value)`) end
//! in one validation that names the Kafka property at fault.

use std::time::Duration;

use super::Admin;
use crate::error::Error;
use crate::net::properties::{check_bootstrap_servers, config_error};
use crate::net::security::SecurityConfig;
use crate::net::settings::{
    self, Apply, BOOTSTRAP_SERVERS, Client, ClientConfig, Draft, REQUEST_TIMEOUT_MS, Setting, Table,
};
use crate::types::millis;

const DEFAULT_API_TIMEOUT_MS: &str = "default.api.timeout.ms";

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
    /// `default.api.timeout.ms`; [`Admin::with_timeout`] changes it for some calls.
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

/// The admin client's settings: those every client shares, its own, then the security rows
/// and the ignored rows of a shared `client.properties` (`net/settings.rs`).
static SETTINGS: Table<AdminConfig> = Table::new(
    Client::Admin,
    AdminConfig::validate,
    &[
        ADMIN_ROWS,
        &settings::security(|c: &mut AdminConfig| &mut c.security),
        &settings::shared_file(),
    ],
);

/// The rows of [`SETTINGS`] before the security ones, in the README's order.
const ADMIN_ROWS: &[Setting<AdminConfig>] = &[
    settings::bootstrap_servers(|c| &mut c.bootstrap_servers),
    settings::client_id("exactly-admin", "sent in every request header", |c| {
        &mut c.client_id
    }),
    settings::request_timeout_ms(|c| &mut c.request_timeout_ms),
    // Java's admin client bounds each call with it and each request with
    // `request.timeout.ms`; here one deadline does both (see [`AdminConfig`]).
    Setting::own(
        Client::Admin,
        DEFAULT_API_TIMEOUT_MS,
        "30000",
        "every call's deadline, as `request.timeout.ms`",
        Apply::U64(|c| &mut c.request_timeout_ms),
    ),
    settings::retry_backoff_ms(|c| &mut c.retry_backoff_ms),
    settings::reconnect_backoff_ms(|c| &mut c.reconnect_backoff_ms),
    settings::reconnect_backoff_max_ms(|c| &mut c.reconnect_backoff_max_ms),
];

impl ClientConfig for AdminConfig {
    const SETTINGS: &'static Table<Self> = &SETTINGS;
}

impl AdminConfig {
    /// A validated configuration from `(property, value)` pairs under Kafka's names.
    pub fn from_properties<I, K, V>(props: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        SETTINGS.configure(props)
    }

    /// Sets one property by its Kafka name (value trimmed, parsed as Java's `ConfigDef` does).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        SETTINGS.set(self, key, value)
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

/// Builds an [`Admin`]: `Admin::builder().bootstrap(..).build().await`.
#[derive(Debug, Clone, Default)]
pub struct AdminBuilder {
    /// The configuration being built and the first property that failed to parse, reported
    /// by `build`.
    draft: Draft<AdminConfig>,
}

impl AdminBuilder {
    /// A builder with the default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    settings::connection_setters!(Admin);

    /// Every call's deadline (whole milliseconds; default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.draft.config.request_timeout_ms = millis(timeout);
        self
    }

    /// Any property by its Kafka name; a bad one is reported by [`AdminBuilder::build`].
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.draft.set(&key.into(), &value.into());
        self
    }

    /// The validated configuration.
    pub fn config(self) -> Result<AdminConfig, Error> {
        self.draft.finish()
    }

    /// Validates the configuration and connects: see [`Admin`].
    pub async fn build(self) -> Result<Admin, Error> {
        Admin::with_config(self.config()?).await
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
