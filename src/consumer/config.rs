//! Consumer configuration: typed fields with the Kafka 4.x Java consumer's defaults, under
//! Kafka's property names, and the builder.
//!
//! As for the producer ([`crate::ProducerConfig`]), both ways in (the builder's typed setters
//! and `set(name, value)`) end in one validation that names the Kafka property at fault.

use std::sync::Arc;
use std::time::Duration;

use super::Consumer;
use super::hooks::{ConsumerHooks, HooksHandle};
use super::vocabulary::{AssignmentStrategy, GroupProtocol, OffsetReset};
use crate::error::Error;
use crate::net::properties::{check_bootstrap_servers, config_error, parse_choice};
use crate::net::security::SecurityConfig;
use crate::net::settings::{
    self, Apply, BOOTSTRAP_SERVERS, Client, ClientConfig, Draft, REQUEST_TIMEOUT_MS, Setting, Table,
};
use crate::types::{IsolationLevel, Millis};

const GROUP_ID: &str = "group.id";
const ISOLATION_LEVEL: &str = "isolation.level";
const AUTO_OFFSET_RESET: &str = "auto.offset.reset";
const GROUP_PROTOCOL: &str = "group.protocol";
const GROUP_INSTANCE_ID: &str = "group.instance.id";
const SESSION_TIMEOUT_MS: &str = "session.timeout.ms";
const HEARTBEAT_INTERVAL_MS: &str = "heartbeat.interval.ms";
const MAX_POLL_INTERVAL_MS: &str = "max.poll.interval.ms";
const FETCH_MAX_WAIT_MS: &str = "fetch.max.wait.ms";
const FETCH_MIN_BYTES: &str = "fetch.min.bytes";
const FETCH_MAX_BYTES: &str = "fetch.max.bytes";
const MAX_PARTITION_FETCH_BYTES: &str = "max.partition.fetch.bytes";
const MAX_POLL_RECORDS: &str = "max.poll.records";
const ENABLE_AUTO_COMMIT: &str = "enable.auto.commit";
const AUTO_COMMIT_INTERVAL_MS: &str = "auto.commit.interval.ms";
const GROUP_REMOTE_ASSIGNOR: &str = "group.remote.assignor";
const CLIENT_RACK: &str = "client.rack";
const PARTITION_ASSIGNMENT_STRATEGY: &str = "partition.assignment.strategy";

