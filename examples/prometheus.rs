//! The client's metrics scraped by Prometheus: `metrics-exporter-prometheus` installed as the
//! `metrics` facade's recorder before the clients are built (handles bind to the recorder
//! present when they are made), then a producer sends and a consumer reads back, and the
//! exposition text is served on `127.0.0.1:9464/metrics` for a bounded time.
//!
//! Prometheus' recommended naming (`_total` on counters, `_seconds` on durations) and the
//! OpenTelemetry conventions' duration buckets make the `messaging_*` series the ones an
//! OpenTelemetry Collector's Prometheus exporter writes for a Java service's instrumentation
//! (`messaging_client_operation_duration_seconds_bucket`, `messaging_client_sent_messages_total`).
//!
//! ```sh
//! cargo run --example prometheus -- 127.0.0.1:19090 my-topic
//! curl -s 127.0.0.1:9464/metrics | grep -E '^(messaging|kafka|exactly)_'
//! ```

use std::time::{Duration, Instant};

use exactly::{ConsumerEvent, OffsetReset, Producer, Record};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long the endpoint answers scrapes before the example exits.
const SERVE_FOR: Duration = Duration::from_secs(30);
/// Bucket bounds for the Java-named latency (ms) and size (bytes) histograms.
const BUCKETS: &[f64] = &[
    1.0,
    2.0,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    5_000.0,
    16_384.0,
    65_536.0,
    1_048_576.0,
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:19090".into());
    let topic = args.next().unwrap_or_else(|| "prometheus-example".into());

    // The exporter, first: every client built after this publishes to it.
    let prometheus = PrometheusBuilder::new()
        .with_recommended_naming(true)
        .set_buckets(BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Prefix("messaging.".into()),
            &exactly::DURATION_BUCKETS_SECONDS,
        )?
        .install_recorder()?;

    let producer = Producer::builder().bootstrap(&bootstrap).build().await?;
    let mut deliveries = Vec::new();
    for n in 0..1_000 {
        deliveries.push(
            producer
                .send(Record::to(&topic).value(format!("record {n}")))
                .await?,
        );
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close().await?;

    let mut consumer = exactly::Consumer::builder()
        .bootstrap(&bootstrap)
        .group_id("prometheus-example")
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await?;
    consumer.subscribe([topic.as_str()])?;
    let reading = Instant::now() + Duration::from_secs(10);
    while Instant::now() < reading {
        if let Some(ConsumerEvent::Records(records)) =
            consumer.poll_timeout(Duration::from_millis(500)).await?
        {
            println!("read {} records", records.len());
        }
    }

    // A minimal scrape endpoint (an application would mount `render()` on its own server).
    let listener = TcpListener::bind("127.0.0.1:9464").await?;
    println!("serving http://127.0.0.1:9464/metrics for {SERVE_FOR:?}");
    let until = tokio::time::Instant::now() + SERVE_FOR;
    while let Ok(accepted) = tokio::time::timeout_at(until, listener.accept()).await {
        let (mut socket, _) = accepted?;
        let mut request = [0u8; 1024];
        let _ = socket.read(&mut request).await?;
        let body = prometheus.render();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(body.as_bytes()).await?;
    }
    consumer.close().await?;
    Ok(())
}
