//! Writes batches of records in transactions, committing or aborting each by a flag, then
//! shows what a read_committed reader (kcat, independent of this crate) sees.
//!
//! ```sh
//! eval "$(scripts/testbed up)"
//! cargo run --example transactional -- --bootstrap "$KAFKA_BOOTSTRAP" --topic txn-demo \
//!     --transactions 4 --records 5 --abort-every 2
//! ```
//!
//! The topic is created (one partition, `exactly::Admin`) if it does not exist.

use std::process::Command;

use exactly::{Admin, ErrorCode, NewTopic, Producer, Record};

struct Args {
    bootstrap: String,
    topic: String,
    transactional_id: String,
    transactions: u32,
    records: u32,
    /// Abort every n-th transaction (0: commit all).
    abort_every: u32,
}

fn parse_args() -> Args {
    let mut args = Args {
        bootstrap: "127.0.0.1:19090".into(),
        topic: "txn-demo".into(),
        transactional_id: "exactly-example".into(),
        transactions: 4,
        records: 5,
        abort_every: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = |v: &str| {
            v.parse::<u32>()
                .unwrap_or_else(|_| usage(&format!("{flag} takes a number")))
        };
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = value,
            "--topic" => args.topic = value,
            "--transactional-id" => args.transactional_id = value,
            "--transactions" => args.transactions = number(&value),
            "--records" => args.records = number(&value),
            "--abort-every" => args.abort_every = number(&value),
            other => usage(&format!("unknown flag {other}")),
        }
    }
    args
}

fn usage(problem: &str) -> ! {
    eprintln!("transactional: {problem}");
    eprintln!(
        "usage: transactional [--bootstrap HOST:PORT] [--topic T] [--transactional-id ID] \
         [--transactions N] [--records N] [--abort-every N]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> exactly::Result<()> {
    let args = parse_args();
    let admin = Admin::builder().bootstrap(&args.bootstrap).build().await?;
    let created = admin
        .create_topics([NewTopic::new(&args.topic).partitions(1)], false)
        .await?;
    match created.get(&args.topic) {
        Some(Err(exactly::Error::Broker { code, .. }))
            if *code == ErrorCode::TOPIC_ALREADY_EXISTS => {}
        Some(Err(e)) => return Err(e.clone()),
        _ => {}
    }
    let producer = Producer::builder()
        .bootstrap(&args.bootstrap)
        .transactional_id(&args.transactional_id)
        .build()
        .await?;
    producer.init_transactions().await?;
    for t in 1..=args.transactions {
        let abort = args.abort_every > 0 && t % args.abort_every == 0;
        producer.begin_transaction()?;
        let mut acks = Vec::new();
        for r in 0..args.records {
            let record = Record::to(&args.topic)
                .key(format!("txn-{t}"))
                .value(format!("txn-{t}-record-{r}"));
            acks.push(producer.send(record).await?);
        }
        if abort {
            producer.abort_transaction().await?;
        } else {
            producer.commit_transaction().await?;
        }
        let mut offsets = Vec::new();
        for ack in acks {
            match ack.await {
                Ok(meta) => offsets.push(meta.offset.to_string()),
                Err(e) => offsets.push(format!("({e})")),
            }
        }
        let verb = if abort { "aborted" } else { "committed" };
        println!(
            "transaction {t}: {verb} {} records at offsets {}",
            args.records,
            offsets.join(" ")
        );
    }
    let counters = producer.counters();
    println!(
        "producer id {} epoch {}",
        counters.producer_id, counters.epoch
    );
    producer.close().await?;

    let read = Command::new("kcat")
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
        .args(["-X", "isolation.level=read_committed", "-f", "%o %s\n"])
        .output();
    match read {
        Ok(out) => {
            println!("a read_committed reader (kcat) sees:");
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
        Err(e) => eprintln!("could not run kcat to read back: {e}"),
    }
    Ok(())
}
