//! The clients' spans against real Kafka: names and attributes as the OpenTelemetry messaging
//! semantic conventions (v1.37.0) for Kafka give them, seen by a recording `tracing` layer;
//! and, with feature `opentelemetry`, W3C trace context carried in record headers from a
//! producer's span to the consumer's `process` span (the `traceparent` header read back by
//! kcat, the independent reader), a header the application set itself left alone.
//!
//! One global subscriber for the whole binary (the clients' background tasks are spawned, so a
//! per-future subscriber would miss their spans); each test looks only at the spans of its own
//! topic.

// Tests hold their cluster's lock across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use exactly::{ConsumerEvent, ConsumerRecord, OffsetReset, Record};
use support::Cluster;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as SpanValues};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The longest a test waits for a record, a poll or a span.
const WAIT: Duration = Duration::from_secs(30);

/// One closed span: its name and its fields (as text: strings raw, others Debug).
#[derive(Debug, Clone)]
struct SpanSeen {
    name: &'static str,
    fields: BTreeMap<String, String>,
    /// The names of the spans it links to (`follows_from`).
    follows: Vec<&'static str>,
}

impl SpanSeen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

impl Visit for SpanSeen {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields
            .insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Records the crate's spans: their fields as created and recorded later, kept when they
/// close.
#[derive(Clone, Default)]
struct Spans {
    open: Arc<Mutex<BTreeMap<u64, SpanSeen>>>,
    closed: Arc<Mutex<Vec<SpanSeen>>>,
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if !attrs.metadata().target().starts_with("exactly") {
            return;
        }
        let mut seen = SpanSeen {
            name: attrs.metadata().name(),
            fields: BTreeMap::new(),
            follows: Vec::new(),
        };
        attrs.record(&mut seen);
        lock(&self.open).insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, _: Context<'_, S>) {
        if let Some(seen) = lock(&self.open).get_mut(&id.into_u64()) {
            values.record(seen);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _: Context<'_, S>) {
        let mut open = lock(&self.open);
        let Some(name) = open.get(&follows.into_u64()).map(|s| s.name) else {
            return;
        };
        if let Some(seen) = open.get_mut(&id.into_u64()) {
            seen.follows.push(name);
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(seen) = lock(&self.open).remove(&id.into_u64()) {
            lock(&self.closed).push(seen);
        }
    }
}

impl Spans {
    /// Waits (bounded) for a closed span named `name` whose `messaging.destination.name` is
    /// `topic` and that satisfies `also`.
    async fn closed(&self, name: &str, topic: &str, also: impl Fn(&SpanSeen) -> bool) -> SpanSeen {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = lock(&self.closed)
                .iter()
                .find(|s| {
                    s.name == name
                        && s.field("messaging.destination.name") == Some(topic)
                        && also(s)
                })
                .cloned();
            if let Some(found) = found {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no closed {name:?} span of {topic}; closed: {:?}",
                lock(&self.closed)
                    .iter()
                    .filter(|s| s.field("messaging.destination.name") == Some(topic))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The SDK's in-memory exporter behind the binary's tracer provider: the spans as an OTLP
/// backend would receive them (names, kinds, attributes, links).
#[cfg(feature = "opentelemetry")]
fn exported() -> &'static opentelemetry_sdk::trace::InMemorySpanExporter {
    static EXPORTED: OnceLock<opentelemetry_sdk::trace::InMemorySpanExporter> = OnceLock::new();
    EXPORTED.get_or_init(opentelemetry_sdk::trace::InMemorySpanExporter::default)
}

/// The binary's subscriber: the recording layer, and with feature `opentelemetry` the
/// OpenTelemetry bridge over an SDK tracer provider (real ids, every span sampled) exporting
/// to [`exported`]. No filter: every level is on, TRACE included (the producer's `create`
/// spans).
fn spans() -> &'static Spans {
    static SPANS: OnceLock<Spans> = OnceLock::new();
    SPANS.get_or_init(|| {
        let spans = Spans::default();
        let registry = tracing_subscriber::registry().with(spans.clone());
        #[cfg(feature = "opentelemetry")]
        let registry = {
            use opentelemetry::trace::TracerProvider as _;
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_simple_exporter(exported().clone())
                .build();
            registry.with(tracing_opentelemetry::layer().with_tracer(provider.tracer("tests")))
        };
        tracing::subscriber::set_global_default(registry).expect("the only global subscriber");
        spans
    })
}

/// Polls `consumer` until it handed out `count` records (bounded by [`WAIT`]).
async fn poll_records(consumer: &mut exactly::Consumer, count: usize) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + WAIT;
    let mut records = Vec::new();
    while records.len() < count {
        assert!(
            Instant::now() < deadline,
            "only {} records of {count}",
            records.len()
        );
        if let Some(ConsumerEvent::Records(r)) = consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            records.extend(r);
        }
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_carry_the_messaging_conventions() {
    let spans = spans();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("spans");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = exactly::Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .client_id("spans-producer")
        // Both records in one batch, whatever the machine's load.
        .linger(Duration::from_millis(200))
        .build()
        .await
        .expect("producer builds");
    let sent = producer
        .send(Record::to(&topic).key("k").value("v"))
        .await
        .expect("send");
    let tombstone = producer
        .send(Record::to(&topic).key("k"))
        .await
        .expect("send");
    assert_eq!(sent.await.expect("delivered").offset, 0);
    assert_eq!(tombstone.await.expect("delivered").offset, 1);

    let create = spans.closed("create", &topic, |_| true).await;
    let expect = |span: &SpanSeen, pairs: &[(&str, &str)]| {
        for (name, value) in pairs {
            assert_eq!(span.field(name), Some(*value), "{name} of {span:?}");
        }
    };
    let create_name = format!("create {topic}");
    expect(
        &create,
        &[
            ("otel.name", &create_name),
            ("otel.kind", "producer"),
            ("messaging.system", "kafka"),
            ("messaging.operation.type", "create"),
            ("messaging.operation.name", "create"),
            ("messaging.destination.partition.id", "0"),
            ("messaging.client.id", "spans-producer"),
        ],
    );
    let tombstone_span = spans
        .closed("create", &topic, |s| {
            s.field("messaging.kafka.message.tombstone").is_some()
        })
        .await;
    // Each record's span ends with its delivery, and carries its offset.
    expect(
        &tombstone_span,
        &[
            ("messaging.kafka.message.tombstone", "true"),
            ("messaging.kafka.offset", "1"),
        ],
    );
    expect(&create, &[("messaging.kafka.offset", "0")]);
    let batch = spans
        .closed("kafka.batch", &topic, |s| {
            s.field("messaging.kafka.offset").is_some()
        })
        .await;
    expect(
        &batch,
        &[
            ("otel.kind", "internal"),
            ("messaging.destination.partition.id", "0"),
            ("messaging.kafka.offset", "0"),
        ],
    );
    // The batch links to its records' create spans and to the request (`send`) that
    // carried it.
    assert!(batch.follows.contains(&"create"), "{batch:?}");
    assert!(batch.follows.contains(&"send"), "{batch:?}");
    assert_eq!(
        batch.field("messaging.batch.message_count"),
        Some("2"),
        "{batch:?}"
    );
    // The names the conventions deprecated are gone.
    for old in [
        "messaging.kafka.destination.partition",
        "messaging.kafka.message.offset",
    ] {
        assert!(
            create.field(old).is_none() && batch.field(old).is_none(),
            "{old} still set"
        );
    }

    let group = support::unique_topic("spans-group");
    let mut consumer = support::members::test_builder(&cluster)
        .group_id(&group)
        .client_id("spans-consumer")
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .expect("consumer builds");
    consumer.subscribe([topic.clone()]).expect("subscribe");
    let records = poll_records(&mut consumer, 2).await;
    for record in &records {
        let _processing = consumer.process_span(record).entered();
    }
    let poll = spans.closed("poll", &topic, |_| true).await;
    expect(
        &poll,
        &[
            ("otel.kind", "client"),
            ("messaging.operation.type", "receive"),
            ("messaging.operation.name", "poll"),
            ("messaging.consumer.group.name", &group),
            ("messaging.client.id", "spans-consumer"),
        ],
    );
    assert!(
        poll.field("messaging.batch.message_count").is_some(),
        "{poll:?}"
    );
    let process_name = format!("process {topic}");
    for (offset, tombstone) in [("0", None), ("1", Some("true"))] {
        let process = spans
            .closed("process", &topic, |s| {
                s.field("messaging.kafka.offset") == Some(offset)
            })
            .await;
        expect(
            &process,
            &[
                ("otel.name", &process_name),
                ("otel.kind", "consumer"),
                ("messaging.operation.type", "process"),
                ("messaging.destination.partition.id", "0"),
                ("messaging.consumer.group.name", &group),
                ("messaging.client.id", "spans-consumer"),
            ],
        );
        assert_eq!(
            process.field("messaging.kafka.message.tombstone"),
            tombstone
        );
    }
    consumer.close().await.expect("close");
    producer.close().await.expect("close");
}

/// A producer that writes its spans' context into the records it sends.
#[cfg(feature = "opentelemetry")]
async fn propagating_producer(cluster: &Cluster) -> exactly::Producer {
    exactly::Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .propagate_trace_context(true)
        .build()
        .await
        .expect("producer builds")
}

/// A consumer assigned `topic`-0 from its start, parenting process spans on the records'
/// context.
#[cfg(feature = "opentelemetry")]
async fn propagating_reader(cluster: &Cluster, topic: &str) -> exactly::Consumer {
    let mut consumer = support::members::test_builder(cluster)
        .propagate_trace_context(true)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .expect("consumer builds");
    consumer
        .assign(&[exactly::TopicPartition::new(topic, 0)])
        .expect("assign");
    consumer
}

#[cfg(feature = "opentelemetry")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_context_travels_in_the_record_headers() {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let trace_of = |span: &tracing::Span| span.context().span().span_context().trace_id();
    spans();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("propagation");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = propagating_producer(&cluster).await;
    let request = tracing::info_span!("handle_request");
    let trace_id = trace_of(&request);
    assert_ne!(trace_id, opentelemetry::trace::TraceId::INVALID);
    let mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let deliveries = async {
        let propagated = producer.send(Record::to(&topic).value("traced")).await;
        let own = producer
            .send(Record::to(&topic).value("own").header("traceparent", mine))
            .await;
        (propagated, own)
    }
    .instrument(request.clone())
    .await;
    let (propagated, own) = (deliveries.0.expect("send"), deliveries.1.expect("send"));
    assert_eq!(propagated.await.expect("delivered").offset, 0);
    assert_eq!(own.await.expect("delivered").offset, 1);

