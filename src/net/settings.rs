//! The settings tables: every setting a client takes is one row, with its Kafka property name,
//! its default as the README shows it, one line of documentation, the clients that take it and
//! where its parsed value goes. Each client's configuration keeps its table beside its fields
//! (`producer/config.rs`, `consumer/config.rs`, `admin/config.rs`); the rows several clients
//! share (`bootstrap.servers`, `client.id`, the timeouts and backoffs, the `security.*`,
//! `ssl.*` and `sasl.*` settings) and those a shared `client.properties` carries for another
//! client or the JVM are written once, here.
//!
//! From a table come the parsing (a name finds its row, the row parses and stores the value),
//! the "did you mean" of an unknown name (the candidates are the table's names), which settings
//! of a shared file are ignored, and the README's settings tables, which the test
//! `settings_table_matches_readme` holds to the tables. Adding a setting is one row and its field.
//!
//! It imports the value parsers (`properties.rs`) and the security settings (`security.rs`);
//! neither imports it, and `security.rs` imports only `properties.rs`, so no two files of `net`
//! import each other.

use tracing::debug;

use super::properties::{list_entries, parse_bool, parse_number, parse_signed, unknown_property};
use super::sasl::{kerberos_login, token_endpoint};
use super::security::{self, SecurityConfig};
use crate::error::Error;

// The shared settings' names, for the clients' checks and tests.
pub(crate) const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
pub(crate) const CLIENT_ID: &str = "client.id";
pub(crate) const REQUEST_TIMEOUT_MS: &str = "request.timeout.ms";
pub(crate) const RETRY_BACKOFF_MS: &str = "retry.backoff.ms";
pub(crate) const RECONNECT_BACKOFF_MS: &str = "reconnect.backoff.ms";
pub(crate) const RECONNECT_BACKOFF_MAX_MS: &str = "reconnect.backoff.max.ms";
pub(crate) const METADATA_MAX_AGE_MS: &str = "metadata.max.age.ms";
pub(crate) const ENABLE_METRICS_PUSH: &str = "enable.metrics.push";

/// One of the three clients, as a settings row names the clients that take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// [`crate::Producer`].
    Producer,
    /// [`crate::Consumer`].
    Consumer,
    /// [`crate::Admin`].
    Admin,
}

impl Client {
    /// The client's name in log events.
    fn name(self) -> &'static str {
        match self {
            Client::Producer => "producer",
            Client::Consumer => "consumer",
            Client::Admin => "admin",
        }
    }
}

/// Every client: the rows of the connection and security settings.
const ALL: &[Client] = &[Client::Producer, Client::Consumer, Client::Admin];
/// The clients that read or write records (the admin client pushes no metrics and keeps no
/// metadata between calls).
const PRODUCER_AND_CONSUMER: &[Client] = &[Client::Producer, Client::Consumer];

/// How a row's value is parsed (as Java's `ConfigDef` parses its types: values trimmed,
/// booleans in any case, numbers decimal) and where it is stored in the configuration `C`.
pub(crate) enum Apply<C> {
    /// A Java `BOOLEAN`.
    Flag(fn(&mut C) -> &mut bool),
    /// A non-negative integer (Java `LONG`, or an `INT` whose range `validate` checks).
    U64(fn(&mut C) -> &mut u64),
    /// A non-negative integer that is a count or a size in bytes.
    Usize(fn(&mut C) -> &mut usize),
    /// A non-negative integer of at most 32 bits (`retries`).
    U32(fn(&mut C) -> &mut u32),
    /// A Java `INT` that travels as an `int32` (the fetch sizes), its sign checked by `validate`.
    I32(fn(&mut C) -> &mut i32),
    /// An integer that may be negative (a compression level), its range checked by `validate`.
    Signed(fn(&mut C) -> &mut i32),
    /// A Java `STRING`, taken as it is.
    Text(fn(&mut C) -> &mut String),
    /// A Java `LIST`: comma-separated entries, each trimmed (an empty one is kept, for
    /// `validate` to refuse).
    List(fn(&mut C) -> &mut Vec<String>),
    /// A `security.*`, `ssl.*` or `sasl.*` setting, parsed by [`SecurityConfig::set`].
    Security {
        /// What the value is, for the README.
        kind: &'static str,
        /// Where the security settings are.
        field: fn(&mut C) -> &mut SecurityConfig,
    },
    /// A value with its own parser (a choice of names, an optional string).
    Parse {
        /// What the value is, for the README.
        kind: &'static str,
        /// Parses the value (its setting's name first) into the configuration.
        set: fn(&mut C, &str, &str) -> Result<(), Error>,
    },
    /// Accepted and ignored: a setting a shared `client.properties` carries for another client
    /// or for the JVM, which cannot change what this client writes or reads or how it
    /// authenticates.
    Ignore,
}

