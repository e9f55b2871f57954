//! A small Kafka admin tool on `exactly::Admin`: topics, one topic's partitions, groups, and a
//! group's lag, printed as aligned tables.
//!
//! ```sh
//! eval "$(scripts/testbed up)"
//! cargo run --example admin -- topics
//! cargo run --example admin -- describe orders
//! cargo run --example admin -- groups
//! cargo run --example admin -- --bootstrap 127.0.0.1:19090 lag my-group
//! cargo run --example admin -- hanging --older-than 600 --abort
//! ```
//!
//! The bootstrap servers come from `--bootstrap`, else `KAFKA_BOOTSTRAP`, else
//! `127.0.0.1:19090` (the test bed's single broker).

use std::process::ExitCode;
use std::time::Duration;

use exactly::{Admin, FindHangingOptions, IsolationLevel, OffsetSpec};

const USAGE: &str = "usage: admin [--bootstrap HOST:PORT] <command>
commands:
  topics              the topics (internal ones left out): partitions, replication factor
  describe TOPIC      a topic's partitions: leader, replicas, in-sync replicas
  groups              the consumer groups: type, state
  lag GROUP           a group's committed offset, end offset and lag per partition
  hanging [--older-than SECS] [--abort]
                      open transactions their coordinators will never end (KIP-664), older
                      than SECS (default: the brokers' transaction.max.timeout.ms);
                      --abort writes their abort markers";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut bootstrap =
        std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19090".into());
    if let Some(i) = args.iter().position(|a| a == "--bootstrap") {
        if i + 1 >= args.len() {
            return usage("--bootstrap needs a value");
        }
        bootstrap = args.remove(i + 1);
        args.remove(i);
    }
    let admin = match Admin::builder()
        .bootstrap(bootstrap)
        .client_id("exactly-admin-example")
        .build()
        .await
    {
        Ok(admin) => admin,
        Err(e) => return fail(&e),
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = match args.as_slice() {
        ["topics"] => topics(&admin).await,
        ["describe", topic] => describe(&admin, topic).await,
        ["groups"] => groups(&admin).await,
        ["lag", group] => lag(&admin, group).await,
        ["hanging", options @ ..] => match hanging_options(options) {
            Some((options, abort)) => hanging(&admin, &options, abort).await,
            None => return usage("hanging takes [--older-than SECS] [--abort]"),
        },
        _ => return usage("unknown or incomplete command"),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

async fn topics(admin: &Admin) -> exactly::Result<()> {
    let cluster = admin.describe_cluster().await?;
    let rows = cluster
        .topics
        .values()
        .filter(|t| !t.internal)
        .map(|t| {
            vec![
                t.name.clone(),
                t.partitions.len().to_string(),
                t.replication_factor().to_string(),
            ]
        })
        .collect();
    print_table(&["TOPIC", "PARTITIONS", "REPLICATION"], rows);
    Ok(())
}

async fn describe(admin: &Admin, topic: &str) -> exactly::Result<()> {
    let mut described = admin.describe_topics([topic]).await?;
    let description = described.remove(topic).unwrap_or_else(|| {
        Err(exactly::Error::InvalidState(format!(
            "no answer for {topic}"
        )))
    })?;
    let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let rows = description
        .partitions
        .iter()
        .map(|p| {
            vec![
                p.partition.to_string(),
                p.leader
                    .map_or_else(|| "none".to_owned(), |l| l.to_string()),
                ids(&p.replicas),
                ids(&p.isr),
            ]
        })
        .collect();
    print_table(&["PARTITION", "LEADER", "REPLICAS", "ISR"], rows);
    Ok(())
}

async fn groups(admin: &Admin) -> exactly::Result<()> {
    let rows = admin
        .list_groups()
        .await?
        .into_iter()
        .map(|g| {
            vec![
                g.group_id,
                format!("{:?}", g.group_type).to_lowercase(),
                g.state,
            ]
        })
        .collect();
    print_table(&["GROUP", "TYPE", "STATE"], rows);
    Ok(())
}

async fn lag(admin: &Admin, group: &str) -> exactly::Result<()> {
    let committed = admin.list_group_offsets(group).await?;
    // The end offsets a read_uncommitted reader sees, as kafka-consumer-groups reports them.
    let ends = admin
        .list_offsets(
            committed.keys().map(|tp| (tp.clone(), OffsetSpec::Latest)),
            IsolationLevel::ReadUncommitted,
        )
        .await?;
    let mut total = 0;
    let mut rows = Vec::new();
    for (tp, offset) in &committed {
        let (end, lag) = match ends.get(tp) {
            Some(Ok(end)) => {
                let lag = (end.offset - offset.offset).max(0);
                total += lag;
                (end.offset.to_string(), lag.to_string())
            }
            Some(Err(e)) => (format!("error: {e}"), "-".to_owned()),
            None => ("-".to_owned(), "-".to_owned()),
        };
        rows.push(vec![
            tp.topic.to_string(),
            tp.partition.to_string(),
            offset.offset.to_string(),
            end,
            lag,
        ]);
    }
    print_table(&["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"], rows);
    println!("total lag: {total}");
    Ok(())
}

/// The options of `hanging`, and whether to abort what it finds; `None` if they do not parse.
fn hanging_options(args: &[&str]) -> Option<(FindHangingOptions, bool)> {
    let mut options = FindHangingOptions::default();
    let mut abort = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--abort" => abort = true,
            "--older-than" => {
                let secs: u64 = args.next()?.parse().ok()?;
                options = options.older_than(Duration::from_secs(secs));
            }
            _ => return None,
        }
    }
    Some((options, abort))
}

async fn hanging(admin: &Admin, options: &FindHangingOptions, abort: bool) -> exactly::Result<()> {
    let found = admin.find_hanging_transactions(options).await?;
    let rows = found
        .iter()
        .map(|h| {
            vec![
                h.partition.topic.to_string(),
                h.partition.partition.to_string(),
                h.producer_id.to_string(),
                h.producer_epoch.to_string(),
                h.start_offset.to_string(),
                format!("{}s", h.age.as_secs()),
            ]
        })
        .collect();
    print_table(
        &[
            "TOPIC",
            "PARTITION",
            "PRODUCER ID",
            "EPOCH",
            "START OFFSET",
            "AGE",
        ],
        rows,
    );
    if abort {
        for h in &found {
            admin.abort_transaction(&h.abort_spec()).await?;
            println!(
                "aborted producer {}'s transaction on {}-{}",
                h.producer_id, h.partition.topic, h.partition.partition
            );
        }
    }
    Ok(())
}

/// Prints rows under headers, each column as wide as its widest cell.
fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("{problem}\n{USAGE}");
    ExitCode::from(2)
}

fn fail(error: &exactly::Error) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::FAILURE
}
