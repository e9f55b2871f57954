//! kacrab-perf: kacrab's `Producer::send` in peer-perf's send loop, with perf's flags and
//! summary line.
//!
//! kacrab takes the Java producer's property names itself (`ProducerBuilder::set`), so
//! --producer-props are passed through as they are (kacrab rejects the ones it does not know).
//! Its `send` never waits: a record that finds no buffer space goes to an unbounded queue
//! (client.rs, enqueue_slow_send), so the loop's window of outstanding futures (buffer.memory /
//! record size) is what bounds memory here, as the 32 MiB buffer does for the other clients.

use kacrab::producer::{Producer, ProducerRecord};
use peer_perf::{send_loop, Args, Sent, Values};

const PROGRAM: &str = "kacrab-perf";

fn fail(problem: impl std::fmt::Display) -> ! {
    eprintln!("{PROGRAM}: {problem}");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let args = Args::parse(PROGRAM);
    let values = Values::new(PROGRAM, &args);
    let mut builder = Producer::builder().set("client.id", PROGRAM);
    for (k, v) in &args.props {
        builder = builder.set(k.as_str(), v.as_str());
    }
    let producer = builder.build().await.unwrap_or_else(|e| fail(e));
    let topic: std::sync::Arc<str> = args.topic.as_str().into();
    let (mut stats, elapsed) = send_loop(&args, &values, |value| {
        let outcome = producer
            .send(ProducerRecord::topic_value(topic.clone(), value))
            .map(|delivery| {
                Sent::Queued(async move { delivery.await.map(|_| ()).map_err(|e| e.to_string()) })
            })
            .map_err(|e| e.to_string());
        std::future::ready(outcome)
    })
    .await;
    if let Err(e) = producer.close().await {
        eprintln!("{PROGRAM}: close: {e}");
    }
    let ok = stats.print(elapsed);
    std::process::exit(if ok { 0 } else { 1 })
}