/// One setting of a client.
pub(crate) struct Setting<C> {
    /// Kafka's property name; one ending in `.*` stands for every name under it.
    pub(crate) name: &'static str,
    /// The default as a property value (what setting it to this changes nothing), empty when
    /// the setting is unset by default.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the README's tables, checked by a test")
    )]
    pub(crate) default: &'static str,
    /// What the setting does, in one line.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the README's tables, checked by a test")
    )]
    pub(crate) doc: &'static str,
    /// The clients that take the setting (for an ignored row: those that implement it, if any).
    pub(crate) clients: &'static [Client],
    /// How the value is parsed and stored.
    pub(crate) apply: Apply<C>,
}

impl<C> Setting<C> {
    /// A row.
    pub(crate) const fn new(
        name: &'static str,
        default: &'static str,
        doc: &'static str,
        clients: &'static [Client],
        apply: Apply<C>,
    ) -> Self {
        Setting {
            name,
            default,
            doc,
            clients,
            apply,
        }
    }

    /// A row of one client's own (`clients` is that client alone).
    pub(crate) const fn own(
        client: Client,
        name: &'static str,
        default: &'static str,
        doc: &'static str,
        apply: Apply<C>,
    ) -> Self {
        let clients: &'static [Client] = match client {
            Client::Producer => &[Client::Producer],
            Client::Consumer => &[Client::Consumer],
            Client::Admin => &[Client::Admin],
        };
        Setting::new(name, default, doc, clients, apply)
    }

    /// Whether `key` is this row's name, or under it for a `.*` row.
    fn matches(&self, key: &str) -> bool {
        match self.name.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == self.name,
        }
    }

    /// Whether the value is parsed and stored (not ignored).
    pub(crate) fn is_applied(&self) -> bool {
        !matches!(self.apply, Apply::Ignore)
    }

    /// What the value is: `boolean`, `integer`, `string`, `list`, a row's own word, or
    /// `ignored`.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the README's tables, checked by a test")
    )]
    pub(crate) fn kind(&self) -> &'static str {
        match self.apply {
            Apply::Flag(_) => "boolean",
            Apply::U64(_) | Apply::Usize(_) | Apply::U32(_) | Apply::I32(_) | Apply::Signed(_) => {
                "integer"
            }
            Apply::Text(_) => "string",
            Apply::List(_) => "list",
            Apply::Security { kind, .. } | Apply::Parse { kind, .. } => kind,
            Apply::Ignore => "ignored",
        }
    }

    /// Parses `value` (trimmed) for `key`, this row's name, into `config`.
    fn apply(&self, config: &mut C, key: &str, value: &str, client: Client) -> Result<(), Error> {
        match &self.apply {
            Apply::Flag(field) => *field(config) = parse_bool(key, value)?,
            Apply::U64(field) => *field(config) = parse_number(key, value)?,
            Apply::Usize(field) => *field(config) = parse_number(key, value)?,
            Apply::U32(field) => *field(config) = parse_number(key, value)?,
            Apply::I32(field) => *field(config) = parse_number(key, value)?,
            Apply::Signed(field) => *field(config) = parse_signed(key, value)?,
            Apply::Text(field) => *field(config) = value.to_owned(),
            Apply::List(field) => *field(config) = list_entries(value).collect(),
            Apply::Security { field, .. } => return field(config).set(key, value),
            Apply::Parse { set, .. } => return set(config, key, value),
            Apply::Ignore => debug!(
                property = key,
                client = client.name(),
                implemented_by = ?self.clients,
                "ignoring a setting that does not apply to this client"
            ),
        }
        Ok(())
    }
}

