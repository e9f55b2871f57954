//! `Producer::metrics` against real Kafka: the figures agree with what kcat reads back after a
//! run with a proxy cut (they move only on confirmed outcomes, P8), and a broker's quota
//! throttling (KIP-219) is honoured and counted.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use exactly::{
    ConnectionState, Consumer, ConsumerEvent, ConsumerRecord, GroupProtocol, IsolationLevel,
    OffsetReset, OffsetToCommit, Producer, Record, TopicPartition,
};
use support::Cluster;
use support::delivery::{Run, value_of};

const RESOLVE_LIMIT: Duration = Duration::from_secs(90);

async fn producer(cluster: &Cluster, extra: &[(&str, &str)]) -> Producer {
    support::producer_with(
        cluster,
        &[
            ("linger.ms", "5"),
            ("request.timeout.ms", "2000"),
            ("delivery.timeout.ms", "5000"),
        ],
        extra,
    )
    .await
}

/// Records 300..500 of `topic` into `run` while broker 0's answers are lost, then while its
/// proxy is cut past the delivery timeout, so some fail (not written or indeterminate). The
/// proxy is left cut (disabled): the caller enables it again.
async fn cut_sends(
    cluster: &Cluster,
    producer: &Producer,
    topic: &str,
    run: &mut Run,
) -> support::Proxy {
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let lost = Run::send_range(producer, topic, 300, 400, false).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_enabled(false);
    proxy.remove_toxic("drop_answers");
    let cut = Run::send_range(producer, topic, 400, 500, false).await;
    run.collect(lost, RESOLVE_LIMIT).await;
    run.collect(cut, RESOLVE_LIMIT).await;
    proxy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_agree_with_the_log_after_a_cut() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("metrics");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = producer(&cluster, &[]).await;
    let mut run = Run::default();
    let before = Run::send_range(&producer, &topic, 0, 300, false).await;
    run.collect(before, RESOLVE_LIMIT).await;
    let warm = producer.metrics();
    assert_eq!(warm.record_send_total, 300);
    assert!(warm.request_latency_avg_ms > 0.0 && warm.batch_size_avg > 0.0);
    assert!(warm.record_send_rate > 0.0);
    assert_eq!(
        warm.brokers.get(&1).map(|b| b.connection),
        Some(ConnectionState::Connected)
    );

    let proxy = cut_sends(&cluster, &producer, &topic, &mut run).await;
    let during = producer.metrics();
    // Between refused attempts the link backs off; an attempt itself is brief (Connecting).
    assert!(
        matches!(
            during.brokers.get(&1).map(|b| b.connection),
            Some(ConnectionState::BackingOff | ConnectionState::Connecting)
        ),
        "{during:?}"
    );
    proxy.set_enabled(true);
    let after = Run::send_range(&producer, &topic, 500, 800, false).await;
    run.collect(after, RESOLVE_LIMIT).await;
    producer.flush().await.unwrap();
    let metrics = producer.metrics();
    producer.close().await.unwrap();

    let (acked, failed, indeterminate) = run.tally();
    assert!(failed + indeterminate > 0, "the cut failed some records");
    assert_eq!(metrics.record_send_total, acked as u64, "{metrics:?}");
    assert_eq!(
        metrics.record_error_total,
        (failed + indeterminate) as u64,
        "{metrics:?}"
    );
    assert_eq!(metrics.record_indeterminate_total, indeterminate as u64);
    assert_eq!(metrics.buffer_available_bytes, metrics.buffer_total_bytes);
    assert!(metrics.epoch_bumps >= 1, "lost answers forced a bump");
    // The independent reader: every acked record is there once; what failed definitively is
    // absent; indeterminate ones at most once.
    run.verify_log(&cluster, &topic);
    let in_log = cluster
        .read_topic(&topic, support::Isolation::ReadUncommitted)
        .len();
    assert!(
        (acked..=acked + indeterminate).contains(&in_log),
        "kcat reads {in_log} records; metrics say {acked} acked, {indeterminate} indeterminate"
    );
}

/// Sets a `producer_byte_rate` quota for one client id with Kafka's ConfigCommand.
fn set_quota(cluster: &Cluster, client_id: &str, bytes_per_second: u64) {
    let libs = std::env::var("KAFKA_LIBS").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        format!("{home}/.cache/exactly/kafka-4.1.1/libs")
    });
    support::run_ok(
        Command::new("java")
            .arg("-cp")
            .arg(format!("{libs}/*"))
            .arg(concat!(
                "-Dlog4j2.configurationFile=",
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/testbed.d/tools-log4j2.yaml"
            ))
            .args([
                "kafka.admin.ConfigCommand",
                "--bootstrap-server",
                &cluster.bootstrap,
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                client_id,
                "--add-config",
                &format!("producer_byte_rate={bytes_per_second}"),
            ]),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_broker_is_respected() {
    // Kafka measures the rate over about ten one-second samples, so a run must exceed
    // ten seconds' worth of the quota to be throttled: 1 MiB at 64 KiB/s.
    const RATE: u64 = 64 * 1024;
    const RECORDS: u64 = 1024;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("quota");
    cluster.create_topic(&topic, 1, 1, &[]);
    let client_id = support::unique_topic("throttled");
    set_quota(&cluster, &client_id, RATE);
    // Dynamic client configs reach the broker asynchronously.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let producer = producer(
        &cluster,
        &[
            ("client.id", &client_id),
            ("batch.size", "65536"),
            ("request.timeout.ms", "30000"),
            ("delivery.timeout.ms", "120000"),
        ],
    )
    .await;
    let padding = "x".repeat(1000);
    let started = Instant::now();
    let mut sent = Vec::new();
    for n in 0..RECORDS {
        let value = format!("{}{padding}", value_of(n));
        sent.push((n, producer.send(Record::to(&topic).value(value)).await));
    }
    let mut run = Run::default();
    run.collect(sent, RESOLVE_LIMIT).await;
    let took = started.elapsed();
    let metrics = producer.metrics();
    producer.close().await.unwrap();
    assert_eq!(run.tally(), (RECORDS as usize, 0, 0), "{:?}", run.errors());
    assert!(
        metrics.produce_throttle_time_max_ms > 0,
        "the broker throttled us: {metrics:?}"
    );
    assert_eq!(
        metrics.record_retry_total, 0,
        "honouring the throttle, no request timed out on a muted connection"
    );
    // The quota shapes the run (Kafka lets the first ten seconds' worth through at once).
    assert!(
        took >= Duration::from_secs(3),
        "{RECORDS} records of 1 KiB in {took:?}: the quota did not apply"
    );
    println!(
        "{RECORDS} records in {took:?}; throttle avg {:.0} ms, max {} ms",
        metrics.produce_throttle_time_avg_ms, metrics.produce_throttle_time_max_ms
    );
}

