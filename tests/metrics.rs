//! `Producer::metrics` against real Kafka: the figures agree with what kcat reads back after a
//! run with a proxy cut (they move only on confirmed outcomes, P8), and a broker's quota
//! throttling (KIP-219) is honoured and counted.
//!
//! Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use exactly::{ConnectionState, Producer, Record};
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

    // Answers lost, then the proxy cut past the delivery timeout: some records fail.
    let proxy = cluster.proxy(0);
    proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
    let lost = Run::send_range(&producer, &topic, 300, 400, false).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_enabled(false);
    proxy.remove_toxic("drop_answers");
    let cut = Run::send_range(&producer, &topic, 400, 500, false).await;
    run.collect(lost, RESOLVE_LIMIT).await;
    run.collect(cut, RESOLVE_LIMIT).await;
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
    let send = named("send");
    assert_eq!(send.len(), 1, "{spans:?}");
    assert_eq!(send[0]["messaging.system"], "\"kafka\"");
    assert_eq!(send[0]["messaging.destination.name"], topic);
    let batch = named("kafka.batch");
    assert_eq!(batch.len(), 1, "{spans:?}");
    assert_eq!(batch[0]["messaging.destination.partition.id"], "0");
    assert_eq!(batch[0]["messaging.kafka.offset"], meta.offset.to_string());
    assert_eq!(batch[0]["messaging.kafka.base_sequence"], "0");
    assert!(batch[0].contains_key("messaging.kafka.producer_id"));
    assert!(!named("kafka.produce_request").is_empty());
}
