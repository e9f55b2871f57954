//! A small Kafka admin tool on `exactly::Admin`: topics, one topic's partitions, groups, a
//! group's lag, hanging transactions, why a partition's last stable offset is stuck, ACLs,
//! quotas, SCRAM users, leader elections, reassignments and log dirs, printed as aligned
//! tables.
//!
//! ```sh
//! eval "$(scripts/testbed up)"
//! cargo run --example admin -- topics
//! cargo run --example admin -- describe orders
//! cargo run --example admin -- groups
//! cargo run --example admin -- --bootstrap 127.0.0.1:19090 lag my-group
//! cargo run --example admin -- hanging --older-than 600 --abort
//! cargo run --example admin -- lso orders 0
//! cargo run --example admin -- acls add User:bob write topic orders
//! cargo run --example admin -- quotas set client-id loader producer_byte_rate 1048576
//! cargo run --example admin -- users add bob bob-secret
//! cargo run --example admin -- elect preferred orders 0
//! cargo run --example admin -- reassign orders 0 2,3
//! cargo run --example admin -- log-dirs
//! ```
//!
//! The bootstrap servers come from `--bootstrap`, else `KAFKA_BOOTSTRAP`, else
//! `127.0.0.1:19090` (the test bed's single broker).

use std::process::ExitCode;
use std::time::Duration;

use exactly::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, Admin, ClientQuotaAlteration,
    ClientQuotaEntity, ClientQuotaFilter, ElectionType, FindHangingOptions, IsolationLevel,
    OffsetSpec, ResourcePattern, ResourceType, ScramCredentialAlteration, ScramMechanism,
    TopicPartition,
};