/// Span fields as a subscriber sees them, by span name.
#[derive(Default)]
struct SpanLog {
    spans: std::sync::Mutex<Vec<(String, std::collections::BTreeMap<String, String>)>>,
}

struct FieldText<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

struct Collect(std::sync::Arc<SpanLog>);

impl<S> tracing_subscriber::Layer<S> for Collect
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = std::collections::BTreeMap::new();
        attrs.record(&mut FieldText(&mut fields));
        fields.insert("#id".into(), id.into_u64().to_string());
        let name = attrs.metadata().name().to_owned();
        self.0.spans.lock().unwrap().push((name, fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let id = id.into_u64().to_string();
        let mut spans = self.0.spans.lock().unwrap();
        if let Some((_, fields)) = spans
            .iter_mut()
            .rev()
            .find(|(_, f)| f.get("#id") == Some(&id))
        {
            values.record(&mut FieldText(fields));
        }
    }
}

/// Spans for send, batch and request carry the OpenTelemetry messaging attributes, and a
/// batch's span gets its offset once the broker confirmed it. (Everything runs on this test's
/// thread, where the collecting subscriber is the default.)
#[tokio::test(flavor = "current_thread")]
async fn spans_carry_the_messaging_attributes() {
    use tracing_subscriber::layer::SubscriberExt;
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("spans");
    cluster.create_topic(&topic, 1, 1, &[]);
    let log = std::sync::Arc::new(SpanLog::default());
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::TRACE)
        .with(Collect(std::sync::Arc::clone(&log)));
    let _default = tracing::subscriber::set_default(subscriber);
    let producer = producer(&cluster, &[]).await;
    let ack = producer
        .send(Record::to(&topic).value("traced"))
        .await
        .unwrap();
    let meta = ack.await.expect("acknowledged");
    producer.close().await.unwrap();

    let spans = log.spans.lock().unwrap();
    let named = |name: &str| {
        spans
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
            .collect::<Vec<_>>()
    };
    let create = named("create");
    assert_eq!(create.len(), 1, "{spans:?}");
    assert_eq!(create[0]["messaging.system"], "\"kafka\"");
    assert_eq!(create[0]["messaging.destination.name"], topic);
    let batch = named("kafka.batch");
    assert_eq!(batch.len(), 1, "{spans:?}");
    assert_eq!(batch[0]["messaging.destination.partition.id"], "0");
    assert_eq!(batch[0]["messaging.kafka.offset"], meta.offset.to_string());
    assert_eq!(batch[0]["exactly.base_sequence"], "0");
    assert!(batch[0].contains_key("exactly.producer_id"));
    assert!(!named("send").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Observations through the `metrics` facade, read with `metrics-util`'s debugging recorder.
// ---------------------------------------------------------------------------------------------

/// One series as the recorder saw it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Counter(u64),
    Gauge(f64),
    /// Every observation so far, in order.
    Histogram(Vec<f64>),
}

type SeriesKey = (String, std::collections::BTreeMap<String, String>);

/// The process's recorder, installed once: `metrics-util`'s debugging recorder. Its snapshots
/// consume what they read (counters reset to 0, histograms drained, gauges set to 0), and the
/// tests of this file run in parallel, so every snapshot is merged into one store (counter
/// deltas added, every histogram observation kept); a test reads the series of its own
/// `client_id`. A gauge is a level, and the debugging recorder's reset would read as a level
/// of 0, so gauges also pass through [`LastSet`], which keeps the value last set.
struct Observed {
    snapshotter: metrics_util::debugging::Snapshotter,
    gauges: LastGauges,
    series: std::sync::Mutex<std::collections::BTreeMap<SeriesKey, Seen>>,
    /// The unit each series name was described with.
    units: std::sync::Mutex<std::collections::BTreeMap<String, metrics::Unit>>,
}

type LastGauges = std::sync::Arc<
    std::sync::Mutex<std::collections::BTreeMap<SeriesKey, std::sync::Arc<LastSet>>>,
>;

fn series_key(key: &metrics::Key) -> SeriesKey {
    let labels = key
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    (key.name().to_owned(), labels)
}

/// A gauge of the debugging recorder that also remembers the value last set: NaN until the
/// first change, so that a gauge never set is not read as a level of 0.
struct LastSet {
    inner: metrics::Gauge,
    bits: std::sync::atomic::AtomicU64,
}

impl metrics::GaugeFn for LastSet {
    fn increment(&self, value: f64) {
        self.inner.increment(value);
        self.remember(self.level() + value);
    }
    fn decrement(&self, value: f64) {
        self.inner.decrement(value);
        self.remember(self.level() - value);
    }
    fn set(&self, value: f64) {
        self.inner.set(value);
        self.remember(value);
    }
}