/// Everything the consumer is configured with. Defaults are the Kafka 4.x Java consumer's,
/// except `isolation.level` (read_committed here: this consumer exists for exactly-once
/// pipelines) and `client.id`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// `bootstrap.servers`. Required.
    pub bootstrap_servers: Vec<String>,
    /// `group.id`: required to subscribe, to commit and for auto-commit; a consumer with
    /// manual assignment ([`Consumer::assign`]) may go without (empty: none).
    pub group_id: String,
    /// `client.id`: sent in every request header, and it labels the metrics. Empty (the
    /// default): a name unique in the process, `exactly-consumer-1`, `exactly-consumer-2`,
    /// ... in the order consumers connect.
    pub client_id: String,
    /// `isolation.level`.
    pub isolation_level: IsolationLevel,
    /// `auto.offset.reset`.
    pub auto_offset_reset: OffsetReset,
    /// `group.protocol`.
    pub group_protocol: GroupProtocol,
    /// `client.rack`: the rack (zone) this consumer runs in; sent in every Fetch, so a leader
    /// whose brokers run a rack-aware `replica.selector.class` names a replica in the same rack
    /// to read from (KIP-392). Empty (the default): always the leader.
    pub client_rack: String,
    /// `group.instance.id`: static membership (KIP-345), optional.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms` (classic protocol only; KIP-848 takes it from the broker's
    /// `group.consumer.session.timeout.ms`).
    pub session_timeout_ms: u64,
    /// `heartbeat.interval.ms` (classic protocol only; the KIP-848 coordinator gives the
    /// interval in every heartbeat response).
    pub heartbeat_interval_ms: u64,
    /// `max.poll.interval.ms`: sent as the rebalance timeout (how long the coordinator waits for
    /// this member to give up revoked partitions).
    pub max_poll_interval_ms: u64,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait_ms: u64,
    /// `fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes`: the most bytes one Fetch response may carry.
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes`: the most bytes per partition in one Fetch response.
    pub max_partition_fetch_bytes: i32,
    /// `max.poll.records`: the most records one `poll` returns; also bounds what is kept
    /// decoded in memory (records beyond it stay undecoded in the fetched bytes).
    pub max_poll_records: usize,
    /// `request.timeout.ms`.
    pub request_timeout_ms: u64,
    /// `retry.backoff.ms`.
    pub retry_backoff_ms: u64,
    /// `reconnect.backoff.ms`.
    pub reconnect_backoff_ms: u64,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max_ms: u64,
    /// `enable.auto.commit` (default false: exactly-once pipelines commit in transactions):
    /// the positions of the records handed out by earlier polls are committed every
    /// `auto.commit.interval.ms`, before revoked partitions are given up, and at `close`
    /// (at-least-once: a crash re-reads at most one interval). Needs a `group.id`.
    pub enable_auto_commit: bool,
    /// `enable.metrics.push` (default true): push the metrics the cluster's client-metrics
    /// subscription asks for to a broker (KIP-714), as the Java client and librdkafka do.
    pub enable_metrics_push: bool,
    /// `auto.commit.interval.ms` (default 5000).
    pub auto_commit_interval_ms: u64,
    /// `metadata.max.age.ms` (default 300000): how often a pattern subscription under the
    /// classic protocol looks for new topics that match.
    pub metadata_max_age_ms: u64,
    /// `group.remote.assignor`: the server-side assignor a KIP-848 member asks for (`None`:
    /// the broker's default, `uniform`).
    pub group_remote_assignor: Option<String>,
    /// `partition.assignment.strategy` (classic protocol only): one of `cooperative-sticky`
    /// (default) or `range`, or the Java class names of those assignors.
    pub partition_assignment_strategy: AssignmentStrategy,
    /// `security.protocol` and the `ssl.*` / `sasl.*` settings.
    pub security: SecurityConfig,
    /// Makes the W3C trace context in a record's `traceparent` / `tracestate` headers the
    /// parent of its `process` span ([`Consumer::process_span`]). Default off. Not a
    /// Kafka property.
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub propagate_trace_context: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            bootstrap_servers: Vec::new(),
            group_id: String::new(),
            client_id: String::new(),
            isolation_level: IsolationLevel::ReadCommitted,
            auto_offset_reset: OffsetReset::Latest,
            group_protocol: GroupProtocol::Consumer,
            client_rack: String::new(),
            group_instance_id: None,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3_000,
            max_poll_interval_ms: 300_000,
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            max_poll_records: 500,
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            reconnect_backoff_ms: 50,
            reconnect_backoff_max_ms: 1_000,
            enable_auto_commit: false,
            enable_metrics_push: true,
            auto_commit_interval_ms: 5_000,
            metadata_max_age_ms: 300_000,
            group_remote_assignor: None,
            partition_assignment_strategy: AssignmentStrategy::CooperativeSticky,
            security: SecurityConfig::default(),
            #[cfg(feature = "opentelemetry")]
            propagate_trace_context: false,
        }
    }
}

/// The consumer's settings: its own rows and those every client shares, then the security
/// rows and the ignored rows of a shared `client.properties` (`net/settings.rs`).
static SETTINGS: Table<ConsumerConfig> = Table::new(
    Client::Consumer,
    ConsumerConfig::validate,
    &[
        CONSUMER_ROWS,
        &settings::security(|c: &mut ConsumerConfig| &mut c.security),
        &settings::shared_file(),
    ],
);

/// A row of the consumer's own.
const fn row(
    name: &'static str,
    default: &'static str,
    doc: &'static str,
    apply: Apply<ConsumerConfig>,
) -> Setting<ConsumerConfig> {
    Setting::own(Client::Consumer, name, default, doc, apply)
}

/// An empty value is no value.
fn optional(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

/// The rows of [`SETTINGS`] before the security ones, in the README's order.
const CONSUMER_ROWS: &[Setting<ConsumerConfig>] = &[
    settings::bootstrap_servers(|c| &mut c.bootstrap_servers),
    row(
        GROUP_ID,
        "",
        "the group to join and commit to; needed to subscribe and commit, not to `assign`",
        Apply::Text(|c| &mut c.group_id),
    ),
    settings::client_id(
        "",
        "sent in every request header, labels the metrics; empty: `exactly-consumer-N`",
        |c| &mut c.client_id,
    ),
    row(
        ISOLATION_LEVEL,
        "read_committed",
        "`read_committed` or `read_uncommitted` (Java's default)",
        Apply::Parse {
            kind: "choice",
            set: |c, key, value| {
                c.isolation_level = parse_choice(key, value, &IsolationLevel::NAMES)?;
                Ok(())
            },
        },
    ),
    row(
        AUTO_OFFSET_RESET,
        "latest",
        "`earliest`, `latest` or `none`: where to start without a committed offset",
        Apply::Parse {
            kind: "choice",
            set: |c, key, value| {
                c.auto_offset_reset = parse_choice(key, value, &OffsetReset::NAMES)?;
                Ok(())
            },
        },
    ),
    row(
        GROUP_PROTOCOL,
        "consumer",
        "`consumer` (KIP-848, falling back to classic) or `classic`",
        Apply::Parse {
            kind: "choice",
            set: |c, key, value| {
                c.group_protocol = parse_choice(key, value, &GroupProtocol::NAMES)?;
                Ok(())
            },
        },
    ),
    row(
        CLIENT_RACK,
        "",
        "the consumer's rack: fetch from the replica its leader names in that rack (KIP-392)",
        Apply::Text(|c| &mut c.client_rack),
    ),
    row(
        GROUP_INSTANCE_ID,
        "",
        "static membership (KIP-345)",
        Apply::Parse {
            kind: "string",
            set: |c, _, value| {
                c.group_instance_id = optional(value);
                Ok(())
            },
        },
    ),
    row(
        SESSION_TIMEOUT_MS,
        "45000",
        "classic protocol: how long the coordinator waits for a heartbeat",
        Apply::U64(|c| &mut c.session_timeout_ms),
    ),
    row(
        HEARTBEAT_INTERVAL_MS,
        "3000",
        "classic protocol: the heartbeat interval (KIP-848's comes from the coordinator)",
        Apply::U64(|c| &mut c.heartbeat_interval_ms),
    ),
    row(
        MAX_POLL_INTERVAL_MS,
        "300000",
        "the rebalance timeout: how long a member may take to give up revoked partitions",
        Apply::U64(|c| &mut c.max_poll_interval_ms),
    ),
    row(
        FETCH_MAX_WAIT_MS,
        "500",
        "how long a broker may hold a fetch for `fetch.min.bytes`",
        Apply::U64(|c| &mut c.fetch_max_wait_ms),
    ),
    row(
        FETCH_MIN_BYTES,
        "1",
        "the bytes a broker waits for before answering a fetch",
        Apply::I32(|c| &mut c.fetch_min_bytes),
    ),
    row(
        FETCH_MAX_BYTES,
        "52428800",
        "the most bytes one Fetch response may carry",
        Apply::I32(|c| &mut c.fetch_max_bytes),
    ),
    row(
        MAX_PARTITION_FETCH_BYTES,
        "1048576",
        "the most bytes per partition in one Fetch response",
        Apply::I32(|c| &mut c.max_partition_fetch_bytes),
    ),
    row(
        MAX_POLL_RECORDS,
        "500",
        "the most records one `poll` returns (and keeps decoded)",
        Apply::Usize(|c| &mut c.max_poll_records),
    ),
    settings::request_timeout_ms(|c| &mut c.request_timeout_ms),
    settings::retry_backoff_ms(|c| &mut c.retry_backoff_ms),
    settings::reconnect_backoff_ms(|c| &mut c.reconnect_backoff_ms),
    settings::reconnect_backoff_max_ms(|c| &mut c.reconnect_backoff_max_ms),
    row(
        ENABLE_AUTO_COMMIT,
        "false",
        "commit what earlier polls handed out, every `auto.commit.interval.ms` (at-least-once)",
        Apply::Flag(|c| &mut c.enable_auto_commit),
    ),
    row(
        AUTO_COMMIT_INTERVAL_MS,
        "5000",
        "how often auto-commit commits",
        Apply::U64(|c| &mut c.auto_commit_interval_ms),
    ),
    settings::metadata_max_age_ms(|c| &mut c.metadata_max_age_ms),
    settings::enable_metrics_push(|c| &mut c.enable_metrics_push),
    row(
        GROUP_REMOTE_ASSIGNOR,
        "",
        "KIP-848: the server-side assignor to ask for; unset: the broker's default",
        Apply::Parse {
            kind: "string",
            set: |c, _, value| {
                c.group_remote_assignor = optional(value);
                Ok(())
            },
        },
    ),
    row(
        PARTITION_ASSIGNMENT_STRATEGY,
        "cooperative-sticky",
        "classic protocol: `cooperative-sticky` or `range` (or their Java class names)",
        Apply::Parse {
            kind: "choice",
            // One strategy: a list would need protocol negotiation between them, which
            // the group does with Java consumers only for its upgrade path.
            // Java's class names (org.apache...CooperativeStickyAssignor) work too.
            set: |c, key, value| {
                let name = value.rsplit('.').next().unwrap_or_default();
                c.partition_assignment_strategy =
                    parse_choice(key, name, &AssignmentStrategy::NAMES)?;
                Ok(())
            },
        },
    ),
];

impl ClientConfig for ConsumerConfig {
    const SETTINGS: &'static Table<Self> = &SETTINGS;
}

impl ConsumerConfig {
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
        if self.enable_auto_commit && self.group_id.is_empty() {
            return Err(config_error(
                ENABLE_AUTO_COMMIT,
                "true needs a group.id to commit to (Java: InvalidConfigurationException)",
            ));
        }
        if self.enable_auto_commit && self.auto_commit_interval_ms == 0 {
            return Err(config_error(AUTO_COMMIT_INTERVAL_MS, "must be positive"));
        }
        if self.heartbeat_interval_ms == 0 || self.heartbeat_interval_ms >= self.session_timeout_ms
        {
            return Err(config_error(
                HEARTBEAT_INTERVAL_MS,
                "must be positive and lower than session.timeout.ms",
            ));
        }
        if self.max_poll_interval_ms == 0 || self.max_poll_interval_ms > i32::MAX as u64 {
            return Err(config_error(
                MAX_POLL_INTERVAL_MS,
                "must be between 1 and 2147483647",
            ));
        }
        if self.session_timeout_ms > i32::MAX as u64 {
            return Err(config_error(SESSION_TIMEOUT_MS, "must fit an int32"));
        }
        if self.fetch_max_wait_ms > i32::MAX as u64 {
            return Err(config_error(FETCH_MAX_WAIT_MS, "must fit an int32"));
        }
        if self.fetch_min_bytes < 0 {
            return Err(config_error(FETCH_MIN_BYTES, "must not be negative"));
        }
        if self.fetch_max_bytes <= 0 {
            return Err(config_error(FETCH_MAX_BYTES, "must be positive"));
        }
        if self.max_partition_fetch_bytes <= 0 {
            return Err(config_error(MAX_PARTITION_FETCH_BYTES, "must be positive"));
        }
        if self.max_poll_records == 0 {
            return Err(config_error(MAX_POLL_RECORDS, "must be positive"));
        }
        if self.request_timeout_ms == 0 {
            return Err(config_error(REQUEST_TIMEOUT_MS, "must be positive"));
        }
        self.security.validate()?;
        Ok(())
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub(crate) fn retry_backoff(&self) -> Duration {
        Duration::from_millis(self.retry_backoff_millis())
    }

    /// `retry.backoff.ms`, at least one, on the state machines' clock.
    pub(crate) fn retry_backoff_millis(&self) -> Millis {
        self.retry_backoff_ms.max(1)
    }

    /// `auto.commit.interval.ms`, at least one, on the state machines' clock.
    pub(crate) fn auto_commit_interval_millis(&self) -> Millis {
        self.auto_commit_interval_ms.max(1)
    }

    /// Whether the consumer has a group (to subscribe, look up committed offsets, commit).
    pub(crate) fn has_group(&self) -> bool {
        !self.group_id.is_empty()
    }

    /// The error of a call that needs a `group.id` the configuration does not have.
    pub(crate) fn group_required(what: &str) -> Error {
        config_error(GROUP_ID, format!("is required to {what}"))
    }
}

/// Builds a [`Consumer`]: `Consumer::builder().bootstrap(..).group_id(..).build()`.
#[derive(Debug, Clone, Default)]
pub struct ConsumerBuilder {
    /// The configuration being built and the first property that failed to parse, reported
    /// by `build`.
    draft: Draft<ConsumerConfig>,
    /// The application's hooks, handed to the consumer `build` makes.
    hooks: Option<HooksHandle>,
}

impl ConsumerBuilder {
    /// A builder with the default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    settings::connection_setters!(Consumer);

    /// `group.id`.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.draft.config.group_id = group.into();
        self
    }

    /// `enable.metrics.push`: whether to push metrics to the cluster (KIP-714).
    pub fn metrics_push(mut self, enable: bool) -> Self {
        self.draft.config.enable_metrics_push = enable;
        self
    }

    /// `isolation.level` (default [`IsolationLevel::ReadCommitted`]).
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.draft.config.isolation_level = level;
        self
    }

    /// `auto.offset.reset` (default [`OffsetReset::Latest`], as Kafka's).
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.draft.config.auto_offset_reset = reset;
        self
    }

    /// `group.protocol` (default [`GroupProtocol::Consumer`], KIP-848, when the broker has it).
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.draft.config.group_protocol = protocol;
        self
    }

    /// `group.instance.id`: static membership (KIP-345).
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.draft.config.group_instance_id = Some(id.into());
        self
    }

    /// Hooks the consumer calls as `poll` hands records and rebalances out: see
    /// [`ConsumerHooks`].
    pub fn hooks(mut self, hooks: Arc<dyn ConsumerHooks>) -> Self {
        self.hooks = Some(HooksHandle(hooks));
        self
    }

    /// W3C trace-context propagation: see [`ConsumerConfig::propagate_trace_context`].
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn propagate_trace_context(mut self, enable: bool) -> Self {
        self.draft.config.propagate_trace_context = enable;
        self
    }

    /// Any property by its Kafka name; a bad one is reported by [`ConsumerBuilder::build`].
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.draft.set(&key.into(), &value.into());
        self
    }

    /// The validated configuration.
    pub fn config(self) -> Result<ConsumerConfig, Error> {
        self.draft.finish()
    }

    /// Validates the configuration and connects: see [`Consumer`].
    pub async fn build(self) -> Result<Consumer, Error> {
        let hooks = self.hooks.clone();
        Consumer::with_config(self.config()?, hooks).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::config::{Acks, ProducerConfig};

    fn with(props: &[(&str, &str)]) -> Result<ConsumerConfig, Error> {
        ConsumerConfig::from_properties(props.iter().copied())
    }

    fn setting_of(result: Result<ConsumerConfig, Error>) -> String {
        match result {
            Err(Error::Config { setting, .. }) => setting,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_and_every_property() {
        let config = with(&[
            ("bootstrap.servers", "127.0.0.1:9092, 127.0.0.1:9093"),
            ("group.id", "g"),
        ])
        .unwrap();
        assert_eq!(config.isolation_level, IsolationLevel::ReadCommitted);
        assert_eq!(config.auto_offset_reset, OffsetReset::Latest);
        assert_eq!(config.group_protocol, GroupProtocol::Consumer);
        assert_eq!(config.bootstrap_servers.len(), 2);

        let config = with(&[
            ("bootstrap.servers", "h:1"),
            ("group.id", "g"),
            ("client.id", "c"),
            ("isolation.level", "READ_UNCOMMITTED"),
            ("auto.offset.reset", "earliest"),
            ("group.protocol", "classic"),
            ("group.instance.id", "i-1"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
            ("max.poll.interval.ms", "10000"),
            ("fetch.max.wait.ms", "100"),
            ("fetch.min.bytes", "10"),
            ("fetch.max.bytes", "1000000"),
            ("max.partition.fetch.bytes", "100000"),
            ("max.poll.records", "7"),
            ("request.timeout.ms", "5000"),
            ("retry.backoff.ms", "10"),
            ("reconnect.backoff.ms", "10"),
            ("reconnect.backoff.max.ms", "100"),
            ("enable.auto.commit", "TRUE"),
            ("auto.commit.interval.ms", "1000"),
            ("metadata.max.age.ms", "2000"),
            ("group.remote.assignor", "range"),
        ])
        .unwrap();
        assert!(config.enable_auto_commit);
        assert_eq!(config.auto_commit_interval_ms, 1000);
        assert_eq!(config.metadata_max_age_ms, 2000);
        assert_eq!(config.isolation_level, IsolationLevel::ReadUncommitted);
        assert_eq!(config.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(config.group_protocol, GroupProtocol::Classic);
        assert_eq!(config.group_instance_id.as_deref(), Some("i-1"));
        assert_eq!(config.session_timeout_ms, 6000);
        assert_eq!(config.max_poll_records, 7);
        assert_eq!(config.group_remote_assignor.as_deref(), Some("range"));
    }

    #[test]
    fn errors_name_the_property() {
        assert_eq!(setting_of(with(&[("group.id", "g")])), "bootstrap.servers");
        // Manual assignment needs no group; auto-commit does.
        assert!(with(&[("bootstrap.servers", "h:1")]).is_ok());
        assert_eq!(
            setting_of(with(&[
                ("bootstrap.servers", "h:1"),
                ("enable.auto.commit", "true")
            ])),
            "enable.auto.commit"
        );
        let base = [("bootstrap.servers", "h:1"), ("group.id", "g")];
        for (key, value) in [
            ("isolation.level", "serializable"),
            ("auto.offset.reset", "smallest"),
            ("group.protocol", "eager"),
            ("enable.auto.commit", "yes"),
            ("auto.commit.interval.ms", "-1"),
            ("fetch.max.bytes", "0"),
            ("heartbeat.interval.ms", "50000"),
            ("max.poll.records", "x"),
        ] {
            let mut props = base.to_vec();
            props.push((key, value));
            assert_eq!(setting_of(with(&props)), key, "{key}={value}");
        }
        match with(&[("group.idd", "g")]) {
            Err(Error::Config { reason, .. }) => assert!(reason.contains("group.id"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    /// One Confluent Cloud shaped `client.properties` (its Java template, with the
    /// Schema Registry lines) configures both clients: each ignores the other's settings and
    /// the JVM's, and still refuses a typo.
    #[test]
    fn a_shared_client_properties_configures_producer_and_consumer() {
        let shared = crate::net::settings::tests::CONFLUENT_CLOUD_PROPERTIES;
        let consumer = with(&shared).unwrap();
        assert_eq!(consumer.session_timeout_ms, 45_000);
        assert_eq!(consumer.group_id, "g");
        let producer = ProducerConfig::from_properties(shared).unwrap();
        assert_eq!(producer.acks, Acks::All);
        assert_eq!(consumer.security, producer.security);
        let mut typo = shared.to_vec();
        typo.push(("sasl.mechanisim", "PLAIN"));
        assert_eq!(setting_of(with(&typo)), "sasl.mechanisim");
    }

    #[test]
    fn builder_reports_a_bad_property_at_build() {
        let result = ConsumerBuilder::new()
            .bootstrap("h:1")
            .group_id("g")
            .set("fetch.min.bytes", "-1")
            .config();
        assert_eq!(setting_of(result), "fetch.min.bytes");
    }

    #[test]
    fn assignment_strategy_defaults_to_cooperative_sticky() {
        let mut config = ConsumerConfig::default();
        assert_eq!(
            config.partition_assignment_strategy,
            AssignmentStrategy::CooperativeSticky
        );
        config
            .set(
                PARTITION_ASSIGNMENT_STRATEGY,
                "org.apache.kafka.clients.consumer.RangeAssignor",
            )
            .unwrap();
        assert_eq!(
            config.partition_assignment_strategy,
            AssignmentStrategy::Range
        );
        config
            .set(PARTITION_ASSIGNMENT_STRATEGY, "cooperative-sticky")
            .unwrap();
        assert_eq!(
            config.partition_assignment_strategy,
            AssignmentStrategy::CooperativeSticky
        );
        assert!(
            config
                .set(PARTITION_ASSIGNMENT_STRATEGY, "roundrobin")
                .is_err()
        );
    }
}