    // kcat sees one traceparent per record: ours in the trace of the request, carrying the
    // send span's id (not the request's); the application's own one untouched.
    let headers = support::kcat_headers(&cluster.bootstrap, &topic, 0);
    let traceparents = |offset: i64| -> Vec<String> {
        headers
            .iter()
            .filter(|(o, _)| *o == offset)
            .flat_map(|(_, h)| {
                h.iter()
                    .filter(|(k, _)| k == "traceparent")
                    .map(|(_, v)| v.clone())
            })
            .collect()
    };
    let ours = traceparents(0);
    assert_eq!(ours.len(), 1, "record 0's headers: {headers:?}");
    let parts: Vec<&str> = ours[0].split('-').collect();
    assert_eq!(parts.len(), 4, "{ours:?}");
    assert_eq!(parts[0], "00");
    assert_eq!(parts[1], format!("{trace_id:032x}"));
    let request_span_id = request.context().span().span_context().span_id();
    assert_ne!(
        parts[2],
        format!("{request_span_id:016x}"),
        "the send span's id, not the caller's"
    );
    assert_eq!(parts[3], "01", "sampled");
    assert_eq!(traceparents(1), vec![mine.to_owned()]);

    // The consumer, propagation on, parents each record's process span on its header's
    // context: the same trace as the producer's request.
    let mut consumer = propagating_reader(&cluster, &topic).await;
    let records = poll_records(&mut consumer, 2).await;
    assert_eq!(trace_of(&consumer.process_span(&records[0])), trace_id);
    assert_eq!(
        format!("{:032x}", trace_of(&consumer.process_span(&records[1]))),
        "0af7651916cd43dd8448eb211c80319c"
    );
    consumer.close().await.expect("close");

