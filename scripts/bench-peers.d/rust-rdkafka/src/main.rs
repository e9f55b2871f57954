//! rust-rdkafka-perf: rust-rdkafka's `FutureProducer` (over the librdkafka that `rdkafka-sys`
//! bundles) in peer-perf's send loop, with perf's flags and summary line.
//!
//! --producer-props are librdkafka properties (it accepts most of the Java names), except
//! `buffer.memory`, which librdkafka does not know: it becomes queue.buffering.max.kbytes, as in
//! rdkafka_perf.c. `--version` prints the bundled librdkafka's version.

use peer_perf::{send_loop, usage, Args, Sent, Values};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::get_rdkafka_version;

const PROGRAM: &str = "rust-rdkafka-perf";

#[tokio::main]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("--version") {
        println!("rdkafka 0.39.0, librdkafka {}", get_rdkafka_version().1);
        return;
    }
    let args = Args::parse(PROGRAM);
    let values = Values::new(PROGRAM, &args);
    let mut config = ClientConfig::new();
    for (k, v) in &args.props {
        if k == "buffer.memory" {
            let bytes: u64 = v
                .parse()
                .unwrap_or_else(|_| usage(PROGRAM, "buffer.memory"));
            config.set("queue.buffering.max.kbytes", (bytes / 1024).to_string());
        } else {
            config.set(k, v);
        }
    }
    let producer: FutureProducer = config.create().unwrap_or_else(|e| {
        eprintln!("{PROGRAM}: {e}");
        std::process::exit(2)
    });
    // Before the clock starts, as the other programs' connect/build calls do: the connection to
    // the brokers and the topic's metadata (librdkafka otherwise gets them in the background
    // while the first records wait, which put 0.5 s into the first records' latencies).
    if let Err(e) = producer
        .client()
        .fetch_metadata(Some(&args.topic), std::time::Duration::from_secs(30))
    {
        eprintln!("{PROGRAM}: metadata of {}: {e}", args.topic);
        std::process::exit(1)
    }
    let topic = args.topic.clone();
    let (mut stats, elapsed) = send_loop(&args, &values, |value| {
        // librdkafka copies the value (RD_KAFKA_MSG_F_COPY), so the record borrows it.
        let outcome = match producer
            .send_result(FutureRecord::<(), _>::to(&topic).payload(&value[..]))
        {
            Ok(delivery) => Ok(Sent::Queued(async move {
                match delivery.await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err((e, _))) => Err(e.to_string()),
                    Err(_) => Err("delivery future dropped".to_owned()),
                }
            })),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => Ok(Sent::Full),
            Err((e, _)) => Err(e.to_string()),
        };
        std::future::ready(outcome)
    })
    .await;
    if let Err(e) = producer.flush(std::time::Duration::from_secs(120)) {
        eprintln!("{PROGRAM}: flush: {e}");
    }
    let ok = stats.print(elapsed);
    std::process::exit(if ok { 0 } else { 1 })
}
