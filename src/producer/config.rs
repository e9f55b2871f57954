//! Producer configuration: typed fields with the Java producer's defaults, Kafka's property
//! names (so existing settings can be brought over) and the Java producer's consistency rules.
//!
//! Two ways in, one set of rules:
//! - [`ProducerConfig::from_properties`] takes `(name, value)` pairs under Kafka's property names
//!   (`enable.idempotence`, `linger.ms`, ...), parsed as Java's `ConfigDef` parses them (values
//!   trimmed, booleans case-insensitive, `acks` one of `all`, `-1`, `1`, `0`).
//! - [`ProducerBuilder`] has a typed, chainable setter per setting and `property(name, value)`.
//!
//! Both end in [`ProducerConfig::validate`], which enforces what the Java producer enforces
//! (`ProducerConfig.postProcessAndValidateIdempotenceConfigs`,
//! `KafkaProducer.configureDeliveryTimeout`, the `ConfigDef` ranges) — but strictly: where Java
//! silently *adjusts* a setting the user did not write (it turns idempotence off when `acks` is
//! not `all`, or raises `delivery.timeout.ms` to `linger.ms + request.timeout.ms`), we report
//! the contradiction instead, so the guarantees a user gets are the ones they can read in their
//! configuration. Every problem is an [`Error::Config`] naming the Kafka property.

mod compression;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use compression::CompressionConfig;

use crate::error::Error;
use crate::net::properties::{check_bootstrap_servers, config_error};
use crate::net::security::SecurityConfig;
use crate::net::settings::{
    self, Apply, BOOTSTRAP_SERVERS, CLIENT_ID, Client, ClientConfig, Draft, REQUEST_TIMEOUT_MS,
    Setting, Table,
};
use crate::producer::hooks::{HooksObserver, ProducerHooks};
use crate::protocol::record_batch::Compression;
use crate::types::millis;

const ENABLE_IDEMPOTENCE: &str = "enable.idempotence";
const ACKS: &str = "acks";
const LINGER_MS: &str = "linger.ms";
const BATCH_SIZE: &str = "batch.size";
const BUFFER_MEMORY: &str = "buffer.memory";
const MAX_IN_FLIGHT: &str = "max.in.flight.requests.per.connection";
const RETRIES: &str = "retries";
const RETRY_BACKOFF_MAX_MS: &str = "retry.backoff.max.ms";
const DELIVERY_TIMEOUT_MS: &str = "delivery.timeout.ms";
const MAX_REQUEST_SIZE: &str = "max.request.size";
const PRODUCE_REQUEST_MAX_BYTES: &str = "produce.request.max.bytes";
const MAX_BLOCK_MS: &str = "max.block.ms";
const TRANSACTIONAL_ID: &str = "transactional.id";
const TRANSACTION_TIMEOUT_MS: &str = "transaction.timeout.ms";

/// The default of `produce.request.max.bytes`: 16 MiB, a sixth of the broker's default
/// `socket.request.max.bytes`.
const DEFAULT_PRODUCE_REQUEST_MAX_BYTES: usize = 16 * 1024 * 1024;

/// The most batches an idempotent producer may have in flight per connection: the broker keeps
/// the sequence numbers of the last 5 batches per producer and partition
/// (`ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE`; rule P4).
pub const MAX_IN_FLIGHT_FOR_IDEMPOTENCE: usize = 5;

/// The largest value of a Java `INT` property (`Type.INT` in `ProducerConfig`); several of them
/// also travel as an `int32` on the wire (Produce `TimeoutMs`, InitProducerId
/// `TransactionTimeoutMs`).
const INT_MAX: u64 = i32::MAX as u64;

/// The longest `client.id` or `transactional.id`: both are `string` fields on the wire (request
/// header `ClientId`; InitProducerId `TransactionalId`), whose length is an `int16`.
const STRING_MAX_BYTES: usize = i16::MAX as usize;