/// A client's settings: its rows in groups (its own, the shared ones, the security ones, the
/// ignored ones), looked up in order, so a client's own row comes before an ignored row of the
/// same name (the consumer's `group.id` before the one the producer ignores), and the rules its
/// settings must keep together.
pub(crate) struct Table<C: 'static> {
    /// Whose table it is.
    client: Client,
    /// Checks every setting and every rule between settings (the configuration's `validate`).
    validate: fn(&C) -> Result<(), Error>,
    /// The rows, in groups.
    groups: &'static [&'static [Setting<C>]],
}

impl<C> Table<C> {
    /// `client`'s table of `groups`, whose configurations `validate` checks.
    pub(crate) const fn new(
        client: Client,
        validate: fn(&C) -> Result<(), Error>,
        groups: &'static [&'static [Setting<C>]],
    ) -> Self {
        Table {
            client,
            validate,
            groups,
        }
    }

    /// Every row, in lookup order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = &'static Setting<C>> + 'static {
        self.groups.iter().flat_map(|group| group.iter())
    }

    /// The row `key` finds: the first that matches it.
    pub(crate) fn find(&self, key: &str) -> Option<&'static Setting<C>> {
        self.rows().find(|row| row.matches(key))
    }

    /// Sets one property by its Kafka name; an unknown name is an error suggesting the
    /// closest name the client takes.
    pub(crate) fn set(&self, config: &mut C, key: &str, value: &str) -> Result<(), Error> {
        match self.find(key) {
            Some(row) => row.apply(config, key, value.trim(), self.client),
            None => Err(unknown_property(
                key,
                self.rows()
                    .filter(|row| row.is_applied())
                    .map(|row| row.name),
            )),
        }
    }

    /// A validated configuration from `(property, value)` pairs under Kafka's names: each
    /// applied over the defaults, in order (a repeated property: the last wins), then the
    /// whole checked.
    pub(crate) fn configure<I, K, V>(&self, props: I) -> Result<C, Error>
    where
        C: Default,
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut config = C::default();
        for (key, value) in props {
            self.set(&mut config, key.as_ref(), value.as_ref())?;
        }
        (self.validate)(&config)?;
        Ok(config)
    }
}

/// A client's configuration, which its builder puts together through its table.
pub(crate) trait ClientConfig: Default + 'static {
    /// The client's settings.
    const SETTINGS: &'static Table<Self>;
}

/// A configuration a builder is putting together. A setter never fails on the spot: the first
/// bad property is remembered and reported by [`Draft::finish`], so setters chain.
#[derive(Debug, Clone, Default)]
pub(crate) struct Draft<C> {
    /// The configuration so far, starting from the defaults.
    pub(crate) config: C,
    /// The first error a setter met.
    error: Option<Error>,
}

impl<C: ClientConfig> Draft<C> {
    /// Sets one property by its Kafka name; the first error is kept for [`Draft::finish`].
    pub(crate) fn set(&mut self, key: &str, value: &str) {
        if self.error.is_none()
            && let Err(error) = C::SETTINGS.set(&mut self.config, key, value)
        {
            self.error = Some(error);
        }
    }

    /// The validated configuration, or the first error a setter met, or the first rule it
    /// breaks.
    pub(crate) fn finish(self) -> Result<C, Error> {
        if let Some(error) = self.error {
            return Err(error);
        }
        (C::SETTINGS.validate)(&self.config)?;
        Ok(self.config)
    }
}