const USAGE: &str = "usage: admin [--bootstrap HOST:PORT] <command>
commands:
  topics              the topics (internal ones left out): partitions, replication factor
  describe TOPIC      a topic's partitions: leader, replicas, in-sync replicas
  groups              the consumer groups: type, state
  lag GROUP           a group's committed offset, end offset and lag per partition
  hanging [--older-than SECS] [--abort]
                      open transactions their coordinators will never end (KIP-664), older
                      than SECS (default: the brokers' transaction.max.timeout.ms);
                      --abort writes their abort markers
  lso TOPIC PARTITION why the partition's last stable offset is where it is, and what to do
  fence TRANSACTIONAL_ID
                      fence the id: its producer is fenced, its open transaction aborted whole
  acls                every ACL
  acls add|deny PRINCIPAL OPERATION topic|group|transactional-id|cluster NAME
                      allow (or deny) PRINCIPAL (User:name) an operation (read, write, ...)
  acls delete PRINCIPAL topic|group|transactional-id|cluster NAME
                      remove every ACL of PRINCIPAL on the resource
  quotas              every client quota
  quotas set|remove user|client-id NAME KEY [VALUE]
                      set (or remove) a quota, e.g. producer_byte_rate
  users               every user's SCRAM credentials
  users add USER PASSWORD [--sha256]
                      create or replace USER's SCRAM-SHA-512 (or -256) credential, 8192 rounds
  users delete USER [--sha256]
                      remove it
  elect preferred|unclean [TOPIC PARTITION]
                      elect leaders (every partition without TOPIC)
  reassign            the reassignments in progress
  reassign TOPIC PARTITION BROKERS
                      move the partition to BROKERS (comma-separated, preferred leader first)
  log-dirs [BROKER]   each broker's log directories and the replicas in them";

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
        ["lso", topic, partition] => match partition.parse() {
            Ok(partition) => lso(&admin, TopicPartition::new(*topic, partition)).await,
            Err(_) => return usage("lso takes TOPIC PARTITION"),
        },
        ["fence", id] => fence(&admin, id).await,
        ["acls", rest @ ..] => match acls(&admin, rest).await {
            Some(done) => done,
            None => return usage("acls takes [add|deny|delete PRINCIPAL ...]"),
        },
        ["quotas", rest @ ..] => match quotas(&admin, rest).await {
            Some(done) => done,
            None => return usage("quotas takes [set|remove user|client-id NAME KEY [VALUE]]"),
        },
        ["users", rest @ ..] => match users(&admin, rest).await {
            Some(done) => done,
            None => return usage("users takes [add USER PASSWORD | delete USER] [--sha256]"),
        },
        ["elect", kind, rest @ ..] => match elect_args(kind, rest) {
            Some((election, partitions)) => elect(&admin, election, partitions).await,
            None => return usage("elect takes preferred|unclean [TOPIC PARTITION]"),
        },
        ["reassign", rest @ ..] => match reassign(&admin, rest).await {
            Some(done) => done,
            None => return usage("reassign takes [TOPIC PARTITION BROKERS]"),
        },
        ["log-dirs", rest @ ..] => match rest.iter().map(|b| b.parse()).collect() {
            Ok(brokers) => log_dirs(&admin, brokers).await,
            Err(_) => return usage("log-dirs takes [BROKER ...] (node ids)"),
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

async fn lso(admin: &Admin, partition: TopicPartition) -> exactly::Result<()> {
    println!("{}", admin.explain_last_stable_offset(&partition).await?);
    Ok(())
}

async fn fence(admin: &Admin, id: &str) -> exactly::Result<()> {
    for (id, fenced) in admin.fence_producers([id]).await? {
        let fenced = fenced?;
        println!(
            "fenced {id:?}: producer {} now at epoch {}",
            fenced.producer_id, fenced.producer_epoch
        );
    }
    Ok(())
}

/// An ACL resource from its kind and name as typed.
fn resource(kind: &str, name: &str) -> Option<ResourcePattern> {
    let resource_type = match kind {
        "topic" => ResourceType::Topic,
        "group" => ResourceType::Group,
        "transactional-id" => ResourceType::TransactionalId,
        "cluster" => return Some(ResourcePattern::cluster()),
        _ => return None,
    };
    Some(ResourcePattern::literal(resource_type, name))
}

/// An ACL operation by the name `kafka-acls --operation` takes.
fn operation(name: &str) -> Option<AclOperation> {
    Some(match name.to_ascii_lowercase().as_str() {
        "all" => AclOperation::All,
        "read" => AclOperation::Read,
        "write" => AclOperation::Write,
        "create" => AclOperation::Create,
        "delete" => AclOperation::Delete,
        "alter" => AclOperation::Alter,
        "describe" => AclOperation::Describe,
        "clusteraction" => AclOperation::ClusterAction,
        "describeconfigs" => AclOperation::DescribeConfigs,
        "alterconfigs" => AclOperation::AlterConfigs,
        "idempotentwrite" => AclOperation::IdempotentWrite,
        _ => return None,
    })
}

/// `acls`; `None` if the arguments do not parse.
async fn acls(admin: &Admin, args: &[&str]) -> Option<exactly::Result<()>> {
    let done = match args {
        [] => print_acls(admin).await,
        [kind @ ("add" | "deny"), principal, op, resource_kind, name] => {
            let entry = if *kind == "add" {
                AccessControlEntry::allow(*principal, operation(op)?)
            } else {
                AccessControlEntry::deny(*principal, operation(op)?)
            };
            let binding = AclBinding::new(resource(resource_kind, name)?, entry);
            match admin.create_acls([binding]).await {
                Ok(results) => results.into_iter().try_for_each(|(binding, result)| {
                    result.map(|()| println!("created {binding:?}"))
                }),
                Err(e) => Err(e),
            }
        }
        ["delete", principal, resource_kind, name] => {
            let pattern = resource(resource_kind, name)?;
            let filter = AclBindingFilter::default()
                .resource(pattern.resource_type, pattern.name)
                .principal(*principal);
            match admin.delete_acls([filter]).await {
                Ok(results) => results.into_iter().try_for_each(|(_, deleted)| {
                    for (binding, result) in deleted? {
                        result?;
                        println!("deleted {binding:?}");
                    }
                    Ok(())
                }),
                Err(e) => Err(e),
            }
        }
        _ => return None,
    };
    Some(done)
}

async fn print_acls(admin: &Admin) -> exactly::Result<()> {
    let rows = admin
        .describe_acls(&AclBindingFilter::default())
        .await?
        .into_iter()
        .map(|b| {
            vec![
                format!("{:?}", b.pattern.resource_type),
                b.pattern.name,
                format!("{:?}", b.pattern.pattern_type),
                b.entry.principal,
                b.entry.host,
                format!("{:?}", b.entry.operation),
                format!("{:?}", b.entry.permission),
            ]
        })
        .collect();
    print_table(
        &[
            "TYPE",
            "NAME",
            "PATTERN",
            "PRINCIPAL",
            "HOST",
            "OPERATION",
            "PERMISSION",
        ],
        rows,
    );
    Ok(())
}

/// `quotas`; `None` if the arguments do not parse.
async fn quotas(admin: &Admin, args: &[&str]) -> Option<exactly::Result<()>> {
    let entity = |kind: &str, name: &str| match kind {
        "user" => Some(ClientQuotaEntity::user(name)),
        "client-id" => Some(ClientQuotaEntity::client_id(name)),
        _ => None,
    };
    let alteration = match args {
        [] => return Some(print_quotas(admin).await),
        ["set", kind, name, key, value] => {
            ClientQuotaAlteration::new(entity(kind, name)?).set(key, value.parse().ok()?)
        }
        ["remove", kind, name, key] => ClientQuotaAlteration::new(entity(kind, name)?).remove(key),
        _ => return None,
    };
    Some(match admin.alter_client_quotas([alteration], false).await {
        Ok(results) => results.into_iter().try_for_each(|(entity, result)| {
            result.map(|()| println!("altered {:?}", entity.components))
        }),
        Err(e) => Err(e),
    })
}

async fn print_quotas(admin: &Admin) -> exactly::Result<()> {
    let mut rows = Vec::new();
    for (entity, values) in admin
        .describe_client_quotas(&ClientQuotaFilter::all())
        .await?
    {
        let who = entity
            .components
            .iter()
            .map(|(kind, name)| format!("{kind}={}", name.as_deref().unwrap_or("<default>")))
            .collect::<Vec<_>>()
            .join(",");
        for (key, value) in values {
            rows.push(vec![who.clone(), key, value.to_string()]);
        }
    }
    print_table(&["ENTITY", "QUOTA", "VALUE"], rows);
    Ok(())
}

/// `users`; `None` if the arguments do not parse.
async fn users(admin: &Admin, args: &[&str]) -> Option<exactly::Result<()>> {
    let (args, mechanism) = match args.split_last() {
        Some((&"--sha256", rest)) => (rest, ScramMechanism::Sha256),
        _ => (args, ScramMechanism::Sha512),
    };
    let alteration = match args {
        [] => return Some(print_users(admin).await),
        ["add", user, password] => ScramCredentialAlteration::upsert(
            *user,
            mechanism,
            8192,
            &exactly::Secret::from(*password),
        ),
        ["delete", user] => Ok(ScramCredentialAlteration::delete(*user, mechanism)),
        _ => return None,
    };
    let done = match alteration {
        Ok(alteration) => match admin.alter_user_scram_credentials([alteration]).await {
            Ok(results) => results
                .into_iter()
                .try_for_each(|(user, result)| result.map(|()| println!("altered {user}"))),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    Some(done)
}

async fn print_users(admin: &Admin) -> exactly::Result<()> {
    let mut rows = Vec::new();
    for (user, credentials) in admin.describe_user_scram_credentials(None).await? {
        for credential in credentials? {
            rows.push(vec![
                user.clone(),
                format!("{:?}", credential.mechanism),
                credential.iterations.to_string(),
            ]);
        }
    }
    print_table(&["USER", "MECHANISM", "ITERATIONS"], rows);
    Ok(())
}

/// The arguments of `elect`; `None` if they do not parse.
fn elect_args(kind: &str, rest: &[&str]) -> Option<(ElectionType, Option<Vec<TopicPartition>>)> {
    let election = match kind {
        "preferred" => ElectionType::Preferred,
        "unclean" => ElectionType::Unclean,
        _ => return None,
    };
    let partitions = match rest {
        [] => None,
        [topic, partition] => Some(vec![TopicPartition::new(*topic, partition.parse().ok()?)]),
        _ => return None,
    };
    Some((election, partitions))
}

async fn elect(
    admin: &Admin,
    election: ElectionType,
    partitions: Option<Vec<TopicPartition>>,
) -> exactly::Result<()> {
    let rows = admin
        .elect_leaders(election, partitions)
        .await?
        .into_iter()
        .map(|(tp, result)| {
            vec![
                tp.topic.to_string(),
                tp.partition.to_string(),
                result.map_or_else(|e| e.to_string(), |()| "elected".to_owned()),
            ]
        })
        .collect();
    print_table(&["TOPIC", "PARTITION", "RESULT"], rows);
    Ok(())
}

/// `reassign`; `None` if the arguments do not parse.
async fn reassign(admin: &Admin, args: &[&str]) -> Option<exactly::Result<()>> {
    let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let done = match args {
        [] => match admin.list_partition_reassignments(None).await {
            Ok(moving) => {
                let rows = moving
                    .into_iter()
                    .map(|(tp, r)| {
                        vec![
                            tp.topic.to_string(),
                            tp.partition.to_string(),
                            ids(&r.replicas),
                            ids(&r.adding),
                            ids(&r.removing),
                        ]
                    })
                    .collect();
                print_table(
                    &["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                    rows,
                );
                Ok(())
            }
            Err(e) => Err(e),
        },
        [topic, partition, brokers] => {
            let tp = TopicPartition::new(*topic, partition.parse().ok()?);
            let replicas = brokers
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<i32>, _>>()
                .ok()?;
            match admin
                .alter_partition_reassignments([(tp, Some(replicas))])
                .await
            {
                Ok(results) => results.into_iter().try_for_each(|(tp, result)| {
                    result.map(|()| println!("reassigning {}-{}", tp.topic, tp.partition))
                }),
                Err(e) => Err(e),
            }
        }
        _ => return None,
    };
    Some(done)
}

async fn log_dirs(admin: &Admin, mut brokers: Vec<i32>) -> exactly::Result<()> {
    if brokers.is_empty() {
        brokers = admin
            .describe_cluster()
            .await?
            .brokers
            .into_keys()
            .collect();
    }
    let mut rows = Vec::new();
    for (broker, dirs) in admin.describe_log_dirs(brokers).await? {
        for (path, dir) in dirs? {
            if let Some(error) = &dir.error {
                rows.push(vec![
                    broker.to_string(),
                    path.clone(),
                    error.to_string(),
                    String::new(),
                ]);
            }
            for (tp, replica) in &dir.replicas {
                rows.push(vec![
                    broker.to_string(),
                    path.clone(),
                    format!("{}-{}", tp.topic, tp.partition),
                    replica.size_bytes.to_string(),
                ]);
            }
        }
    }
    print_table(&["BROKER", "DIR", "REPLICA", "BYTES"], rows);
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