/// How many acknowledgements a Produce request waits for (`acks`; Produce `Acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=0`: the broker does not answer; nothing is known about delivery.
    None,
    /// `acks=1`: the partition leader has written the batch to its log.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has the batch. Required for idempotence.
    #[default]
    All,
}

impl Acks {
    /// The value of the Produce request's `Acks` field.
    pub fn as_i16(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

impl FromStr for Acks {
    type Err = Error;

    /// Parses `acks` as Java's `ProducerConfig` does: `in("all", "-1", "0", "1")`, case-sensitive.
    fn from_str(value: &str) -> Result<Self, Error> {
        match value.trim() {
            "all" | "-1" => Ok(Acks::All),
            "1" => Ok(Acks::Leader),
            "0" => Ok(Acks::None),
            other => Err(config_error(
                ACKS,
                format!("expected one of all, -1, 1, 0; got {other:?}"),
            )),
        }
    }
}

/// Everything the producer is configured with.
///
/// Defaults are the Kafka 4.x Java producer's, except `client.id` (Java makes up
/// `producer-N`). Build one with [`ProducerBuilder`] or [`ProducerConfig::from_properties`];
/// [`ProducerConfig::default`] has no bootstrap servers and so does not validate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// `bootstrap.servers`: the brokers first asked for metadata, each `host:port` (an IPv6
    /// address in brackets, `[::1]:9092`). Required.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`: sent in every request header; brokers use it in logs and quotas, and
    /// it labels the metrics. Empty (the default): a name unique in the process,
    /// `exactly-producer-1`, `exactly-producer-2`, ... in the order producers are built.
    pub client_id: String,
    /// `enable.idempotence`: the broker deduplicates retried batches by producer id, epoch and
    /// sequence (KIP-98), so a retry never writes a record twice.
    pub enable_idempotence: bool,
    /// `enable.metrics.push`: push the metrics the cluster's client-metrics subscription asks
    /// for to a broker (KIP-714), as the Java client and librdkafka do by default.
    pub enable_metrics_push: bool,
    /// `acks`: how many replicas must have a batch before the broker answers.
    pub acks: Acks,
    /// `linger.ms`: how long a batch waits for more records before it is sent.
    pub linger_ms: u64,
    /// `batch.size`: the byte size at which a partition's batch is full (and, for keyless
    /// records, the bytes after which the sticky partitioner moves on, KIP-794).
    pub batch_size: usize,
    /// `buffer.memory`: the bytes of records the producer holds before `send` waits.
    pub buffer_memory: usize,
    /// `max.in.flight.requests.per.connection`: unanswered Produce requests per broker.
    pub max_in_flight_requests_per_connection: usize,
    /// `retries`: how many times a failed batch is retried (within `delivery.timeout.ms`).
    pub retries: u32,
    /// `retry.backoff.ms`: the first wait before a retry.
    pub retry_backoff_ms: u64,
    /// `retry.backoff.max.ms`: the cap of the exponentially growing retry wait (KIP-580). If
    /// it is below `retry.backoff.ms` the wait is fixed at this value, as in Java (which only
    /// warns: `CommonClientConfigs.warnDisablingExponentialBackoff`).
    pub retry_backoff_max_ms: u64,
    /// `reconnect.backoff.ms`: the first wait before reconnecting to a broker that could not
    /// be reached; it doubles per failed attempt, with jitter.
    pub reconnect_backoff_ms: u64,
    /// `reconnect.backoff.max.ms`: the cap of that wait.
    pub reconnect_backoff_max_ms: u64,
    /// `delivery.timeout.ms`: the bound on the time from `send` to the record's outcome,
    /// retries included (KIP-91).
    pub delivery_timeout_ms: u64,
    /// `request.timeout.ms`: how long the producer waits for one answer from a broker.
    pub request_timeout_ms: u64,
    /// `max.request.size`: the largest record batch, and so the largest record (a record
    /// larger than this is refused at `send`). Java's documentation calls its setting of
    /// this name "effectively a cap on the maximum uncompressed record batch size"; here
    /// that is all it bounds: a Produce request may carry several such batches, up to
    /// [`ProducerConfig::produce_request_max_bytes`].
    pub max_request_size: usize,
    /// `produce.request.max.bytes` (not a Java setting): the most batch bytes one Produce
    /// request carries. A request to a broker takes one ready batch of every partition it
    /// leads, up to this, as franz-go's requests do (its `BrokerMaxWriteBytes`), so the
    /// broker handles few full requests rather than one per batch. A request always carries
    /// at least one batch. Default 16 MiB, well below the broker's
    /// `socket.request.max.bytes` (100 MiB), above which the broker closes the connection.
    pub produce_request_max_bytes: usize,
    /// `metadata.max.age.ms`: metadata older than this is refreshed even without errors.
    pub metadata_max_age_ms: u64,
    /// `max.block.ms`: how long `send` waits for metadata or buffer space before failing.
    pub max_block_ms: u64,
    /// `transactional.id`: makes the producer transactional (KIP-98); `None` for
    /// idempotent-only.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the coordinator lets a transaction stay open before
    /// aborting it; the broker caps it with `transaction.max.timeout.ms`.
    pub transaction_timeout_ms: u64,
    /// `compression.type` and the `compression.*.level` settings.
    pub compression: CompressionConfig,
    /// `security.protocol` and the `ssl.*` / `sasl.*` settings. Secrets in it never print.
    pub security: SecurityConfig,
    /// Writes the W3C trace context of each record's `send` span (or of the caller's span
    /// when that one is off) into its `traceparent` / `tracestate` headers, unless the record
    /// has a header of that name already. Default off. Not a Kafka property.
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub propagate_trace_context: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            bootstrap_servers: Vec::new(),
            client_id: String::new(),
            enable_idempotence: true,
            enable_metrics_push: true,
            acks: Acks::All,
            linger_ms: 5,
            batch_size: 16_384,
            buffer_memory: 32 * 1024 * 1024,
            max_in_flight_requests_per_connection: MAX_IN_FLIGHT_FOR_IDEMPOTENCE,
            retries: i32::MAX as u32,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1_000,
            reconnect_backoff_ms: 50,
            reconnect_backoff_max_ms: 1_000,
            delivery_timeout_ms: 120_000,
            request_timeout_ms: 30_000,
            max_request_size: 1024 * 1024,
            produce_request_max_bytes: DEFAULT_PRODUCE_REQUEST_MAX_BYTES,
            metadata_max_age_ms: 300_000,
            max_block_ms: 60_000,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            compression: CompressionConfig::default(),
            security: SecurityConfig::default(),
            #[cfg(feature = "opentelemetry")]
            propagate_trace_context: false,
        }
    }
}