impl LastSet {
    fn value(&self) -> f64 {
        f64::from_bits(self.bits.load(std::sync::atomic::Ordering::SeqCst))
    }
    /// The level a change starts from: 0 before the first.
    fn level(&self) -> f64 {
        let value = self.value();
        if value.is_nan() { 0.0 } else { value }
    }
    fn remember(&self, value: f64) {
        self.bits
            .store(value.to_bits(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// The debugging recorder, with its gauges wrapped in [`LastSet`].
struct Recorder {
    debugging: metrics_util::debugging::DebuggingRecorder,
    gauges: LastGauges,
}

impl metrics::Recorder for Recorder {
    fn describe_counter(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        description: metrics::SharedString,
    ) {
        self.debugging.describe_counter(key, unit, description)
    }
    fn describe_gauge(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        description: metrics::SharedString,
    ) {
        self.debugging.describe_gauge(key, unit, description)
    }
    fn describe_histogram(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        description: metrics::SharedString,
    ) {
        self.debugging.describe_histogram(key, unit, description)
    }
    fn register_counter(
        &self,
        key: &metrics::Key,
        meta: &metrics::Metadata<'_>,
    ) -> metrics::Counter {
        self.debugging.register_counter(key, meta)
    }
    fn register_gauge(&self, key: &metrics::Key, meta: &metrics::Metadata<'_>) -> metrics::Gauge {
        let mut gauges = self.gauges.lock().unwrap();
        let gauge = gauges.entry(series_key(key)).or_insert_with(|| {
            std::sync::Arc::new(LastSet {
                inner: self.debugging.register_gauge(key, meta),
                bits: std::sync::atomic::AtomicU64::new(f64::NAN.to_bits()),
            })
        });
        metrics::Gauge::from_arc(std::sync::Arc::clone(gauge))
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        meta: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        self.debugging.register_histogram(key, meta)
    }
}

fn observed() -> &'static Observed {
    static OBSERVED: std::sync::OnceLock<Observed> = std::sync::OnceLock::new();
    OBSERVED.get_or_init(|| {
        let debugging = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = debugging.snapshotter();
        let gauges = LastGauges::default();
        metrics::set_global_recorder(Recorder {
            debugging,
            gauges: std::sync::Arc::clone(&gauges),
        })
        .expect("the only recorder of this process");
        Observed {
            snapshotter,
            gauges,
            series: Default::default(),
            units: Default::default(),
        }
    })
}

impl Observed {
    /// Every series whose labels include `client_id`, after merging a fresh snapshot.
    fn of(&self, client_id: &str) -> std::collections::BTreeMap<SeriesKey, Seen> {
        self.merged()
            .iter()
            .filter(|((_, labels), _)| {
                labels.get("client_id").map(String::as_str) == Some(client_id)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Every OpenTelemetry-convention series whose `messaging.client.id` is `client_id`,
    /// with that label removed.
    fn semconv(&self, client_id: &str) -> std::collections::BTreeMap<SeriesKey, Seen> {
        self.merged()
            .iter()
            .filter(|((_, labels), _)| {
                labels.get("messaging.client.id").map(String::as_str) == Some(client_id)
            })
            .map(|((name, labels), v)| {
                let mut labels = labels.clone();
                labels.remove("messaging.client.id");
                ((name.clone(), labels), v.clone())
            })
            .collect()
    }

    /// The unit `name` was described with.
    fn unit(&self, name: &str) -> Option<metrics::Unit> {
        drop(self.merged());
        self.units.lock().unwrap().get(name).copied()
    }

    /// Every series so far, a fresh snapshot merged in.
    fn merged(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<SeriesKey, Seen>> {
        use metrics_util::debugging::DebugValue;
        let mut series = self.series.lock().unwrap();
        for (key, unit, _, value) in self.snapshotter.snapshot().into_vec() {
            let id = series_key(key.key());
            if let Some(unit) = unit {
                self.units.lock().unwrap().insert(id.0.clone(), unit);
            }
            match value {
                DebugValue::Counter(delta) => {
                    let entry = series.entry(id).or_insert(Seen::Counter(0));
                    if let Seen::Counter(total) = entry {
                        *total += delta;
                    }
                }
                DebugValue::Gauge(_) => {
                    let level = self.gauges.lock().unwrap()[&id].value();
                    series.insert(id, Seen::Gauge(level));
                }
                DebugValue::Histogram(vs) => {
                    let entry = series.entry(id).or_insert(Seen::Histogram(Vec::new()));
                    if let Seen::Histogram(all) = entry {
                        all.extend(vs.into_iter().map(|v| v.into_inner()));
                    }
                }
            }
        }
        series
    }
}

/// The series named `name`, with their labels less `client_id`.
fn named(
    series: &std::collections::BTreeMap<SeriesKey, Seen>,
    name: &str,
) -> Vec<(std::collections::BTreeMap<String, String>, Seen)> {
    series
        .iter()
        .filter(|((n, _), _)| n == name)
        .map(|((_, labels), v)| {
            let mut labels = labels.clone();
            labels.remove("client_id");
            (labels, v.clone())
        })
        .collect()
}

fn label_names(labels: &std::collections::BTreeMap<String, String>) -> Vec<&str> {
    labels.keys().map(String::as_str).collect()
}

fn counter_sum(series: &[(std::collections::BTreeMap<String, String>, Seen)]) -> u64 {
    series
        .iter()
        .map(|(_, v)| match v {
            Seen::Counter(n) => *n,
            other => panic!("not a counter: {other:?}"),
        })
        .sum()
}

fn observations(series: &[(std::collections::BTreeMap<String, String>, Seen)]) -> Vec<f64> {
    series
        .iter()
        .flat_map(|(_, v)| match v {
            Seen::Histogram(vs) => vs.clone(),
            other => panic!("not a histogram: {other:?}"),
        })
        .collect()
}

/// Asserts every series of `name` is of `kind` with exactly the labels `labels` (besides
/// `client_id`), and that there is at least one.
fn assert_series(
    series: &std::collections::BTreeMap<SeriesKey, Seen>,
    name: &str,
    kind: &str,
    labels: &[&str],
) {
    let found = named(series, name);
    assert!(!found.is_empty(), "no series {name}: {:?}", series.keys());
    for (l, v) in &found {
        let actual = match v {
            Seen::Counter(_) => "counter",
            Seen::Gauge(_) => "gauge",
            Seen::Histogram(_) => "histogram",
        };
        assert_eq!(actual, kind, "{name}{l:?}");
        let mut want = labels.to_vec();
        want.sort_unstable();
        assert_eq!(label_names(l), want, "{name}: labels");
    }
}

/// Waits until the producer's once-a-second publication has happened since now.
async fn after_publication() {
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

/// Kafka's GetOffsetShell: the end offset of each partition of `topic`.
fn end_offsets(cluster: &Cluster, topic: &str) -> std::collections::BTreeMap<i32, i64> {
    let args = [
        "org.apache.kafka.tools.GetOffsetShell".to_owned(),
        "--bootstrap-server".into(),
        cluster.bootstrap.clone(),
        "--topic".into(),
        topic.into(),
        "--time".into(),
        "-1".into(),
    ];
    let out = support::run_ok(&mut support::java_tool(&args));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut parts = line.rsplitn(3, ':');
            let offset = parts.next()?.parse().ok()?;
            let partition = parts.next()?.parse().ok()?;
            Some((partition, offset))
        })
        .collect()
}

/// kcat's count of records per partition of `topic`.
fn records_per_partition(cluster: &Cluster, topic: &str) -> std::collections::BTreeMap<i32, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for r in cluster.read_topic(topic, support::Isolation::ReadUncommitted) {
        *counts.entry(r.partition).or_insert(0) += 1;
    }
    counts
}

/// A consumer in `group` on `topic` with the test bed's timeouts, under `client_id`.
async fn group_consumer(cluster: &Cluster, group: &str, topic: &str, client_id: &str) -> Consumer {
    support::members::consumer_with(
        cluster,
        group,
        GroupProtocol::Consumer,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        topic,
        &[("client.id", client_id)],
    )
    .await
}

/// Polls until `want` records arrived (the rebalance events are counted, not returned).
async fn consume(consumer: &mut Consumer, want: usize, limit: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + limit;
    let mut records = Vec::new();
    while records.len() < want {
        assert!(
            Instant::now() < deadline,
            "{} of {want} records in {limit:?}",
            records.len()
        );
        if let Some(ConsumerEvent::Records(batch)) = consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            records.extend(batch);
        }
    }
    records
}

/// The offsets after `records`, for each of `topic`'s first `partitions` partitions.
fn next_offsets(records: &[ConsumerRecord], topic: &str, partitions: i32) -> Vec<OffsetToCommit> {
    (0..partitions)
        .map(|p| {
            let next = records
                .iter()
                .filter(|r| r.partition == p)
                .map(|r| r.offset + 1)
                .max()
                .unwrap_or(0);
            OffsetToCommit::new(TopicPartition::new(topic, p), next)
        })
        .collect()
}

/// Every documented producer and consumer series appears with its labels and type; the
/// histograms get one observation per request or batch; the counters agree with kcat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observations_have_their_labels_types_and_counts() {
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("observed");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer_id = support::unique_topic("observed-producer");
    let producer = producer(&cluster, &[("client.id", &producer_id)]).await;
    let mut run = Run::default();
    let sent = Run::send_range(&producer, &topic, 0, 600, false).await;
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.flush().await.unwrap();
    after_publication().await;
    let series = observed.of(&producer_id);
    let snapshot = producer.metrics();
    producer.close().await.unwrap();
    assert_eq!(run.tally(), (600, 0, 0));

    for (name, kind, labels) in [
        (
            "kafka.producer.record-send-total",
            "counter",
            &["topic", "partition"][..],
        ),
        (
            "kafka.producer.batch-size",
            "histogram",
            &["topic", "partition"],
        ),
        (
            "kafka.producer.record-queue-time",
            "histogram",
            &["topic", "partition"],
        ),
        ("kafka.producer.request-latency", "histogram", &["broker"]),
        (
            "kafka.producer.records-per-request",
            "histogram",
            &["broker"],
        ),
        ("kafka.producer.requests-in-flight", "gauge", &["broker"]),
        ("exactly.producer.connection.state", "gauge", &["broker"]),
        ("kafka.producer.buffer-total-bytes", "gauge", &[]),
        ("kafka.producer.buffer-available-bytes", "gauge", &[]),
        ("kafka.producer.record-error-total", "counter", &[]),
        ("exactly.producer.records.indeterminate", "counter", &[]),
        ("kafka.producer.record-retry-total", "counter", &[]),
        ("kafka.producer.buffer-exhausted-total", "counter", &[]),
        (
            "kafka.producer.bufferpool-wait-time-ns-total",
            "counter",
            &[],
        ),
        ("exactly.producer.epoch_bumps", "counter", &[]),
        ("exactly.producer.transactions.committed", "counter", &[]),
        ("exactly.producer.transactions.aborted", "counter", &[]),
    ] {
        assert_series(&series, name, kind, labels);
    }
    // Counters against the independent reader, partition by partition.
    let in_log = records_per_partition(&cluster, &topic);
    let sends = named(&series, "kafka.producer.record-send-total");
    for (labels, value) in &sends {
        assert_eq!(labels["topic"], topic);
        let partition: i32 = labels["partition"].parse().unwrap();
        let in_partition = in_log.get(&partition).copied().unwrap_or(0);
        assert_eq!(value, &Seen::Counter(in_partition), "partition {partition}");
    }
    assert_eq!(counter_sum(&sends), 600);
    assert_eq!(
        counter_sum(&named(&series, "kafka.producer.record-error-total")),
        0
    );
    // One records-per-request observation per answered request: they add up to the records,
    // plus those a retry sent again (a slow answer past request.timeout.ms on a loaded
    // machine); one request-latency observation per request too.
    let retried = snapshot.record_retry_total;
    assert_eq!(
        counter_sum(&named(&series, "kafka.producer.record-retry-total")),
        retried
    );
    let per_request = observations(&named(&series, "kafka.producer.records-per-request"));
    assert!(
        (600.0..=600.0 + retried as f64).contains(&per_request.iter().sum::<f64>()),
        "{per_request:?}, {retried} retried"
    );
    let latencies = observations(&named(&series, "kafka.producer.request-latency"));
    assert_eq!(latencies.len(), per_request.len());
    // One batch-size and one queue-time observation per acknowledged batch: at least one per
    // partition, never more than records, and each batch holds at least one record's bytes.
    let batches = observations(&named(&series, "kafka.producer.batch-size"));
    let queue_times = observations(&named(&series, "kafka.producer.record-queue-time"));
    assert_eq!(batches.len(), queue_times.len());
    assert!(
        (1..=600).contains(&batches.len()),
        "{} batches",
        batches.len()
    );
    assert!(
        batches.len() >= per_request.len(),
        "each request carries a batch"
    );
    assert!(batches.iter().all(|&b| b > 0.0));
    // The snapshot and the histograms are the same measurements.
    assert_eq!(snapshot.record_send_total, 600);
    let max_latency = latencies.iter().cloned().fold(0.0, f64::max);
    assert_eq!(max_latency, snapshot.request_latency_max_ms as f64);
    let max_batch = batches.iter().cloned().fold(0.0, f64::max);
    assert_eq!(max_batch, snapshot.batch_size_max as f64);

    // The consumer: a group member reads the 600 records and commits once.
    let group = support::unique_topic("observed-group");
    let consumer_id = support::unique_topic("observed-consumer");
    let mut consumer = group_consumer(&cluster, &group, &topic, &consumer_id).await;
    let records = consume(&mut consumer, 600, Duration::from_secs(60)).await;
    consumer
        .commit(&next_offsets(&records, &topic, 3))
        .await
        .unwrap();
    let snapshot = consumer.metrics();
    let series = observed.of(&consumer_id);
    consumer.close().await.unwrap();
    for (name, kind, labels) in [
        (
            "kafka.consumer.records-consumed-total",
            "counter",
            &["group", "topic", "partition"][..],
        ),
        (
            "kafka.consumer.bytes-consumed-total",
            "counter",
            &["group", "topic", "partition"],
        ),
        (
            "kafka.consumer.records-lag",
            "gauge",
            &["group", "topic", "partition"],
        ),
        ("kafka.consumer.records-lag-max", "gauge", &["group"]),
        (
            "kafka.consumer.fetch-latency",
            "histogram",
            &["group", "broker"],
        ),
        ("kafka.consumer.commit-latency", "histogram", &["group"]),
        ("kafka.consumer.rebalance-total", "counter", &["group"]),
    ] {
        assert_series(&series, name, kind, labels);
    }
    let consumed = named(&series, "kafka.consumer.records-consumed-total");
    for (labels, value) in &consumed {
        let partition: i32 = labels["partition"].parse().unwrap();
        let in_partition = in_log.get(&partition).copied().unwrap_or(0);
        assert_eq!(value, &Seen::Counter(in_partition), "partition {partition}");
    }
    assert_eq!(counter_sum(&consumed), 600);
    assert_eq!(snapshot.records_consumed_total, 600);
    // One commit, one observation; one fetch-latency observation per answered fetch.
    assert_eq!(
        observations(&named(&series, "kafka.consumer.commit-latency")).len(),
        1
    );
    assert_eq!(snapshot.commit_total, 1);
    let fetches = observations(&named(&series, "kafka.consumer.fetch-latency"));
    assert!(fetches.len() as u64 >= snapshot.fetch_total && !fetches.is_empty());
    assert!(snapshot.rebalance_total >= 1);
    assert_eq!(
        counter_sum(&named(&series, "kafka.consumer.rebalance-total")),
        snapshot.rebalance_total
    );
    assert_eq!(
        cluster.group_offsets(&group, &topic),
        end_offsets(&cluster, &topic)
    );
}

/// Two producers built without a `client.id` get `exactly-producer-N` names of their own, so
/// their series stay apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_producers_publish_distinct_series() {
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("two-producers");
    cluster.create_topic(&topic, 1, 1, &[]);
    let first = producer(&cluster, &[]).await;
    let second = producer(&cluster, &[]).await;
    for (producer, count) in [(&first, 10u64), (&second, 25)] {
        let mut run = Run::default();
        let sent = Run::send_range(producer, &topic, 0, count, false).await;
        run.collect(sent, RESOLVE_LIMIT).await;
    }
    first.close().await.unwrap();
    second.close().await.unwrap();
    // Every series of this topic, by client id.
    let mut by_client = std::collections::BTreeMap::new();
    for ((name, labels), value) in observed.merged().iter() {
        if name == "kafka.producer.record-send-total" && labels.get("topic") == Some(&topic) {
            by_client.insert(labels["client_id"].clone(), value.clone());
        }
    }
    let counts: Vec<&Seen> = by_client.values().collect();
    assert_eq!(by_client.len(), 2, "{by_client:?}");
    assert!(
        by_client
            .keys()
            .all(|id| id.starts_with("exactly-producer-")),
        "{by_client:?}"
    );
    let mut counts: Vec<u64> = counts
        .into_iter()
        .map(|v| match v {
            Seen::Counter(n) => *n,
            other => panic!("{other:?}"),
        })
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![10, 25]);
    assert_eq!(
        cluster
            .read_topic(&topic, support::Isolation::ReadUncommitted)
            .len(),
        35
    );
}

/// A latency spike (a Toxiproxy latency toxic) shows in the request-latency histogram, and
/// the observations after it are back to normal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latency_spike_shows_in_the_histogram() {
    const SPIKE_MS: f64 = 400.0;
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("spike");
    cluster.create_topic(&topic, 1, 1, &[]);
    let client_id = support::unique_topic("spike-producer");
    let producer = producer(&cluster, &[("client.id", &client_id)]).await;
    let latencies = || {
        observations(&named(
            &observed.of(&client_id),
            "kafka.producer.request-latency",
        ))
    };
    // One record at a time, so each is one request.
    let send_one = |n: u64| {
        let producer = producer.clone();
        let topic = topic.clone();
        async move {
            producer
                .send(Record::to(&topic).value(value_of(n)))
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    for n in 0..5 {
        send_one(n).await;
    }
    let before = latencies();
    let proxy = cluster.proxy(0);
    proxy.add_toxic(
        "spike",
        "latency",
        "downstream",
        r#"{"latency":400,"jitter":0}"#,
    );
    for n in 5..10 {
        send_one(n).await;
    }
    proxy.remove_toxic("spike");
    let during = latencies();
    for n in 10..15 {
        send_one(n).await;
    }
    let after = latencies();
    producer.close().await.unwrap();
    assert!(
        before.len() >= 5 && before.iter().all(|&l| l < SPIKE_MS),
        "{before:?}"
    );
    let spiked = &during[before.len()..];
    assert_eq!(spiked.len(), 5, "one observation per request: {during:?}");
    assert!(spiked.iter().all(|&l| l >= SPIKE_MS), "{spiked:?}");
    let recovered = &after[during.len()..];
    assert_eq!(recovered.len(), 5, "{after:?}");
    assert!(recovered.iter().all(|&l| l < SPIKE_MS), "{recovered:?}");
    assert_eq!(
        cluster
            .read_topic(&topic, support::Isolation::ReadUncommitted)
            .len(),
        15
    );
}

/// A consumer that stops polling behind 10,000 records reports that lag (the topic's end
/// offset from Kafka's GetOffsetShell less the offset the group committed, within one batch),
/// and 0 once it caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_lag_follows_the_log_end() {
    const RECORDS: u64 = 10_000;
    const ONE_BATCH: i64 = 500;
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("lag");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = producer(&cluster, &[]).await;
    let mut run = Run::default();
    let sent = Run::send_range(&producer, &topic, 0, RECORDS, false).await;
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();
    let tp = TopicPartition::new(topic.as_str(), 0);
    let group = support::unique_topic("lag-group");
    let client_id = support::unique_topic("lag-consumer");
    let mut consumer = group_consumer(&cluster, &group, &topic, &client_id).await;

    // Join and take one poll's records, commit them, then stop polling: the background
    // fetch still answers, with the high watermark.
    let first = consume(&mut consumer, 1, Duration::from_secs(60)).await;
    let position = first.iter().map(|r| r.offset + 1).max().unwrap();
    consumer
        .commit(&[OffsetToCommit::new(tp.clone(), position)])
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let behind = loop {
        let m = consumer.metrics();
        if m.partitions.contains_key(&tp) {
            break m;
        }
        assert!(Instant::now() < deadline, "no lag reported: {m:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let committed = cluster.group_offsets(&group, &topic)[&0];
    let end = end_offsets(&cluster, &topic)[&0];
    assert_eq!(end, RECORDS as i64);
    let lag = behind.partitions[&tp].lag;
    assert!(
        (lag - (end - committed)).abs() <= ONE_BATCH,
        "lag {lag}; end {end}, committed {committed}"
    );
    assert!(lag >= RECORDS as i64 - ONE_BATCH, "{behind:?}");
    assert_eq!(behind.records_lag_max, lag);
    let series = observed.of(&client_id);
    let gauge = named(&series, "kafka.consumer.records-lag");
    assert_eq!(gauge.len(), 1, "{gauge:?}");
    assert_eq!(gauge[0].1, Seen::Gauge(lag as f64));

    // Catch up, commit, and wait for the next fetch answer.
    let rest = consume(
        &mut consumer,
        (RECORDS as usize) - first.len(),
        Duration::from_secs(120),
    )
    .await;
    let last = rest.iter().map(|r| r.offset + 1).max().unwrap();
    assert_eq!(last, end);
    consumer
        .commit(&[OffsetToCommit::new(tp.clone(), last)])
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Polling keeps the member in the group; nothing more arrives.
        let _ = consumer
            .poll_timeout(Duration::from_millis(300))
            .await
            .unwrap();
        let m = consumer.metrics();
        if m.partitions.get(&tp).map(|p| p.lag) == Some(0) {
            assert_eq!(m.records_lag_max, 0);
            break;
        }
        assert!(Instant::now() < deadline, "lag never reached 0: {m:?}");
    }
    let series = observed.of(&client_id);
    assert_eq!(
        named(&series, "kafka.consumer.records-lag")[0].1,
        Seen::Gauge(0.0)
    );
    assert_eq!(
        named(&series, "kafka.consumer.records-lag-max")[0].1,
        Seen::Gauge(0.0)
    );
    assert_eq!(
        cluster.group_offsets(&group, &topic)[&0],
        end_offsets(&cluster, &topic)[&0]
    );
    consumer.close().await.unwrap();
}

/// The copy loop's series: its counters as the loop counts them, one commit-latency
/// observation per committed transaction, and the source lag; the destination read back with
/// kcat under read_committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_loop_publishes_its_counters() {
    const RECORDS: u64 = 300;
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let source = support::unique_topic("copy-source");
    let destination = support::unique_topic("copy-destination");
    cluster.create_topic(&source, 1, 1, &[]);
    cluster.create_topic(&destination, 1, 1, &[]);
    let producer = producer(&cluster, &[]).await;
    let mut run = Run::default();
    let sent = Run::send_range(&producer, &source, 0, RECORDS, false).await;
    run.collect(sent, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();

    let group = support::unique_topic("copy-group");
    let client_id = support::unique_topic("copy-consumer");
    // 50 records a poll: the first transaction (100 records) commits with 200 still behind.
    let consumer = support::members::consumer_with(
        &cluster,
        &group,
        GroupProtocol::Consumer,
        OffsetReset::Earliest,
        IsolationLevel::ReadCommitted,
        &source,
        &[("client.id", &client_id), ("max.poll.records", "50")],
    )
    .await;
    let sink = support::transactional_producer_with(
        &cluster,
        &[("transactional.id", &support::unique_topic("copy-txn"))],
        &[],
    )
    .await;
    let to = destination.clone();
    let mut copier = exactly::eos::CopyLoop::new(consumer, sink, move |r: ConsumerRecord| {
        let mut record = Record::to(&to).partition(r.partition);
        if let Some(value) = r.value {
            record = record.value(value);
        }
        std::future::ready(vec![record])
    })
    .commit_every(100, Duration::from_millis(200));
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut first_lag = None;
    while copier.counters().records_in < RECORDS {
        assert!(Instant::now() < deadline, "{:?}", copier.counters());
        copier.step().await.unwrap();
        if first_lag.is_none() && copier.counters().transactions_committed == 1 {
            let series = observed.of(&client_id);
            first_lag = Some(named(&series, "exactly.copy_loop.source.lag")[0].1.clone());
        }
    }
    assert!(
        matches!(first_lag, Some(Seen::Gauge(lag)) if lag > 0.0 && lag < RECORDS as f64),
        "the first commit left records behind: {first_lag:?}"
    );
    let counters = copier.counters();
    copier.close().await.unwrap();

    let series = observed.of(&client_id);
    for (name, kind) in [
        ("exactly.copy_loop.transactions.committed", "counter"),
        ("exactly.copy_loop.transactions.aborted", "counter"),
        ("exactly.copy_loop.records.in", "counter"),
        ("exactly.copy_loop.records.out", "counter"),
        ("exactly.copy_loop.records.dead_lettered", "counter"),
        ("exactly.copy_loop.records.skipped", "counter"),
        ("exactly.copy_loop.commit.duration", "histogram"),
        ("exactly.copy_loop.source.lag", "gauge"),
    ] {
        assert_series(&series, name, kind, &["group"]);
    }
    let total = |name| counter_sum(&named(&series, name));
    assert_eq!(total("exactly.copy_loop.records.in"), RECORDS);
    assert_eq!(total("exactly.copy_loop.records.out"), RECORDS);
    assert_eq!(
        (counters.records_in, counters.records_out),
        (RECORDS, RECORDS)
    );
    let committed = total("exactly.copy_loop.transactions.committed");
    assert_eq!(committed, counters.transactions_committed);
    assert_eq!(
        total("exactly.copy_loop.transactions.aborted"),
        counters.transactions_aborted
    );
    assert_eq!(
        observations(&named(&series, "exactly.copy_loop.commit.duration")).len() as u64,
        committed,
        "one observation per committed transaction"
    );
    // The conventions' processing time: one observation per poll the loop copied, in
    // seconds, at least one per committed transaction.
    let processing = observed.semconv(&client_id);
    let process = named(&processing, "messaging.process.duration");
    assert!(process.iter().all(|(labels, _)| {
        labels["messaging.operation.type"] == "process"
            && labels.contains_key("messaging.consumer.group.name")
    }));
    let seconds = observations(&process);
    assert!(seconds.len() as u64 >= committed, "{seconds:?}");
    assert!(
        seconds.iter().all(|s| (0.0..60.0).contains(s)),
        "{seconds:?}"
    );
    assert_eq!(
        observed.unit("messaging.process.duration"),
        Some(metrics::Unit::Seconds)
    );
    assert_eq!(
        named(&series, "exactly.copy_loop.source.lag")[0].1,
        Seen::Gauge(0.0),
        "the last commit took the loop to the source's end"
    );
    assert_eq!(
        cluster
            .read_topic(&destination, support::Isolation::ReadCommitted)
            .len() as u64,
        RECORDS
    );
    assert_eq!(
        cluster.group_offsets(&group, &source)[&0],
        end_offsets(&cluster, &source)[&0]
    );
}

/// `error.type` values a failed send may carry: Kafka error code names and the crate's own
/// lower-case names ([`exactly::Error::type_name`]), never the error's text.
fn is_bounded_error_type(value: &str) -> bool {
    let upper = value.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    let lower = value.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    !value.is_empty() && value.len() <= 64 && (upper || lower)
}

/// The OpenTelemetry messaging conventions' metrics: names, units and attributes as the
/// conventions give them; sent messages counted once each, acknowledged ones against kcat and
/// failed ones (answers dropped, then the proxy cut past the delivery timeout) under a bounded
/// `error.type`; consumed messages, poll and commit durations under the group; no label
/// holding free text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semconv_metric_names_and_units() {
    let observed = observed();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("semconv");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer_id = support::unique_topic("semconv-producer");
    let producer = producer(&cluster, &[("client.id", &producer_id)]).await;
    let mut run = Run::default();
    let before = Run::send_range(&producer, &topic, 0, 300, false).await;
    run.collect(before, RESOLVE_LIMIT).await;
    let proxy = cut_sends(&cluster, &producer, &topic, &mut run).await;
    proxy.set_enabled(true);
    let after = Run::send_range(&producer, &topic, 500, 800, false).await;
    run.collect(after, RESOLVE_LIMIT).await;
    producer.flush().await.unwrap();
    producer.close().await.unwrap();
    let (acked, failed, indeterminate) = run.tally();
    assert!(failed + indeterminate > 0, "the cut failed some records");

    let sent = "messaging.client.sent.messages";
    let duration = "messaging.client.operation.duration";
    let series = observed.semconv(&producer_id);
    let sends = named(&series, sent);
    let (ok, failures): (Vec<_>, Vec<_>) = sends
        .into_iter()
        .partition(|(labels, _)| !labels.contains_key("error.type"));
    let destination = [
        "messaging.destination.name",
        "messaging.destination.partition.id",
        "messaging.operation.name",
        "messaging.operation.type",
        "messaging.system",
    ];
    for (labels, _) in &ok {
        assert_eq!(label_names(labels), destination, "{labels:?}");
        assert_eq!(labels["messaging.system"], "kafka");
        assert_eq!(labels["messaging.operation.name"], "send");
        assert_eq!(labels["messaging.operation.type"], "send");
        assert_eq!(labels["messaging.destination.name"], topic);
    }
    assert_eq!(counter_sum(&ok), acked as u64);
    // Every acknowledged record is in the log, partition by partition (kcat).
    let in_log = records_per_partition(&cluster, &topic);
    for (labels, value) in &ok {
        let partition: i32 = labels["messaging.destination.partition.id"]
            .parse()
            .unwrap();
        let Seen::Counter(n) = value else {
            panic!("{sent} is a counter: {value:?}")
        };
        assert!(
            *n <= in_log.get(&partition).copied().unwrap_or(0),
            "{labels:?}"
        );
    }
    assert_eq!(counter_sum(&failures), (failed + indeterminate) as u64);
    for (labels, _) in &failures {
        let error = &labels["error.type"];
        assert!(is_bounded_error_type(error), "error.type {error:?}");
    }
    let send_durations = named(&series, duration);
    assert!(!send_durations.is_empty(), "{:?}", series.keys());
    for (labels, _) in &send_durations {
        assert_eq!(labels["messaging.operation.name"], "send");
        assert_eq!(labels["server.address"], "127.0.0.1");
        assert!(labels["server.port"].parse::<u16>().is_ok(), "{labels:?}");
    }
    let seconds = observations(&send_durations);
    assert!(
        seconds.iter().all(|s| (0.0..60.0).contains(s)),
        "{seconds:?}"
    );

    // The consumer: consumed messages and poll and commit durations, with the group.
    let group = support::unique_topic("semconv-group");
    let consumer_id = support::unique_topic("semconv-consumer");
    let mut consumer = group_consumer(&cluster, &group, &topic, &consumer_id).await;
    let in_log_total = in_log.values().sum::<u64>() as usize;
    let records = consume(&mut consumer, in_log_total, Duration::from_secs(60)).await;
    // The application's processing of ten records through `process`, each at least 2 ms.
    let mut processed = 0;
    for record in records.iter().take(10) {
        processed += consumer
            .process(record, async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                1
            })
            .await;
    }
    assert_eq!(processed, 10, "process returns what the work returned");
    consumer
        .commit(&next_offsets(&records, &topic, 3))
        .await
        .unwrap();
    consumer.close().await.unwrap();
    let series = observed.semconv(&consumer_id);
    let process = named(&series, "messaging.process.duration");
    for (labels, _) in &process {
        assert_eq!(labels["messaging.operation.name"], "process");
        assert_eq!(labels["messaging.operation.type"], "process");
        assert_eq!(labels["messaging.consumer.group.name"], group);
    }
    let process_seconds = observations(&process);
    assert_eq!(
        process_seconds.len(),
        10,
        "one observation per processed record"
    );
    assert!(
        process_seconds.iter().all(|s| (0.002..60.0).contains(s)),
        "{process_seconds:?}"
    );
    let consumed = named(&series, "messaging.client.consumed.messages");
    assert_eq!(counter_sum(&consumed), records.len() as u64);
    for (labels, _) in &consumed {
        assert_eq!(labels["messaging.consumer.group.name"], group);
        assert_eq!(labels["messaging.operation.name"], "poll");
        assert_eq!(labels["messaging.operation.type"], "receive");
        assert_eq!(labels["messaging.destination.name"], topic);
    }
    let durations = named(&series, duration);
    let of = |operation: &str| -> Vec<_> {
        durations
            .iter()
            .filter(|(labels, _)| labels["messaging.operation.name"] == operation)
            .cloned()
            .collect()
    };
    let polls = of("poll");
    assert!(!polls.is_empty(), "{durations:?}");
    assert!(polls.iter().all(|(l, _)| l.contains_key("server.address")));
    let commits = of("commit");
    assert!(!commits.is_empty(), "{durations:?}");
    assert!(
        commits
            .iter()
            .all(|(l, _)| l["messaging.operation.type"] == "settle")
    );
    for (labels, _) in &durations {
        assert_eq!(labels["messaging.consumer.group.name"], group);
    }
    let seconds = observations(&durations);
    assert!(
        seconds.iter().all(|s| (0.0..60.0).contains(s)),
        "{seconds:?}"
    );

    // The units the conventions give: counts of messages, durations in seconds.
    assert_eq!(observed.unit(sent), Some(metrics::Unit::Count));
    assert_eq!(
        observed.unit("messaging.client.consumed.messages"),
        Some(metrics::Unit::Count)
    );
    assert_eq!(observed.unit(duration), Some(metrics::Unit::Seconds));

    // No label holds free text: every value of both clients' convention series is a name,
    // a number or an address.
    let everything = observed
        .semconv(&producer_id)
        .into_iter()
        .chain(observed.semconv(&consumer_id));
    for ((name, labels), _) in everything {
        for (key, value) in labels {
            assert!(
                !value.is_empty()
                    && value.len() <= 255
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b)),
                "{name}: {key}={value:?} is free text"
            );
        }
    }
}