    // Propagation off: the header is only data, the span hangs under the current one.
    let mut plain = support::members::test_builder(&cluster)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .expect("consumer builds");
    plain
        .assign(&[exactly::TopicPartition::new(topic.as_str(), 0)])
        .expect("assign");
    let records = poll_records(&mut plain, 2).await;
    let elsewhere = tracing::info_span!("elsewhere");
    let process = elsewhere.in_scope(|| plain.process_span(&records[0]));
    assert_eq!(trace_of(&process), trace_of(&elsewhere));
    assert_ne!(trace_of(&process), trace_id);
    plain.close().await.expect("close");
    producer.close().await.expect("close");
}

/// The application's global propagator carries what it carries: with W3C trace context and
/// baggage installed, the baggage of the context a record was sent in reaches the consumer's
/// `process` span through a `baggage` header kcat reads, in the same trace.
#[cfg(feature = "opentelemetry")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baggage_crosses_produce_consume() {
    use opentelemetry::KeyValue;
    use opentelemetry::baggage::BaggageExt as _;
    use opentelemetry::propagation::TextMapCompositePropagator;
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    spans();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    // Writes the same traceparent the built-in W3C path does, so the binary's other
    // propagation test holds whichever it runs under.
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    let topic = support::unique_topic("baggage");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = propagating_producer(&cluster).await;
    // A root span takes the current OpenTelemetry context, baggage and all.
    let request = {
        let _attached =
            opentelemetry::Context::current_with_baggage(vec![KeyValue::new("tenant", "acme")])
                .attach();
        tracing::info_span!("handle_request")
    };
    let trace_id = request.context().span().span_context().trace_id();
    let delivery = producer
        .send(Record::to(&topic).value("with baggage"))
        .instrument(request.clone())
        .await
        .expect("send");
    assert_eq!(delivery.await.expect("delivered").offset, 0);

