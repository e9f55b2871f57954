//! The demo `scripts/demo` runs: produce numbered records through the test bed, cut the
//! broker's proxy for a few seconds in the middle, read the topic back with an independent
//! reader (kcat), and report what landed.
//!
//! ```sh
//! cargo run --release --example demo -- --records 1000000 --bootstrap 127.0.0.1:19090 \
//!     --topic demo --cut-proxy b1-tv2-broker0 --toxiproxy http://127.0.0.1:8474
//! ```

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use exactly::{Producer, Record};

struct Args {
    records: u64,
    record_size: usize,
    bootstrap: String,
    topic: String,
    cut_proxy: Option<String>,
    toxiproxy: String,
    cut_for: Duration,
}

fn parse_args() -> Args {
    let mut args = Args {
        records: 1_000_000,
        record_size: 100,
        bootstrap: "127.0.0.1:19090".into(),
        topic: "demo".into(),
        cut_proxy: None,
        toxiproxy: "http://127.0.0.1:8474".into(),
        cut_for: Duration::from_secs(3),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--records" => {
                args.records = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--records takes a number"))
            }
            "--record-size" => {
                args.record_size = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--record-size takes a number"))
            }
            "--bootstrap" => args.bootstrap = value(),
            "--topic" => args.topic = value(),
            "--cut-proxy" => args.cut_proxy = Some(value()),
            "--toxiproxy" => args.toxiproxy = value(),
            "--cut-seconds" => {
                args.cut_for = Duration::from_secs(
                    value()
                        .parse()
                        .unwrap_or_else(|_| usage("--cut-seconds takes a number")),
                )
            }
            other => usage(&format!("unknown flag {other}")),
        }
    }
    args
}

fn usage(problem: &str) -> ! {
    eprintln!("demo: {problem}");
    eprintln!(
        "usage: demo [--records N] [--record-size BYTES] [--bootstrap HOST:PORT] [--topic NAME] \
         [--cut-proxy NAME --toxiproxy URL --cut-seconds S]"
    );
    std::process::exit(2)
}

/// Enables or disables a Toxiproxy proxy with curl (the demo keeps its own code small).
fn set_proxy(toxiproxy: &str, name: &str, enabled: bool) {
    let status = Command::new("curl")
        .args(["-fsS", "-o", "/dev/null", "-X", "POST"])
        .arg(format!("{toxiproxy}/proxies/{name}"))
        .args(["-d", &format!("{{\"enabled\":{enabled}}}")])
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("demo: could not set proxy {name} enabled={enabled}");
    }
}