/// The setters every client's builder has: `bootstrap.servers`, `client.id` and the security
/// settings, written once for the three builders (each keeps its [`Draft`] in a field `draft`,
/// over a configuration with the fields `client_id` and `security`). `$client` names the
/// client the builder builds, for the examples.
macro_rules! connection_setters {
    ($client:ident) => {
        /// `bootstrap.servers`: one `host:port`, or several separated by commas.
        pub fn bootstrap(mut self, servers: impl AsRef<str>) -> Self {
            self.draft
                .set($crate::net::settings::BOOTSTRAP_SERVERS, servers.as_ref());
            self
        }

        /// `client.id`.
        pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
            self.draft.config.client_id = client_id.into();
            self
        }

        /// The security settings, the same type every client takes (or set them one by one
        /// with the setters below, or as properties).
        pub fn security(mut self, security: $crate::net::security::SecurityConfig) -> Self {
            self.draft.config.security = security;
            self
        }

        /// `security.protocol`.
        pub fn security_protocol(
            mut self,
            protocol: $crate::net::security::SecurityProtocol,
        ) -> Self {
            self.draft.config.security.protocol = protocol;
            self
        }

        /// Trust these CA certificates (PEM text) instead of the built-in public roots
        /// (`ssl.truststore.certificates`).
        pub fn ssl_ca_pem(mut self, pem: impl Into<String>) -> Self {
            self.draft.config.security.tls.ca = Some($crate::net::security::Pem::Inline(
                $crate::net::secret::Secret::new(pem),
            ));
            self
        }

        /// Trust the CA certificates in this PEM file (`ssl.truststore.location`).
        pub fn ssl_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
            self.draft.config.security.tls.ca =
                Some($crate::net::security::Pem::File(path.into()));
            self
        }

        /// Authenticate with this client certificate chain and private key, both PEM files
        /// (mutual TLS; `ssl.certificate.location` and `ssl.key.location`).
        ///
        /// ```no_run
        #[doc = concat!("use exactly::{", stringify!($client), ", SecurityProtocol};")]
        ///
        /// # async fn run() -> exactly::Result<()> {
        #[doc = concat!("let client = ", stringify!($client), "::builder()")]
        ///     .bootstrap("broker-1.internal:9093")
        ///     .security_protocol(SecurityProtocol::Ssl)
        ///     .ssl_ca_file("/etc/kafka/ca.pem") // the cluster's own CA, not the public roots
        ///     .ssl_client_certificate_files("/etc/kafka/client.pem", "/etc/kafka/client.key")
        ///     .build()
        ///     .await?;
        /// # let _ = client;
        /// # Ok(()) }
        /// ```
        pub fn ssl_client_certificate_files(
            mut self,
            chain: impl Into<std::path::PathBuf>,
            key: impl Into<std::path::PathBuf>,
        ) -> Self {
            let tls = &mut self.draft.config.security.tls;
            tls.client_certificate = Some($crate::net::security::Pem::File(chain.into()));
            tls.client_key = Some($crate::net::security::Pem::File(key.into()));
            self
        }

        /// Whether broker certificates must name the host dialled (on by default;
        /// `ssl.endpoint.identification.algorithm`). Turning it off logs a warning.
        pub fn ssl_verify_hostname(mut self, verify: bool) -> Self {
            self.draft.set(
                $crate::net::security::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
                if verify { "https" } else { "" },
            );
            self
        }

        /// SASL with a user name and password: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`
        /// (`sasl.mechanism` with `sasl.username` / `sasl.password` or `sasl.jaas.config`).
        /// The password is kept as a [`Secret`](crate::Secret): no `Debug`, error or log
        /// shows it.
        ///
        /// ```no_run
        #[doc = concat!("use exactly::{", stringify!($client), ", SaslMechanism, SecurityProtocol};")]
        ///
        /// # async fn run() -> exactly::Result<()> {
        /// let password = std::env::var("KAFKA_PASSWORD").unwrap_or_default();
        #[doc = concat!("let client = ", stringify!($client), "::builder()")]
        ///     .bootstrap("b-1.msk.example:9096")
        ///     .security_protocol(SecurityProtocol::SaslSsl)
        ///     .sasl_credentials(SaslMechanism::ScramSha512, "svc-orders", password)
        ///     .build()
        ///     .await?;
        /// # let _ = client;
        /// # Ok(()) }
        /// ```
        pub fn sasl_credentials(
            mut self,
            mechanism: $crate::net::security::SaslMechanism,
            username: impl Into<String>,
            password: impl Into<$crate::net::secret::Secret>,
        ) -> Self {
            let sasl = &mut self.draft.config.security.sasl;
            sasl.mechanism = Some(mechanism);
            sasl.username = Some(username.into());
            sasl.password = Some(password.into());
            self
        }

        /// SASL/OAUTHBEARER with tokens from `provider`, which is called for every
        /// authentication (each connection and each re-authentication), so it can hand out
        /// fresh tokens.
        ///
        /// ```no_run
        #[doc = concat!("use exactly::{", stringify!($client), ", OAuthBearerToken, OAuthBearerTokenProvider, SecurityProtocol};")]
        ///
        /// # async fn fetch_token_from_identity_provider() -> Result<String, String> { Ok(String::new()) }
        /// # async fn run() -> exactly::Result<()> {
        /// let provider = OAuthBearerTokenProvider::new(|| async {
        ///     // Ask the identity provider for a fresh JWT; an `Err` fails this authentication.
        ///     let jwt = fetch_token_from_identity_provider().await?;
        ///     Ok(OAuthBearerToken::new(jwt))
        /// });
        #[doc = concat!("let client = ", stringify!($client), "::builder()")]
        ///     .bootstrap("broker-1.internal:9094")
        ///     .security_protocol(SecurityProtocol::SaslSsl)
        ///     .sasl_oauthbearer(provider)
        ///     .build()
        ///     .await?;
        /// # let _ = client;
        /// # Ok(()) }
        /// ```
        #[cfg(feature = "sasl-oauthbearer")]
        #[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
        pub fn sasl_oauthbearer(
            mut self,
            provider: $crate::net::security::OAuthBearerTokenProvider,
        ) -> Self {
            let sasl = &mut self.draft.config.security.sasl;
            sasl.mechanism = Some($crate::net::security::SaslMechanism::OAuthBearer);
            sasl.token_provider = Some(provider);
            self
        }

        /// SASL/OAUTHBEARER with tokens this client fetches from an OAuth 2.0 token endpoint
        /// with the client-credentials grant (KIP-768; Confluent Cloud, Keycloak, Azure AD,
        /// Okta), cached and fetched again before they expire. Scope, extensions and timeouts
        /// are properties (`sasl.oauthbearer.scope`, ...; see the README's Security table).
        ///
        /// ```no_run
        #[doc = concat!("use exactly::{", stringify!($client), ", SecurityProtocol};")]
        ///
        /// # async fn run() -> exactly::Result<()> {
        #[doc = concat!("let client = ", stringify!($client), "::builder()")]
        ///     .bootstrap("pkc-00000.us-east-2.aws.confluent.cloud:9092")
        ///     .security_protocol(SecurityProtocol::SaslSsl)
        ///     .sasl_oauthbearer_client_credentials(
        ///         "https://idp.example.com/oauth2/token",
        ///         "my-client-id",
        ///         "my-client-secret",
        ///     )
        ///     .build()
        ///     .await?;
        /// # let _ = client;
        /// # Ok(()) }
        /// ```
        #[cfg(feature = "sasl-oauthbearer-oidc")]
        #[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer-oidc")))]
        pub fn sasl_oauthbearer_client_credentials(
            mut self,
            token_endpoint_url: impl Into<String>,
            client_id: impl Into<String>,
            client_secret: impl Into<$crate::net::secret::Secret>,
        ) -> Self {
            let sasl = &mut self.draft.config.security.sasl;
            sasl.mechanism = Some($crate::net::security::SaslMechanism::OAuthBearer);
            sasl.token_endpoint.url = Some(token_endpoint_url.into());
            sasl.token_endpoint.client_id = Some(client_id.into());
            sasl.token_endpoint.client_secret = Some(client_secret.into());
            self
        }

        /// SASL/AWS_MSK_IAM (Amazon MSK's IAM access control) with the credentials `provider`
        /// gives at each authentication; without this call, `sasl.mechanism=AWS_MSK_IAM` reads
        /// them from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
        ///
        /// ```no_run
        #[doc = concat!("use exactly::{", stringify!($client), ", AwsCredentials, AwsCredentialsProvider, SecurityProtocol};")]
        ///
        /// # async fn run() -> exactly::Result<()> {
        /// let credentials = AwsCredentials::new("AKIA...", "secret-access-key");
        #[doc = concat!("let client = ", stringify!($client), "::builder()")]
        ///     .bootstrap("b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9098")
        ///     .security_protocol(SecurityProtocol::SaslSsl)
        ///     .sasl_aws_msk_iam(AwsCredentialsProvider::fixed(credentials))
        ///     .build()
        ///     .await?;
        /// # let _ = client;
        /// # Ok(()) }
        /// ```
        #[cfg(feature = "aws-msk-iam")]
        #[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
        pub fn sasl_aws_msk_iam(
            mut self,
            provider: $crate::net::security::AwsCredentialsProvider,
        ) -> Self {
            let sasl = &mut self.draft.config.security.sasl;
            sasl.mechanism = Some($crate::net::security::SaslMechanism::AwsMskIam);
            sasl.aws_credentials = Some(provider);
            self
        }
    };
}
pub(crate) use connection_setters;

