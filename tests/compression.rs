//! Compression against real Kafka: what we compress, Kafka's own readers (the Java
//! console consumer and kcat/librdkafka) read back exactly once and in order, through a proxy
//! cut; what the Java producer compresses, our decoder reads; a compressed batch larger than
//! the topic allows is split; transactions work with compressed batches on both transaction
//! versions.
//!
//! Tests that cut traffic hold their cluster's lock across awaits on purpose (see
//! `broker_failure.rs`); reading back happens after the lock is released, Java and kcat in
//! parallel, so the four codecs' tests overlap as much as they can.
#![allow(clippy::await_holding_lock)]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use exactly::__private::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use exactly::__private::protocol::record_batch::{Codec, DecodedBatch, decode_batches};
use exactly::{DeliveryFuture, Producer, Record};
use support::raw::RawConnection;
use support::{Cluster, Isolation};

/// Generous bound for any one delivery future (delivery timeout plus slack).
const RESOLVE_LIMIT: Duration = Duration::from_secs(90);

/// Records per codec in the read-back tests.
const RECORDS: usize = 50_000;

/// Within this test binary, a test that cuts the broker excludes every other test for the
/// duration of the cut, from before it looks for the cluster (`Cluster::single` fails while a
/// cut is on) to the end of the cut; everything else (producing without faults, reading back)
/// runs side by side.
static CUTS: RwLock<()> = RwLock::new(());

fn cutting() -> RwLockWriteGuard<'static, ()> {
    CUTS.write().unwrap_or_else(|e| e.into_inner())
}

fn not_cutting() -> RwLockReadGuard<'static, ()> {
    CUTS.read().unwrap_or_else(|e| e.into_inner())
}