/// One line of the producer's metrics: what a dashboard would show.
fn live_line(m: &exactly::ProducerMetrics) -> String {
    let in_flight: usize = m.brokers.values().map(|b| b.in_flight_requests).sum();
    let connections: Vec<String> = m
        .brokers
        .iter()
        .map(|(id, b)| format!("{id}:{:?}", b.connection))
        .collect();
    format!(
        "live: acked {:>9} ({:>8.0}/s) errors {:>6} retried {:>6} | in flight {in_flight} | \
         latency avg {:>5.1} ms max {:>5} | queue avg {:>5.1} ms | buffer free {:>3.0}% | \
         epoch bumps {} | brokers {}",
        m.record_send_total,
        m.record_send_rate,
        m.record_error_total,
        m.record_retry_total,
        m.request_latency_avg_ms,
        m.request_latency_max_ms,
        m.record_queue_time_avg_ms,
        100.0 * m.buffer_available_bytes as f64 / m.buffer_total_bytes.max(1) as f64,
        m.epoch_bumps,
        connections.join(" "),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> exactly::Result<()> {
    let args = parse_args();
    let producer = Producer::builder()
        .bootstrap(&args.bootstrap)
        .linger(Duration::from_millis(5))
        .batch_size(256 * 1024)
        .delivery_timeout(Duration::from_secs(10))
        .request_timeout(Duration::from_secs(3))
        .build()
        .await?;

    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel(100_000);
    let collector = tokio::spawn(async move {
        let (mut latencies, mut acked, mut failed, mut indeterminate) =
            (Vec::new(), 0u64, 0u64, 0u64);
        while let Some((sent_at, future)) = done_rx.recv().await {
            let future: exactly::DeliveryFuture = future;
            match future.await {
                Ok(_) => {
                    acked += 1;
                    latencies.push(Instant::now().duration_since(sent_at));
                }
                Err(e) if e.is_indeterminate() => indeterminate += 1,
                Err(_) => failed += 1,
            }
        }
        (latencies, acked, failed, indeterminate)
    });

    // A line of live metrics a second (the producer's own snapshot, Kafka's names).
    let live = tokio::spawn({
        let producer = producer.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                println!("{}", live_line(&producer.metrics()));
            }
        }
    });

    let started = Instant::now();
    let padding = "x".repeat(args.record_size.saturating_sub(16));
    let mut restore = None;
    let mut rejected = 0u64;
    for n in 0..args.records {
        if n == args.records / 2
            && let Some(name) = args.cut_proxy.clone()
        {
            println!("\ncutting {name} for {:?}", args.cut_for);
            set_proxy(&args.toxiproxy, &name, false);
            let (toxiproxy, cut_for) = (args.toxiproxy.clone(), args.cut_for);
            restore = Some(tokio::spawn(async move {
                tokio::time::sleep(cut_for).await;
                set_proxy(&toxiproxy, &name, true);
                println!("\nrestored {name}");
            }));
        }
        let value = format!("{n:015}:{padding}");
        match producer.send(Record::to(&args.topic).value(value)).await {
            Ok(future) => {
                let _ = done_tx.send((Instant::now(), future)).await;
            }
            Err(e) => {
                rejected += 1;
                if rejected == 1 {
                    eprintln!("\nsend refused: {e}");
                }
            }
        }
    }
    if let Some(restore) = restore {
        restore.await.expect("restore task");
    }
    drop(done_tx);
    let (mut latencies, acked, failed, indeterminate) = collector.await.expect("collector task");
    let elapsed = started.elapsed();
    let counters = producer.counters();
    live.abort();
    println!("{}", live_line(&producer.metrics()));
    producer.close().await?;

    // Read back with kcat (independent of this crate) and check every number.
    let out = Command::new("kcat")
        .args([
            "-C",
            "-b",
            &args.bootstrap,
            "-t",
            &args.topic,
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .args(["-f", "%p %s\n"])
        .output()
        .expect("kcat runs");
    let mut copies: HashMap<u64, u32> = HashMap::new();
    let mut out_of_order = 0u64;
    let mut last_per_partition: HashMap<String, u64> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((partition, value)) = line.split_once(' ') else {
            continue;
        };
        let Some(n) = value.get(..15).and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        *copies.entry(n).or_default() += 1;
        if last_per_partition
            .get(partition)
            .is_some_and(|&last| n < last)
        {
            out_of_order += 1;
        }
        last_per_partition.insert(partition.to_owned(), n);
    }
    let duplicates = copies.values().filter(|&&c| c > 1).count();
    let in_log = copies.len() as u64;
    latencies.sort_unstable();
    println!("records sent      {}", args.records);
    println!("acked             {acked}");
    println!("failed            {failed} (not in the log)  + {rejected} refused at send");
    println!("indeterminate     {indeterminate} (may be in the log)");
    println!("in the log        {in_log} distinct records, read back by kcat");
    println!("duplicates        {duplicates}");
    println!(
        "gaps              {} acked records missing from the log",
        acked.saturating_sub(in_log)
    );
    println!("order             {out_of_order} records out of send order within their partition");
    println!(
        "throughput        {:.0} records/s",
        acked as f64 / elapsed.as_secs_f64()
    );
    println!(
        "ack latency       p50 {:?}  p99 {:?}",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99)
    );
    println!("epoch bumps       {}", counters.epoch_bumps);
    let ok =
        duplicates == 0 && out_of_order == 0 && in_log >= acked && in_log <= acked + indeterminate;
    println!(
        "{}",
        if ok {
            "OK: every acked record is in the log exactly once, in order"
        } else {
            "PROBLEM: see above"
        }
    );
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