/// `bootstrap.servers`.
pub(crate) const fn bootstrap_servers<C>(field: fn(&mut C) -> &mut Vec<String>) -> Setting<C> {
    Setting::new(
        BOOTSTRAP_SERVERS,
        "",
        "the brokers first asked for metadata, `host:port` (IPv6 in brackets), comma-separated; required",
        ALL,
        Apply::List(field),
    )
}

/// `client.id`, whose default each client chooses.
pub(crate) const fn client_id<C>(
    default: &'static str,
    doc: &'static str,
    field: fn(&mut C) -> &mut String,
) -> Setting<C> {
    Setting::new(CLIENT_ID, default, doc, ALL, Apply::Text(field))
}

/// `request.timeout.ms`.
pub(crate) const fn request_timeout_ms<C>(field: fn(&mut C) -> &mut u64) -> Setting<C> {
    Setting::new(
        REQUEST_TIMEOUT_MS,
        "30000",
        "how long to wait for a broker's answer (the admin client: every call's deadline)",
        ALL,
        Apply::U64(field),
    )
}

/// `retry.backoff.ms`.
pub(crate) const fn retry_backoff_ms<C>(field: fn(&mut C) -> &mut u64) -> Setting<C> {
    Setting::new(
        RETRY_BACKOFF_MS,
        "100",
        "the wait before a failed request is retried",
        ALL,
        Apply::U64(field),
    )
}