/// The producer's settings: its own rows, then those every client shares, the security rows
/// and the ignored rows of a shared `client.properties` (`net/settings.rs`).
static SETTINGS: Table<ProducerConfig> = Table::new(
    Client::Producer,
    ProducerConfig::validate,
    &[
        PRODUCER_ROWS,
        &settings::security(|c: &mut ProducerConfig| &mut c.security),
        &settings::shared_file(),
    ],
);

/// A row of the producer's own.
const fn row(
    name: &'static str,
    default: &'static str,
    doc: &'static str,
    apply: Apply<ProducerConfig>,
) -> Setting<ProducerConfig> {
    Setting::own(Client::Producer, name, default, doc, apply)
}

/// The rows of [`SETTINGS`] before the security ones, in the README's order.
const PRODUCER_ROWS: &[Setting<ProducerConfig>] = &[
    settings::bootstrap_servers(|c| &mut c.bootstrap_servers),
    settings::client_id(
        "",
        "sent in every request header, labels the metrics; empty: `exactly-producer-N`",
        |c| &mut c.client_id,
    ),
    row(
        ENABLE_IDEMPOTENCE,
        "true",
        "the broker deduplicates retried batches (KIP-98): a retry never writes a record twice",
        Apply::Flag(|c| &mut c.enable_idempotence),
    ),
    row(
        ACKS,
        "all",
        "`all` (`-1`), `1` or `0`: how many replicas must have a batch before the broker answers",
        Apply::Parse {
            kind: "choice",
            set: |c, _, value| {
                c.acks = value.parse()?;
                Ok(())
            },
        },
    ),
    row(
        LINGER_MS,
        "5",
        "how long a batch waits for more records before it is sent",
        Apply::U64(|c| &mut c.linger_ms),
    ),
    row(
        BATCH_SIZE,
        "16384",
        "the bytes at which a partition's batch is full",
        Apply::Usize(|c| &mut c.batch_size),
    ),
    row(
        BUFFER_MEMORY,
        "33554432",
        "the bytes of records held before `send` waits",
        Apply::Usize(|c| &mut c.buffer_memory),
    ),
    row(
        MAX_IN_FLIGHT,
        "5",
        "unanswered Produce requests per broker (at most 5 with idempotence)",
        Apply::Usize(|c| &mut c.max_in_flight_requests_per_connection),
    ),
    row(
        RETRIES,
        "2147483647",
        "how many times a failed batch is retried, within `delivery.timeout.ms`",
        Apply::U32(|c| &mut c.retries),
    ),
    settings::retry_backoff_ms(|c| &mut c.retry_backoff_ms),
    row(
        RETRY_BACKOFF_MAX_MS,
        "1000",
        "the cap of the exponentially growing retry wait (KIP-580)",
        Apply::U64(|c| &mut c.retry_backoff_max_ms),
    ),
    settings::reconnect_backoff_ms(|c| &mut c.reconnect_backoff_ms),
    settings::reconnect_backoff_max_ms(|c| &mut c.reconnect_backoff_max_ms),
    row(
        DELIVERY_TIMEOUT_MS,
        "120000",
        "the bound on the time from `send` to the record's outcome, retries included (KIP-91)",
        Apply::U64(|c| &mut c.delivery_timeout_ms),
    ),
    settings::request_timeout_ms(|c| &mut c.request_timeout_ms),
    row(
        MAX_REQUEST_SIZE,
        "1048576",
        "the largest record batch, and so the largest record",
        Apply::Usize(|c| &mut c.max_request_size),
    ),
    row(
        PRODUCE_REQUEST_MAX_BYTES,
        "16777216",
        "the most batch bytes one Produce request carries (not a Java setting)",
        Apply::Usize(|c| &mut c.produce_request_max_bytes),
    ),
    settings::metadata_max_age_ms(|c| &mut c.metadata_max_age_ms),
    row(
        MAX_BLOCK_MS,
        "60000",
        "how long `send` waits for metadata or buffer space before failing",
        Apply::U64(|c| &mut c.max_block_ms),
    ),
    row(
        TRANSACTIONAL_ID,
        "",
        "makes the producer transactional (KIP-98); unset: idempotent only",
        Apply::Parse {
            kind: "string",
            // An empty id is kept (not read as "unset") so that `validate` rejects it, as
            // Java's `ConfigDef.NonEmptyString` does.
            set: |c, _, value| {
                c.transactional_id = Some(value.to_owned());
                Ok(())
            },
        },
    ),
    row(
        TRANSACTION_TIMEOUT_MS,
        "60000",
        "how long the coordinator lets a transaction stay open before aborting it",
        Apply::U64(|c| &mut c.transaction_timeout_ms),
    ),
    row(
        compression::COMPRESSION_TYPE,
        "none",
        "`none`, `gzip`, `snappy`, `lz4` or `zstd`",
        Apply::Parse {
            kind: "choice",
            set: set_codec,
        },
    ),
    row(
        compression::COMPRESSION_CODEC,
        "none",
        "librdkafka's name for `compression.type`",
        Apply::Parse {
            kind: "choice",
            set: set_codec,
        },
    ),
    row(
        compression::GZIP_LEVEL,
        "-1",
        "1 to 9, or -1 for zlib's default (6) (KIP-390)",
        Apply::Signed(|c| &mut c.compression.gzip_level),
    ),
    row(
        compression::LZ4_LEVEL,
        "9",
        "1 to 17, accepted as in Java but not applied (the fast compressor is Java's at 9)",
        Apply::Signed(|c| &mut c.compression.lz4_level),
    ),
    row(
        compression::ZSTD_LEVEL,
        "3",
        "-131072 to 22 (negative levels are faster than 1)",
        Apply::Signed(|c| &mut c.compression.zstd_level),
    ),
    settings::enable_metrics_push(|c| &mut c.enable_metrics_push),
];