/// The key, value and headers of record `i`: JSON-like values that compress as real payloads
/// do (not a run of one byte), keys from a small set, two headers.
fn record_parts(i: usize, codec: &str) -> (String, String, [(&'static str, String); 2]) {
    let key = format!("user-{}", i % 1000);
    let value = format!(
        r#"{{"seq":{i},"user":"user-{}","event":"{}","path":"/catalog/{}/item/{}","amount":{}.{:02},"ok":{}}}"#,
        i % 1000,
        ["view", "click", "add_to_cart", "purchase"][i % 4],
        i % 37,
        i % 9973,
        i % 500,
        i % 100,
        !i.is_multiple_of(3)
    );
    (
        key,
        value,
        [("seq", i.to_string()), ("codec", codec.to_owned())],
    )
}

fn record(topic: &str, i: usize, codec: &str) -> Record {
    let (key, value, headers) = record_parts(i, codec);
    headers
        .into_iter()
        .fold(Record::to(topic).key(key).value(value), |r, (k, v)| {
            r.header(k, v)
        })
}

async fn producer(cluster: &Cluster, codec: &str, extra: &[(&str, &str)]) -> Producer {
    let mut props = vec![
        ("bootstrap.servers", cluster.bootstrap.as_str()),
        ("compression.type", codec),
        ("linger.ms", "5"),
        ("request.timeout.ms", "3000"),
        ("delivery.timeout.ms", "60000"),
        ("retry.backoff.ms", "50"),
    ];
    for (k, v) in extra {
        props.retain(|(key, _)| key != k);
        props.push((k, v));
    }
    Producer::from_properties(props)
        .await
        .expect("producer builds")
}

/// Awaits every future; returns each record's offset, failing the test on any error.
async fn offsets(futures: Vec<DeliveryFuture>) -> Vec<i64> {
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        let meta = tokio::time::timeout(RESOLVE_LIMIT, f)
            .await
            .expect("delivery resolves")
            .expect("delivered");
        out.push(meta.offset);
    }
    out
}

/// One record as a reader printed it: headers as `k:v,k:v`, key, value.
type Line = (String, String, String);

fn expected_lines(codec: &str, n: usize) -> Vec<Line> {
    (0..n)
        .map(|i| {
            let (key, value, headers) = record_parts(i, codec);
            let headers = headers
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(",");
            (headers, key, value)
        })
        .collect()
}

/// Reads the first `n` records of `topic` with Kafka's Java console consumer (the class of
/// `kafka-console-consumer.sh` in 4.x).
fn java_read(cluster: &Cluster, topic: &str, n: usize, isolation: Isolation) -> Vec<Line> {
    let isolation = match isolation {
        Isolation::ReadCommitted => "read_committed",
        Isolation::ReadUncommitted => "read_uncommitted",
    };
    let args: Vec<String> = [
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        &cluster.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--isolation-level",
        isolation,
        "--max-messages",
        &n.to_string(),
        "--timeout-ms",
        "30000",
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The test bed is shared with tests in other processes, which may cut the broker for a
    // while: a read that stopped short (the consumer gives up after 30 s without records) is
    // done again from the start. What it reads is checked in full either way.
    let mut lines = Vec::new();
    for attempt in 1..=3 {
        let out = support::java_tool(&args)
            .stdin(Stdio::null())
            .output()
            .expect("java runs");
        lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                let mut fields = line.splitn(3, '\t').map(str::to_owned);
                let mut next = || fields.next().unwrap_or_default();
                (next(), next(), next())
            })
            .collect();
        if lines.len() == n {
            break;
        }
        eprintln!(
            "Java console consumer read {} of {n} records (attempt {attempt}): {}",
            lines.len(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    lines
}

/// Reads all of `topic` with kcat (librdkafka), headers included.
fn kcat_read(cluster: &Cluster, topic: &str, isolation: Isolation) -> Vec<Line> {
    let level = match isolation {
        Isolation::ReadUncommitted => "read_uncommitted",
        Isolation::ReadCommitted => "read_committed",
    };
    // As in `java_read`: a read cut short by another process's fault injection is done again.
    let mut out = None;
    for attempt in 1..=3 {
        let run = Command::new("kcat")
            .args(["-C", "-b", &cluster.bootstrap, "-t", topic])
            .args(["-o", "beginning", "-e", "-J", "-q", "-m", "60"])
            .args(["-X", &format!("isolation.level={level}")])
            .stdin(Stdio::null())
            .output()
            .expect("kcat runs");
        if run.status.success() {
            out = Some(run.stdout);
            break;
        }
        eprintln!(
            "kcat failed (attempt {attempt}): {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let out = out.expect("kcat reads the topic");
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kcat printed non-JSON {line:?}: {e}"));
            let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_owned();
            // kcat prints headers as a flat [key, value, key, value, ...] array.
            let headers = v["headers"]
                .as_array()
                .map(|h| {
                    h.chunks(2)
                        .map(|kv| format!("{}:{}", text(&kv[0]), text(&kv[1])))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            (headers, text(&v["key"]), text(&v["payload"]))
        })
        .collect()
}

/// Asserts two readers' views equal the expected records, pointing at the first difference.
fn assert_read_back(reader: &str, got: &[Line], want: &[Line]) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!(
            "{reader}: record {i} is {:?}, expected {:?}",
            got[i], want[i]
        );
    }
    assert_eq!(got.len(), want.len(), "{reader} read a different count");
}

/// Asserts that `batches` are `codec` batches, except small ones whose records did not
/// shrink and were stored uncompressed (see `BatchBuilder::seal_compressed`), and that at
/// least 90% of the records are in compressed ones. Returns how many batches are compressed.
fn assert_compressed(batches: &[DecodedBatch], codec: &str) -> usize {
    let records: usize = batches.iter().map(|b| b.records.len()).sum();
    let compressed: Vec<&DecodedBatch> = batches
        .iter()
        .filter(|b| b.codec().name() == codec)
        .collect();
    let compressed_records: usize = compressed.iter().map(|b| b.records.len()).sum();
    assert!(
        compressed_records * 10 >= records * 9,
        "{compressed_records} of {records} records in {codec} batches"
    );
    assert!(
        batches
            .iter()
            .all(|b| [codec, "none"].contains(&b.codec().name())),
        "only {codec} or uncompressed batches"
    );
    compressed.len()
}

/// Puts a proxy back as it was (enabled, no toxics) when dropped, also when the test fails
/// half-way: other tests, in this process and others, share it.
struct Heal(support::Proxy);

impl Drop for Heal {
    fn drop(&mut self) {
        self.0.set_enabled(true);
        self.0.remove_all_toxics();
    }
}

/// 50,000 idempotent records with `codec`, their answers dropped and then the broker cut in
/// the middle of the run, so batches are re-sent and the broker de-duplicates compressed
/// batches; then the Java console consumer and kcat read every record exactly once, in order,
/// with its key, value and headers.
async fn produce_read_by_java_and_kcat(codec: &str) {
    let topic = support::unique_topic(&format!("compress-{codec}"));
    let cut = cutting();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    cluster.create_topic(&topic, 1, 1, &[]);
    let counters = {
        let _exclusive = cluster.exclusive();
        let producer = producer(&cluster, codec, &[]).await;
        let mut futures = Vec::with_capacity(RECORDS);
        for i in 0..RECORDS / 2 {
            futures.push(producer.send(record(&topic, i, codec)).await.expect("send"));
        }
        // Answers lost, then the connection cut: batches written but unresolved, re-sent
        // when the broker is back (P5).
        let proxy = cluster.proxy(0);
        let _heal = Heal(proxy.clone());
        proxy.add_toxic("drop_answers", "timeout", "downstream", r#"{"timeout":0}"#);
        for i in RECORDS / 2..RECORDS * 3 / 4 {
            futures.push(producer.send(record(&topic, i, codec)).await.expect("send"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set_enabled(false);
        // By name would fail if a test in another process reset the proxy meanwhile.
        proxy.remove_all_toxics();
        for i in RECORDS * 3 / 4..RECORDS {
            futures.push(producer.send(record(&topic, i, codec)).await.expect("send"));
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        proxy.set_enabled(true);
        let offsets = offsets(futures).await;
        let expected: Vec<i64> = (0..RECORDS as i64).collect();
        assert!(offsets == expected, "offsets are not 0..{RECORDS} in order");
        let counters = producer.counters();
        producer.close().await.expect("close");
        counters
    };
    assert_eq!(counters.records_acked, RECORDS as u64);
    drop(cut);
    let _reading = not_cutting();

    let want = expected_lines(codec, RECORDS);
    let (java, kcat) = std::thread::scope(|s| {
        let java = s.spawn(|| java_read(&cluster, &topic, RECORDS, Isolation::ReadUncommitted));
        let kcat = s.spawn(|| kcat_read(&cluster, &topic, Isolation::ReadUncommitted));
        (java.join().expect("java"), kcat.join().expect("kcat"))
    });
    assert_read_back("Java console consumer", &java, &want);
    assert_read_back("kcat", &kcat, &want);
    // The batches on the wire are compressed with the codec, except the odd small batch
    // whose records do not shrink (a lone record after the cut), which is stored as it is.
    let batches = fetch_batches(&cluster, &topic, 0);
    let compressed = assert_compressed(&batches, codec);
    let wire: usize = batches.iter().map(|b| b.batch_length as usize + 12).sum();
    let values: usize = want.iter().map(|(_, _, v)| v.len()).sum();
    eprintln!(
        "{codec}: {} batches ({} compressed), {wire} bytes on the wire for {values} bytes of \
         values (ratio {:.3}), {} batch retries",
        batches.len(),
        compressed,
        wire as f64 / values as f64,
        counters.batch_retries
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_gzip_read_by_java_and_kcat() {
    produce_read_by_java_and_kcat("gzip").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_snappy_read_by_java_and_kcat() {
    produce_read_by_java_and_kcat("snappy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_lz4_read_by_java_and_kcat() {
    produce_read_by_java_and_kcat("lz4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_zstd_read_by_java_and_kcat() {
    produce_read_by_java_and_kcat("zstd").await;
}

/// Every batch of `topic`'s `partition`, fetched with the crate's Fetch codec straight from
/// the (single) broker and decoded with our decoder.
fn fetch_batches(cluster: &Cluster, topic: &str, partition: i32) -> Vec<DecodedBatch> {
    const FETCH_VERSION: i16 = 12; // the last version that names topics
    let mut connection = RawConnection::connect(&cluster.bootstrap);
    let mut batches: Vec<DecodedBatch> = Vec::new();
    loop {
        let fetch_offset = batches.last().map_or(0, |b| b.last_offset() + 1);
        let request = FetchRequest {
            max_wait_ms: 100,
            max_bytes: 8 << 20,
            isolation_level: 0,
            topics: vec![FetchTopic {
                topic: topic.to_owned(),
                partitions: vec![FetchPartition {
                    partition,
                    fetch_offset,
                    partition_max_bytes: 4 << 20,
                    ..FetchPartition::default()
                }],
                ..FetchTopic::default()
            }],
            ..FetchRequest::default()
        };
        let response = connection.call(&request, FETCH_VERSION);
        let answer = &response.responses[0].partitions[0];
        assert_eq!(answer.error_code, 0, "fetch error");
        let records = answer.records.clone().unwrap_or_default();
        let fetched = decode_batches(&records).expect("our decoder reads the broker's batches");
        if fetched.is_empty() {
            assert!(
                fetch_offset >= answer.high_watermark,
                "no progress at {fetch_offset}"
            );
            return batches;
        }
        batches.extend(fetched);
    }
}

/// Batches the Java producer (the console producer) compresses with each codec decode with
/// our decoder: the codec bits, keys, values and headers all come out as written.
#[test]
fn read_batches_written_by_java_producer() {
    let _no_cut = not_cutting();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    const N: usize = 2_000;
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let topics: Vec<String> = codecs
        .iter()
        .map(|c| support::unique_topic(&format!("java-{c}")))
        .collect();
    std::thread::scope(|s| {
        for (codec, topic) in codecs.iter().zip(&topics) {
            let cluster = &cluster;
            s.spawn(move || {
                cluster.create_topic(topic, 1, 1, &[]);
                java_produce(cluster, topic, codec, &expected_lines(codec, N));
            });
        }
    });
    for (codec, topic) in codecs.iter().zip(&topics) {
        let batches = fetch_batches(&cluster, topic, 0);
        assert!(
            batches.len() < N / 10,
            "{codec}: the Java producer batched ({} batches)",
            batches.len()
        );
        let mut got = Vec::new();
        for batch in &batches {
            assert_eq!(
                batch.codec().name(),
                *codec,
                "{codec}: the batch at offset {}",
                batch.base_offset
            );
            for r in &batch.records {
                let text = |b: &Option<bytes::Bytes>| {
                    String::from_utf8_lossy(b.as_deref().unwrap_or_default()).into_owned()
                };
                let headers = r
                    .headers
                    .iter()
                    .map(|h| format!("{}:{}", h.key, text(&h.value)))
                    .collect::<Vec<_>>()
                    .join(",");
                got.push((headers, text(&r.key), text(&r.value)));
            }
        }
        assert_read_back(codec, &got, &expected_lines(codec, N));
        let codec_id = Codec::from_id(batches[0].attributes as u8 & 7).map(Codec::name);
        assert_eq!(codec_id, Some(*codec));
    }
}

/// Writes `lines` (headers, key, value) to `topic` with Kafka's console producer, batching
/// generously so batches hold many records.
fn java_produce(cluster: &Cluster, topic: &str, codec: &str, lines: &[Line]) {
    let args: Vec<String> = [
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        &cluster.bootstrap,
        "--topic",
        topic,
        // The console producer sets compression.type from this option (none without it),
        // over any --producer-property.
        "--compression-codec",
        codec,
        "--producer-property",
        "linger.ms=200",
        "--producer-property",
        "batch.size=65536",
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut child = support::java_tool(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java runs");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let mut input = String::new();
        for (headers, key, value) in lines {
            input.push_str(&format!("{headers}\t{key}\t{value}\n"));
        }
        stdin.write_all(input.as_bytes()).expect("write records");
    }
    let out = child.wait_with_output().expect("console producer ends");
    assert!(
        out.status.success(),
        "console producer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A topic whose `max.message.bytes` is far below what a full compressed batch takes: the
/// broker rejects batches with MESSAGE_TOO_LARGE, they are split (and split again) until they
/// fit, and every record still lands exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_compressed_batch_is_split() {
    let _no_cut = not_cutting();
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _shared = cluster.shared();
    const N: usize = 5_000;
    let codec = "lz4";
    let topic = support::unique_topic("compress-split");
    cluster.create_topic(&topic, 1, 1, &[("max.message.bytes", "4000")]);
    // 64 KiB batches of ~190-byte records: about 340 records, some 20 KiB compressed.
    let producer = producer(
        &cluster,
        codec,
        &[("batch.size", "65536"), ("linger.ms", "50")],
    )
    .await;
    let mut futures = Vec::with_capacity(N);
    for i in 0..N {
        futures.push(producer.send(record(&topic, i, codec)).await.expect("send"));
    }
    let offsets = offsets(futures).await;
    assert!(
        offsets == (0..N as i64).collect::<Vec<_>>(),
        "offsets in send order"
    );
    let counters = producer.counters();
    producer.close().await.expect("close");
    assert!(
        counters.batch_splits > 0,
        "no batch was split: {counters:?}"
    );
    assert_eq!(counters.records_acked, N as u64);
    assert_eq!(counters.records_failed + counters.records_indeterminate, 0);
    eprintln!("split: {counters:?}");

    let want = expected_lines(codec, N);
    assert_read_back(
        "kcat",
        &kcat_read(&cluster, &topic, Isolation::ReadUncommitted),
        &want,
    );
    for batch in fetch_batches(&cluster, &topic, 0) {
        let size = batch.batch_length as usize + 12;
        assert!(size <= 4000, "a {size}-byte batch at {}", batch.base_offset);
    }
}

/// Commit visible, abort invisible, with compressed batches.
async fn transaction_with(cluster: Cluster, codec: &str) {
    let _shared = cluster.shared();
    let topic = support::unique_topic(&format!("txn-{codec}"));
    cluster.create_topic(&topic, 2, 1, &[]);
    let producer = producer(
        &cluster,
        codec,
        &[
            ("transactional.id", &support::unique_topic("txn-compress")),
            ("max.block.ms", "60000"),
        ],
    )
    .await;
    producer.init_transactions().await.expect("init");
    let mut sends = Vec::new();
    for (round, commit) in [(0, true), (1, false), (2, true)] {
        producer.begin_transaction().expect("begin");
        let mut futures = Vec::new();
        for i in 0..1_000 {
            let r = Record::to(&topic)
                .key(format!("k{i}"))
                .value(format!("round-{round}-{}", record_parts(i, codec).1));
            futures.push(producer.send(r).await.expect("send"));
        }
        if commit {
            producer.commit_transaction().await.expect("commit");
        } else {
            producer.flush().await.expect("flush");
            producer.abort_transaction().await.expect("abort");
        }
        sends.push((round, commit, futures));
    }
    for (round, commit, futures) in sends {
        for f in futures {
            let outcome = tokio::time::timeout(RESOLVE_LIMIT, f)
                .await
                .expect("resolves");
            if commit {
                outcome.unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        }
    }
    producer.close().await.expect("close");
    let count = |isolation, round: usize| {
        cluster
            .read_topic(&topic, isolation)
            .iter()
            .filter(|r| {
                r.value
                    .as_deref()
                    .is_some_and(|v| v.starts_with(&format!("round-{round}-")))
            })
            .count()
    };
    assert_eq!(count(Isolation::ReadCommitted, 0), 1_000, "committed");
    assert_eq!(
        count(Isolation::ReadCommitted, 1),
        0,
        "aborted is invisible"
    );
    assert_eq!(
        count(Isolation::ReadCommitted, 2),
        1_000,
        "committed after abort"
    );
    assert_eq!(
        count(Isolation::ReadUncommitted, 1),
        1_000,
        "aborted was written"
    );
    let batches: Vec<DecodedBatch> = (0..2)
        .flat_map(|p| fetch_batches(&cluster, &topic, p))
        .filter(|b| !b.is_control())
        .collect();
    assert!(batches.iter().all(DecodedBatch::is_transactional));
    assert_compressed(&batches, codec);
}

/// One test per codec and transaction version.
macro_rules! transactions_with {
    ($name:ident, $codec:literal) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tv2() {
                let _no_cut = super::not_cutting();
                if let Some(cluster) = super::support::Cluster::single() {
                    super::transaction_with(cluster, $codec).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tv1() {
                let _no_cut = super::not_cutting();
                if let Some(cluster) = super::support::Cluster::tv1() {
                    super::transaction_with(cluster, $codec).await;
                }
            }
        }
    };
}
transactions_with!(transactions_lz4, "lz4");
transactions_with!(transactions_zstd, "zstd");