    let headers = support::kcat_headers(&cluster.bootstrap, &topic, 0);
    let baggage: Vec<&str> = headers
        .iter()
        .flat_map(|(_, h)| h.iter().filter(|(k, _)| k == "baggage"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(baggage, vec!["tenant=acme"], "kcat's headers: {headers:?}");

    let mut consumer = propagating_reader(&cluster, &topic).await;
    let records = poll_records(&mut consumer, 1).await;
    let process = consumer.process_span(&records[0]);
    let context = process.context();
    assert_eq!(context.span().span_context().trace_id(), trace_id);
    assert_eq!(
        context.baggage().get("tenant").map(|v| v.to_string()),
        Some("acme".to_owned())
    );
    consumer.close().await.expect("close");
    producer.close().await.expect("close");
}

/// The OpenTelemetry conventions' batching model, as the SDK exports it: a `create {topic}`
/// producer span per record carrying its offset once delivered; one `send` client span per
/// Produce request linking to the `create` spans of the records it carried, with the
/// broker's `server.address` / `server.port`; on the consumer a `poll` (receive) span per
/// poll, a `process {topic}` consumer span per record and a `commit` (settle) span per
/// commit.
#[cfg(feature = "opentelemetry")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_follow_the_batching_model() {
    use opentelemetry::trace::SpanKind;
    use opentelemetry_sdk::trace::SpanData;

    spans();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("batching");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = exactly::Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .client_id("batching-producer")
        // The three records in one batch, whatever the machine's load.
        .linger(Duration::from_millis(200))
        .build()
        .await
        .expect("producer builds");
    let mut acks = Vec::new();
    for n in 0..3 {
        let record = Record::to(&topic).value(format!("v{n}"));
        acks.push(producer.send(record).await.expect("send"));
    }
    for (n, ack) in acks.into_iter().enumerate() {
        assert_eq!(ack.await.expect("delivered").offset, n as i64);
    }
    producer.close().await.expect("close");

    let group = support::unique_topic("batching-group");
    let mut consumer = support::members::test_builder(&cluster)
        .group_id(&group)
        .client_id("batching-consumer")
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .expect("consumer builds");
    consumer.subscribe([topic.clone()]).expect("subscribe");
    let records = poll_records(&mut consumer, 3).await;
    for record in &records {
        let _processing = consumer.process_span(record).entered();
    }
    let next = exactly::OffsetToCommit::new(exactly::TopicPartition::new(topic.as_str(), 0), 3);
    consumer.commit(&[next]).await.expect("commit");
    consumer.close().await.expect("close");

    let attribute = |span: &SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    let of_topic = |span: &SpanData| {
        attribute(span, "messaging.destination.name").as_deref() == Some(topic.as_str())
    };
    // Bounded: the simple exporter exports a span when it ends, and the last ones end as the
    // clients close.
    let deadline = Instant::now() + WAIT;
    let exported = loop {
        let all = exported()
            .get_finished_spans()
            .expect("the exporter's spans");
        let done = all.iter().any(|s| s.name == "commit" && of_topic(s));
        if done || Instant::now() >= deadline {
            break all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let creates: Vec<&SpanData> = exported
        .iter()
        .filter(|s| s.name == format!("create {topic}").as_str())
        .collect();
    assert_eq!(
        creates.len(),
        3,
        "{:?}",
        exported.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let mut offsets = Vec::new();
    for create in &creates {
        assert_eq!(create.span_kind, SpanKind::Producer, "{create:?}");
        assert_eq!(
            attribute(create, "messaging.operation.type").as_deref(),
            Some("create")
        );
        assert_eq!(
            attribute(create, "messaging.client.id").as_deref(),
            Some("batching-producer")
        );
        offsets.push(attribute(create, "messaging.kafka.offset").expect("the record's offset"));
    }
    offsets.sort();
    assert_eq!(offsets, ["0", "1", "2"]);

    // The Produce request that carried them links to each of their create spans.
    let create_ids: Vec<_> = creates.iter().map(|s| s.span_context.span_id()).collect();
    let sends: Vec<&SpanData> = exported
        .iter()
        .filter(|s| {
            s.name == "send"
                && s.links
                    .iter()
                    .any(|l| create_ids.contains(&l.span_context.span_id()))
        })
        .collect();
    assert!(!sends.is_empty(), "no send span links to the records");
    let linked: std::collections::HashSet<_> = sends
        .iter()
        .flat_map(|s| s.links.iter().map(|l| l.span_context.span_id()))
        .filter(|id| create_ids.contains(id))
        .collect();
    assert_eq!(
        linked.len(),
        3,
        "every record's create span is linked from a send"
    );
    for send in &sends {
        assert_eq!(send.span_kind, SpanKind::Client, "{send:?}");
        assert_eq!(
            attribute(send, "messaging.operation.type").as_deref(),
            Some("send")
        );
        assert_eq!(
            attribute(send, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        let port = attribute(send, "server.port").expect("server.port");
        assert!(port.parse::<u16>().is_ok(), "server.port {port}");
        assert!(attribute(send, "exactly.broker_id").is_some(), "{send:?}");
    }

    // The consumer side: receive, process, settle.
    let find = |name: &str| -> Vec<&SpanData> {
        exported
            .iter()
            .filter(|s| s.name == name && of_topic(s))
            .collect()
    };
    let polls = find("poll");
    assert!(!polls.is_empty(), "no poll span of {topic}");
    for poll in &polls {
        assert_eq!(poll.span_kind, SpanKind::Client);
        assert_eq!(
            attribute(poll, "messaging.operation.type").as_deref(),
            Some("receive")
        );
        assert_eq!(
            attribute(poll, "messaging.consumer.group.name"),
            Some(group.clone())
        );
    }
    let processes = find(&format!("process {topic}"));
    assert_eq!(processes.len(), 3);
    for process in &processes {
        assert_eq!(process.span_kind, SpanKind::Consumer);
        assert_eq!(
            attribute(process, "messaging.operation.type").as_deref(),
            Some("process")
        );
        assert!(attribute(process, "messaging.kafka.offset").is_some());
    }
    let commits = find("commit");
    assert_eq!(commits.len(), 1, "one commit span");
    let commit = commits[0];
    assert_eq!(commit.span_kind, SpanKind::Client);
    assert_eq!(
        attribute(commit, "messaging.operation.type").as_deref(),
        Some("settle")
    );
    assert_eq!(
        attribute(commit, "messaging.operation.name").as_deref(),
        Some("commit")
    );
    assert_eq!(
        attribute(commit, "messaging.consumer.group.name"),
        Some(group)
    );
    assert_eq!(attribute(commit, "error.type"), None);
    // It talked to the group coordinator, named like the send spans' broker.
    assert_eq!(
        attribute(commit, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    let port = attribute(commit, "server.port").expect("the coordinator's server.port");
    assert!(port.parse::<u16>().is_ok(), "server.port {port}");
}