/// `compression.type`, or librdkafka's `compression.codec`.
fn set_codec(config: &mut ProducerConfig, key: &str, value: &str) -> Result<(), Error> {
    config.compression.codec = compression::parse_codec(key, value)?;
    Ok(())
}

impl ClientConfig for ProducerConfig {
    const SETTINGS: &'static Table<Self> = &SETTINGS;
}

impl ProducerConfig {
    /// A validated configuration from `(property, value)` pairs under Kafka's names, applied
    /// over the defaults in order (a repeated property: the last wins).
    ///
    /// An unknown property, a malformed value or a contradiction is an [`Error::Config`].
    /// Properties a shared `client.properties` carries for other clients or the JVM
    /// (`client.dns.lookup`, `session.timeout.ms`, `schema.registry.*`, `basic.auth.*`, ...)
    /// are accepted and ignored, so a file copied from Confluent Cloud or MSK works as is.
    pub fn from_properties<I, K, V>(props: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        SETTINGS.configure(props)
    }

    /// Sets one property by its Kafka name. The value is trimmed and parsed as Java's
    /// `ConfigDef` parses its type (LIST: comma-separated; BOOLEAN: `true`/`false`, any case;
    /// numbers: decimal). Ranges and cross-setting rules are checked by [`Self::validate`].
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        SETTINGS.set(self, key, value)
    }

    /// Checks every setting and every rule between settings; the first problem found is
    /// returned, naming the property to change.
    pub fn validate(&self) -> Result<(), Error> {
        check_bootstrap_servers(BOOTSTRAP_SERVERS, &self.bootstrap_servers)?;
        self.security.validate()?;
        check_wire_string(CLIENT_ID, &self.client_id)?;
        self.compression.validate()?;

        // Java `Type.INT` properties: larger values do not parse in Java, and the timeouts go on
        // the wire as int32.
        for (setting, value) in [
            (BATCH_SIZE, self.batch_size as u64),
            (
                MAX_IN_FLIGHT,
                self.max_in_flight_requests_per_connection as u64,
            ),
            (RETRIES, u64::from(self.retries)),
            (DELIVERY_TIMEOUT_MS, self.delivery_timeout_ms),
            (REQUEST_TIMEOUT_MS, self.request_timeout_ms),
            (MAX_REQUEST_SIZE, self.max_request_size as u64),
            (
                PRODUCE_REQUEST_MAX_BYTES,
                self.produce_request_max_bytes as u64,
            ),
            (TRANSACTION_TIMEOUT_MS, self.transaction_timeout_ms),
        ] {
            if value > INT_MAX {
                return Err(config_error(
                    setting,
                    format!("{value} is larger than the maximum {INT_MAX}"),
                ));
            }
        }
        // `atLeast(1)` in Java's ConfigDef.
        if self.max_in_flight_requests_per_connection == 0 {
            return Err(config_error(MAX_IN_FLIGHT, "must be at least 1"));
        }
        // Java allows 0 (no batching); one record per batch defeats the per-batch design
        // (ARCHITECTURE.md, performance shape), so we ask for at least one byte.
        if self.batch_size == 0 {
            return Err(config_error(BATCH_SIZE, "must be at least 1"));
        }
        // A request carries at least one batch whatever this says; a smaller value could only
        // mean one batch per request, which is not what anyone setting it would want.
        if self.produce_request_max_bytes < self.max_request_size {
            return Err(config_error(
                PRODUCE_REQUEST_MAX_BYTES,
                format!(
                    "{} is smaller than max.request.size ({}), the largest batch",
                    self.produce_request_max_bytes, self.max_request_size
                ),
            ));
        }

        if self.enable_idempotence {
            self.validate_idempotence()?;
        }
        if let Some(transactional_id) = &self.transactional_id {
            if transactional_id.is_empty() {
                return Err(config_error(TRANSACTIONAL_ID, "must not be empty"));
            }
            check_wire_string(TRANSACTIONAL_ID, transactional_id)?;
            if !self.enable_idempotence {
                return Err(config_error(
                    TRANSACTIONAL_ID,
                    "cannot be set without also enabling idempotence (enable.idempotence=true)",
                ));
            }
        }

        // KafkaProducer.configureDeliveryTimeout (KIP-91): a record must be allowed to linger
        // and then wait for one full request before it can time out. Java clamps the sum to
        // Integer.MAX_VALUE.
        let linger_and_request = self
            .linger_ms
            .saturating_add(self.request_timeout_ms)
            .min(INT_MAX);
        if self.delivery_timeout_ms < linger_and_request {
            return Err(config_error(
                DELIVERY_TIMEOUT_MS,
                format!(
                    "{} should be equal to or larger than linger.ms + request.timeout.ms ({})",
                    self.delivery_timeout_ms, linger_and_request
                ),
            ));
        }
        Ok(())
    }

    /// The idempotent producer's requirements, with Java's wording
    /// (`ProducerConfig.postProcessAndValidateIdempotenceConfigs`); each error names the setting
    /// that contradicts `enable.idempotence=true`.
    fn validate_idempotence(&self) -> Result<(), Error> {
        if self.retries == 0 {
            return Err(config_error(
                RETRIES,
                "must be non-zero when using the idempotent producer (or set enable.idempotence=false)",
            ));
        }
        if self.acks != Acks::All {
            return Err(config_error(
                ACKS,
                "must be all in order to use the idempotent producer; otherwise we cannot \
                 guarantee idempotence (or set enable.idempotence=false)",
            ));
        }
        if self.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE {
            return Err(config_error(
                MAX_IN_FLIGHT,
                format!(
                    "must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE} to use the idempotent producer; \
                     current value is {}",
                    self.max_in_flight_requests_per_connection
                ),
            ));
        }
        Ok(())
    }
}