/// `reconnect.backoff.ms`.
pub(crate) const fn reconnect_backoff_ms<C>(field: fn(&mut C) -> &mut u64) -> Setting<C> {
    Setting::new(
        RECONNECT_BACKOFF_MS,
        "50",
        "the first wait before reconnecting to a broker; it doubles per failure, with jitter",
        ALL,
        Apply::U64(field),
    )
}

/// `reconnect.backoff.max.ms`.
pub(crate) const fn reconnect_backoff_max_ms<C>(field: fn(&mut C) -> &mut u64) -> Setting<C> {
    Setting::new(
        RECONNECT_BACKOFF_MAX_MS,
        "1000",
        "the cap of the reconnect wait",
        ALL,
        Apply::U64(field),
    )
}

/// `metadata.max.age.ms`.
pub(crate) const fn metadata_max_age_ms<C>(field: fn(&mut C) -> &mut u64) -> Setting<C> {
    Setting::new(
        METADATA_MAX_AGE_MS,
        "300000",
        "metadata older than this is refreshed even without errors",
        PRODUCER_AND_CONSUMER,
        Apply::U64(field),
    )
}

/// `enable.metrics.push`.
pub(crate) const fn enable_metrics_push<C>(field: fn(&mut C) -> &mut bool) -> Setting<C> {
    Setting::new(
        ENABLE_METRICS_PUSH,
        "true",
        "push the metrics the cluster's client-metrics subscription asks for (KIP-714)",
        PRODUCER_AND_CONSUMER,
        Apply::Flag(field),
    )
}

