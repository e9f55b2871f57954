//! krafka-perf: krafka's `Producer::enqueue` in peer-perf's send loop, with perf's flags and
//! summary line.
//!
//! --producer-props takes the Java producer's names and maps each onto krafka's builder; a name
//! without a mapping is an error rather than silently ignored. krafka has no
//! max.in.flight.requests.per.connection for the producer: it keeps at most one batch in flight
//! per partition (engine.rs), and its connection-wide request cap (10 by default) is left as is.

use std::time::Duration;

use krafka::auth::{AuthConfig, TlsConfig};
use krafka::producer::Acks;
use krafka::{Compression, Kafka, Record};
use peer_perf::{send_loop, Args, Sent, Values};

const PROGRAM: &str = "krafka-perf";

fn fail(problem: impl std::fmt::Display) -> ! {
    eprintln!("{PROGRAM}: {problem}");
    std::process::exit(2)
}

fn number(key: &str, value: &str) -> u64 {
    value
        .parse()
        .unwrap_or_else(|_| fail(format!("{key}={value}: not a number")))
}

#[tokio::main]
async fn main() {
    let args = Args::parse(PROGRAM);
    let values = Values::new(PROGRAM, &args);
    let bootstrap = args
        .prop("bootstrap.servers")
        .unwrap_or_else(|| fail("bootstrap.servers is required"));
    let mut kafka = Kafka::builder(bootstrap).client_id(PROGRAM);
    let (mut ssl, mut ca) = (false, None);
    for (k, v) in &args.props {
        match k.as_str() {
            "security.protocol" => match v.to_ascii_uppercase().as_str() {
                "PLAINTEXT" => {}
                "SSL" => ssl = true,
                other => fail(format!(
                    "security.protocol={other}: only PLAINTEXT and SSL are benchmarked"
                )),
            },
            "ssl.truststore.type" if v.eq_ignore_ascii_case("PEM") => {}
            "ssl.truststore.location" => ca = Some(v.clone()),
            _ => {}
        }
    }
    if ssl {
        let mut tls = TlsConfig::new();
        if let Some(ca) = ca {
            tls = tls.with_ca_cert(ca);
        }
        kafka = kafka.security(AuthConfig::ssl(tls));
    }
    let kafka = kafka.connect().await.unwrap_or_else(|e| fail(e));
    let mut builder = kafka.producer();
    for (k, v) in &args.props {
        builder = match k.as_str() {
            "bootstrap.servers"
            | "security.protocol"
            | "ssl.truststore.type"
            | "ssl.truststore.location" => builder,
            "acks" if v == "all" || v == "-1" => builder.acks(Acks::All),
            "enable.idempotence" if v == "true" => builder.idempotent(true),
            "linger.ms" => builder.linger(Duration::from_millis(number(k, v))),
            // Also the bytes a keyless sticky partition takes before moving on (KIP-794), as in Java.
            "batch.size" => builder.batch_size(number(k, v) as usize),
            "buffer.memory" => builder.buffer_memory(number(k, v) as usize),
            "compression.type" => builder.compression(match v.as_str() {
                "none" => Compression::None,
                "gzip" => Compression::Gzip,
                "snappy" => Compression::Snappy,
                "lz4" => Compression::Lz4,
                "zstd" => Compression::Zstd,
                other => fail(format!("compression.type={other}: unknown codec")),
            }),
            _ => fail(format!("{k}={v}: no krafka setting for this property")),
        };
    }
    let producer = builder.build().await.unwrap_or_else(|e| fail(e));
    let topic = args.topic.clone();
    let (mut stats, elapsed) = send_loop(&args, &values, |value| {
        let enqueue = producer.enqueue(Record::new(topic.as_str(), value));
        async move {
            // enqueue waits for buffer space (within max.block), so it is never Full.
            let handle = enqueue.await.map_err(|e| e.to_string())?;
            Ok(Sent::Queued(async move {
                handle.await.map(|_| ()).map_err(|e| e.to_string())
            }))
        }
    })
    .await;
    if let Err(e) = producer.close().await {
        eprintln!("{PROGRAM}: close: {e}");
    }
    let ok = stats.print(elapsed);
    std::process::exit(if ok { 0 } else { 1 })
}