/// Builds a [`ProducerConfig`] with typed, chainable setters.
///
/// A setter never fails on the spot: the first bad [`ProducerBuilder::property`] is remembered
/// and reported by [`ProducerBuilder::config`], which also validates the whole configuration.
#[derive(Debug, Clone, Default)]
pub struct ProducerBuilder {
    /// The configuration being built and the first error a setter met.
    draft: Draft<ProducerConfig>,
    /// The application's hooks, handed to the producer `build` makes.
    pub(crate) hooks: Option<HooksObserver>,
}

impl ProducerBuilder {
    /// A builder with the default configuration (bootstrap servers still to set).
    pub fn new() -> Self {
        ProducerBuilder::default()
    }

    /// Hooks the producer calls at fixed points of each record's life: see
    /// [`ProducerHooks`] for when and on which task.
    pub fn hooks(mut self, hooks: Arc<dyn ProducerHooks>) -> Self {
        self.hooks = Some(HooksObserver(hooks));
        self
    }

    /// W3C trace-context propagation: see [`ProducerConfig::propagate_trace_context`].
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn propagate_trace_context(mut self, enable: bool) -> Self {
        self.draft.config.propagate_trace_context = enable;
        self
    }

    settings::connection_setters!(Producer);

    /// `enable.idempotence`.
    pub fn idempotence(mut self, enable: bool) -> Self {
        self.draft.config.enable_idempotence = enable;
        self
    }