/// The `security.*`, `ssl.*` and `sasl.*` settings, every client's, in `field`. The README
/// describes them in its Security section's table rather than in each client's.
pub(crate) const fn security<C>(field: fn(&mut C) -> &mut SecurityConfig) -> [Setting<C>; 37] {
    [
        security_row(
            security::SECURITY_PROTOCOL,
            "PLAINTEXT",
            "choice",
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            field,
        ),
        security_row(
            security::SSL_TRUSTSTORE_TYPE,
            "",
            "choice",
            "PEM, JKS or PKCS12; unset: what the file is",
            field,
        ),
        security_row(
            security::SSL_TRUSTSTORE_LOCATION,
            "",
            "path",
            "the CA certificates to trust, a PEM, JKS or PKCS#12 file",
            field,
        ),
        security_row(
            security::SSL_TRUSTSTORE_CERTIFICATES,
            "",
            "PEM",
            "the CA certificates to trust, inline PEM",
            field,
        ),
        security_row(
            security::SSL_CA_LOCATION,
            "",
            "path",
            "librdkafka's name for ssl.truststore.location",
            field,
        ),
        security_row(
            security::SSL_KEYSTORE_TYPE,
            "",
            "choice",
            "PEM, JKS or PKCS12; unset: what the file is",
            field,
        ),
        security_row(
            security::SSL_KEYSTORE_LOCATION,
            "",
            "path",
            "the client certificate and key (mutual TLS), one file",
            field,
        ),
        security_row(
            security::SSL_KEYSTORE_CERTIFICATE_CHAIN,
            "",
            "PEM",
            "the client certificate chain, inline PEM",
            field,
        ),
        security_row(
            security::SSL_KEYSTORE_KEY,
            "",
            "PEM",
            "the client's private key, inline PEM",
            field,
        ),
        security_row(
            security::SSL_TRUSTSTORE_PASSWORD,
            "",
            "password",
            "the trust store's password",
            field,
        ),
        security_row(
            security::SSL_KEYSTORE_PASSWORD,
            "",
            "password",
            "the key store's password",
            field,
        ),
        security_row(
            security::SSL_KEY_PASSWORD,
            "",
            "password",
            "the password of the key in the key store (default: the store's)",
            field,
        ),
        security_row(
            security::SSL_CERTIFICATE_LOCATION,
            "",
            "path",
            "the client certificate chain, a PEM file",
            field,
        ),
        security_row(
            security::SSL_KEY_LOCATION,
            "",
            "path",
            "the client's private key, a PEM file",
            field,
        ),
        security_row(
            security::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
            "https",
            "choice",
            "https: the broker's certificate must name the host; empty: not checked",
            field,
        ),
        security_row(
            security::SASL_MECHANISM,
            "",
            "choice",
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI",
            field,
        ),
        security_row(
            security::SASL_MECHANISMS,
            "",
            "choice",
            "librdkafka's name for sasl.mechanism",
            field,
        ),
        security_row(
            security::SASL_JAAS_CONFIG,
            "",
            "JAAS",
            "a PlainLoginModule or ScramLoginModule with username and password, an OAuthBearerLoginModule with clientId and clientSecret, an IAMLoginModule, or a Krb5LoginModule",
            field,
        ),
        security_row(
            security::SASL_CLIENT_CALLBACK_HANDLER_CLASS,
            "",
            "class",
            "aws-msk-iam-auth's IAMClientCallbackHandler only (AWS_MSK_IAM)",
            field,
        ),
        security_row(
            security::SASL_USERNAME,
            "",
            "string",
            "librdkafka's name for the JAAS username",
            field,
        ),
        security_row(
            security::SASL_PASSWORD,
            "",
            "password",
            "librdkafka's name for the JAAS password",
            field,
        ),
        security_row(
            kerberos_login::SASL_KERBEROS_SERVICE_NAME,
            "",
            "string",
            "GSSAPI: the first part of the brokers' principals, <service>/<host>@REALM (unset: kafka)",
            field,
        ),
        security_row(
            kerberos_login::SASL_KERBEROS_PRINCIPAL,
            "",
            "string",
            "GSSAPI: the client principal (default: the ticket cache's, else the client keytab's)",
            field,
        ),
        security_row(
            kerberos_login::SASL_KERBEROS_KEYTAB,
            "",
            "path",
            "GSSAPI: the client keytab; must be the one KRB5_CLIENT_KTNAME names",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
            "",
            "URL",
            "the OAuth token endpoint of the client-credentials login (KIP-768)",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_METHOD,
            "",
            "choice",
            "librdkafka's: oidc (the token endpoint login) or default (a token provider)",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_CLIENT_ID,
            "",
            "string",
            "librdkafka's name for the JAAS clientId",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_CLIENT_SECRET,
            "",
            "password",
            "librdkafka's name for the JAAS clientSecret",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID,
            "",
            "string",
            "KIP-1139's name for the JAAS clientId",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET,
            "",
            "password",
            "KIP-1139's name for the JAAS clientSecret",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_SCOPE,
            "",
            "string",
            "the scope the token is asked for",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_EXTENSIONS,
            "",
            "list",
            "SASL extensions sent with the token, name=value pairs (KIP-342)",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_SUB_CLAIM_NAME,
            "sub",
            "string",
            "the JWT claim that names the principal",
            field,
        ),
        security_row(
            token_endpoint::SASL_LOGIN_CALLBACK_HANDLER_CLASS,
            "",
            "class",
            "Kafka's OAuthBearerLoginCallbackHandler only (the token endpoint login)",
            field,
        ),
        security_row(
            token_endpoint::SASL_LOGIN_CONNECT_TIMEOUT_MS,
            "10000",
            "ms",
            "bound of connecting to the token endpoint",
            field,
        ),
        security_row(
            token_endpoint::SASL_OAUTHBEARER_HEADER_URLENCODE,
            "false",
            "bool",
            "form-encode the client id and secret in the Basic header (RFC 6749 2.3.1)",
            field,
        ),
        security_row(
            token_endpoint::SASL_LOGIN_READ_TIMEOUT_MS,
            "10000",
            "ms",
            "bound of the token endpoint's answer",
            field,
        ),
    ]
}