    /// `enable.metrics.push`: whether to push metrics to the cluster (KIP-714).
    pub fn metrics_push(mut self, enable: bool) -> Self {
        self.draft.config.enable_metrics_push = enable;
        self
    }

    /// `acks`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.draft.config.acks = acks;
        self
    }

    /// `linger.ms` (whole milliseconds; a fraction is dropped).
    pub fn linger(mut self, linger: Duration) -> Self {
        self.draft.config.linger_ms = millis(linger);
        self
    }

    /// `batch.size`, in bytes.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.draft.config.batch_size = bytes;
        self
    }

    /// `buffer.memory`, in bytes.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.draft.config.buffer_memory = bytes;
        self
    }

    /// `max.in.flight.requests.per.connection`.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.draft.config.max_in_flight_requests_per_connection = requests;
        self
    }

    /// `retries`.
    pub fn retries(mut self, retries: u32) -> Self {
        self.draft.config.retries = retries;
        self
    }

    /// `retry.backoff.ms` (whole milliseconds).
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.draft.config.retry_backoff_ms = millis(backoff);
        self
    }

    /// `retry.backoff.max.ms` (whole milliseconds).
    pub fn retry_backoff_max(mut self, backoff: Duration) -> Self {
        self.draft.config.retry_backoff_max_ms = millis(backoff);
        self
    }

    /// `reconnect.backoff.ms` (whole milliseconds).
    pub fn reconnect_backoff(mut self, backoff: Duration) -> Self {
        self.draft.config.reconnect_backoff_ms = millis(backoff);
        self
    }

    /// `reconnect.backoff.max.ms` (whole milliseconds).
    pub fn reconnect_backoff_max(mut self, backoff: Duration) -> Self {
        self.draft.config.reconnect_backoff_max_ms = millis(backoff);
        self
    }

    /// `delivery.timeout.ms` (whole milliseconds).
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.draft.config.delivery_timeout_ms = millis(timeout);
        self
    }

    /// `request.timeout.ms` (whole milliseconds).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.draft.config.request_timeout_ms = millis(timeout);
        self
    }

    /// `max.request.size`, in bytes: the largest record batch, and so the largest record.
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        self.draft.config.max_request_size = bytes;
        self
    }

    /// `produce.request.max.bytes`: the most batch bytes one Produce request carries (see
    /// [`ProducerConfig::produce_request_max_bytes`]).
    pub fn produce_request_max_bytes(mut self, bytes: usize) -> Self {
        self.draft.config.produce_request_max_bytes = bytes;
        self
    }

    /// `metadata.max.age.ms` (whole milliseconds).
    pub fn metadata_max_age(mut self, age: Duration) -> Self {
        self.draft.config.metadata_max_age_ms = millis(age);
        self
    }

    /// `max.block.ms` (whole milliseconds).
    pub fn max_block(mut self, wait: Duration) -> Self {
        self.draft.config.max_block_ms = millis(wait);
        self
    }

    /// `compression.type` with its level (`compression.gzip.level`, `compression.zstd.level`),
    /// e.g. `Compression::Zstd { level: 3 }`.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.draft.config.compression.apply(compression);
        self
    }

    /// `transactional.id`: makes the producer transactional.
    pub fn transactional_id(mut self, transactional_id: impl Into<String>) -> Self {
        self.draft.config.transactional_id = Some(transactional_id.into());
        self
    }

    /// `transaction.timeout.ms` (whole milliseconds).
    pub fn transaction_timeout(mut self, timeout: Duration) -> Self {
        self.draft.config.transaction_timeout_ms = millis(timeout);
        self
    }

    /// Any property under its Kafka name, as [`ProducerConfig::set`]. A bad one is remembered
    /// and reported by [`ProducerBuilder::config`].
    pub fn property(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.draft.set(key.as_ref(), value.as_ref());
        self
    }

    /// The validated configuration, or the first error a setter met, or the first rule it
    /// breaks.
    pub fn config(self) -> Result<ProducerConfig, Error> {
        self.draft.finish()
    }
}

/// Whether a string fits a wire `string` (int16 length).
fn check_wire_string(setting: &str, value: &str) -> Result<(), Error> {
    if value.len() > STRING_MAX_BYTES {
        return Err(config_error(
            setting,
            format!(
                "is {} bytes long; the protocol allows at most {STRING_MAX_BYTES}",
                value.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