/// A security row.
const fn security_row<C>(
    name: &'static str,
    default: &'static str,
    kind: &'static str,
    doc: &'static str,
    field: fn(&mut C) -> &mut SecurityConfig,
) -> Setting<C> {
    Setting::new(name, default, doc, ALL, Apply::Security { kind, field })
}

/// A row of [`shared_file`]: ignored, implemented by `clients` (if any).
const fn ignored<C>(
    name: &'static str,
    clients: &'static [Client],
    doc: &'static str,
) -> Setting<C> {
    Setting::new(name, "", doc, clients, Apply::Ignore)
}

/// The settings a shared `client.properties` carries for the JVM, for Schema Registry or for
/// another client, accepted and ignored so that one file copied from Confluent Cloud or MSK
/// configures every client as it is. A client's own row of the same name comes first in its
/// table (the consumer's `group.id`, the producer's `acks`), so only the other clients ignore
/// these. The rule: a setting that would change delivery or security is either implemented or
/// an error; only these are let through.
pub(crate) const fn shared_file<C>() -> [Setting<C>; 9] {
    const CONSUMER: &[Client] = &[Client::Consumer];
    const PRODUCER: &[Client] = &[Client::Producer];
    [
        // Every address a name resolves to is tried, which is Java's `use_all_dns_ips`.
        ignored(
            "client.dns.lookup",
            &[],
            "ignored: every address a name resolves to is tried",
        ),
        // Consumer group settings, in shared files (Confluent's recommends the session
        // timeout for every client).
        ignored(
            "session.timeout.ms",
            CONSUMER,
            "ignored: the consumer's setting",
        ),
        ignored(
            "heartbeat.interval.ms",
            CONSUMER,
            "ignored: the consumer's setting",
        ),
        ignored("group.id", CONSUMER, "ignored: the consumer's setting"),
        ignored(
            "auto.offset.reset",
            CONSUMER,
            "ignored: the consumer's setting",
        ),
        // Confluent Cloud's Java template sets it for the producer.
        ignored("acks", PRODUCER, "ignored: the producer's setting"),
        ignored(
            "schema.registry.*",
            &[],
            "ignored: Schema Registry's settings",
        ),
        ignored(
            "basic.auth.*",
            &[],
            "ignored: Schema Registry's credentials",
        ),
        ignored(
            "bearer.auth.*",
            &[],
            "ignored: Schema Registry's credentials",
        ),
    ]
}

#[cfg(test)]
pub(crate) mod tests;
