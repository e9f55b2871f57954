//! The settings tables against the README and against what the clients do with a shared
//! `client.properties`.

use std::fmt::Debug;

use super::*;
use crate::admin::AdminConfig;
use crate::consumer::ConsumerConfig;
use crate::producer::config::ProducerConfig;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));

/// One Confluent Cloud shaped `client.properties` (its Java template, with the Schema Registry
/// lines), as one file configures every client.
pub(crate) const CONFLUENT_CLOUD_PROPERTIES: [(&str, &str); 11] = [
    ("bootstrap.servers", "127.0.0.1:9092"),
    ("security.protocol", "SASL_PLAINTEXT"),
    ("sasl.mechanism", "PLAIN"),
    (
        "sasl.jaas.config",
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="k" password="s";"#,
    ),
    ("client.dns.lookup", "use_all_dns_ips"),
    ("session.timeout.ms", "45000"),
    ("acks", "all"),
    ("group.id", "g"),
    ("schema.registry.url", "https://sr.example"),
    ("basic.auth.credentials.source", "USER_INFO"),
    ("basic.auth.user.info", "key:secret"),
];

/// AWS MSK's `client.properties` for SASL/SCRAM with a JKS trust store.
const MSK_SCRAM_PROPERTIES: [(&str, &str); 5] = [
    ("bootstrap.servers", "b-1.msk.example:9096"),
    ("security.protocol", "SASL_SSL"),
    ("sasl.mechanism", "SCRAM-SHA-512"),
    (
        "sasl.jaas.config",
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#,
    ),
    (
        "ssl.truststore.location",
        "/tmp/kafka.client.truststore.jks",
    ),
];

/// What a client does with a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Parsed and stored (or refused for its value, naming it).
    Applied,
    /// Accepted and ignored.
    Ignored,
    /// Refused as an unknown property.
    Unknown,
}

/// What `C`'s table says it does with `key`.
fn expected<C: ClientConfig>(key: &str) -> Outcome {
    match C::SETTINGS.find(key) {
        Some(row) if row.is_applied() => Outcome::Applied,
        Some(_) => Outcome::Ignored,
        None => Outcome::Unknown,
    }
}

/// What `C::from_properties` does with `key=value` beside a bootstrap server.
fn observed<C: ClientConfig + PartialEq + Debug>(
    key: &str,
    value: &str,
) -> Result<Outcome, String> {
    let base = [(BOOTSTRAP_SERVERS, "h:1")];
    let before = C::SETTINGS.configure(base).map_err(|e| format!("{e:?}"))?;
    match C::SETTINGS.configure(base.into_iter().chain([(key, value)])) {
        Ok(after) if after == before => Ok(Outcome::Ignored),
        Ok(_) => Ok(Outcome::Applied),
        Err(Error::Config { setting, reason }) if setting == key => {
            if reason.starts_with("unknown property") {
                Ok(Outcome::Unknown)
            } else {
                Ok(Outcome::Applied)
            }
        }
        Err(other) => Err(format!("{other:?}")),
    }
}

/// A value for `row` other than its default: the client must store it (or refuse it for
/// its value) if it takes the setting.
fn other_value<C>(row: &Setting<C>) -> String {
    match row.kind() {
        "boolean" => (row.default != "true").to_string(),
        "integer" => row
            .default
            .parse::<i64>()
            .map_or(1, |default| default + 1)
            .to_string(),
        "list" => "h:2".to_owned(),
        _ => "x".to_owned(),
    }
}

/// A key `row` matches (a `.*` row: one name under it).
fn key_of<C>(row: &Setting<C>) -> String {
    match row.name.strip_suffix('*') {
        Some(prefix) => format!("{prefix}url"),
        None => row.name.to_owned(),
    }
}

/// The rows of `C` a key finds (a client's own row hides an ignored row of the same name).
fn effective_rows<C: ClientConfig>() -> impl Iterator<Item = &'static Setting<C>> {
    C::SETTINGS.rows().filter(|row| {
        C::SETTINGS
            .find(&key_of(row))
            .is_some_and(|found| std::ptr::eq(found, *row))
    })
}

fn is_security<C>(row: &Setting<C>) -> bool {
    matches!(row.apply, Apply::Security { .. })
}

/// `C`'s README table as the table gives it: one line a setting, security rows left out (the
/// README's Security section has them).
fn readme_table<C: ClientConfig>(client: &str) -> Vec<String> {
    let mut lines = vec![
        format!("| {client} setting | type | default | what it does |"),
        "| --- | --- | --- | --- |".to_owned(),
    ];
    for row in effective_rows::<C>().filter(|row| !is_security(row)) {
        let default = if row.default.is_empty() {
            "—".to_owned()
        } else {
            format!("`{}`", row.default)
        };
        lines.push(format!(
            "| `{}` | {} | {} | {} |",
            row.name,
            row.kind(),
            default,
            row.doc
        ));
    }
    lines
}

/// The README's table that starts with `header`, one line a row.
fn readme_lines(header: &str) -> Vec<&'static str> {
    README
        .lines()
        .skip_while(|line| !line.starts_with(header))
        .take_while(|line| line.starts_with('|'))
        .collect()
}

/// The differences between `C`'s table and the README's, as lines to print.
fn readme_differences<C: ClientConfig>(client: &str) -> Vec<String> {
    let wanted = readme_table::<C>(client);
    let found = readme_lines(&wanted[0]);
    let mut differences = Vec::new();
    for line in &wanted {
        if !found.contains(&line.as_str()) {
            differences.push(format!("{client}: the README lacks {line}"));
        }
    }
    for line in &found {
        if !wanted.iter().any(|wanted| wanted == line) {
            differences.push(format!("{client}: the table lacks {line}"));
        }
    }
    if !differences.is_empty() {
        differences.push(format!(
            "{client}: the table as the README should have it:\n{}",
            wanted.join("\n")
        ));
    }
    differences
}

/// `C`'s rows against what its `from_properties` does, and its defaults against `C::default`.
fn behaviour_differences<C: ClientConfig + PartialEq + Debug>(
    client: &str,
    keys: &[String],
) -> Vec<String> {
    let mut differences = Vec::new();
    for key in keys {
        let wanted = expected::<C>(key);
        let value = match C::SETTINGS.find(key) {
            Some(row) => other_value(row),
            None => "x".to_owned(),
        };
        match observed::<C>(key, &value) {
            Ok(found) if found == wanted => {}
            Ok(found) => differences.push(format!(
                "{client}: {key}={value}: the table says {wanted:?}, from_properties {found:?}"
            )),
            Err(error) => differences.push(format!("{client}: {key}={value}: {error}")),
        }
    }
    for row in effective_rows::<C>().filter(|row| row.is_applied() && !row.default.is_empty()) {
        let mut config = C::default();
        let result = C::SETTINGS.set(&mut config, row.name, row.default);
        if result.is_err() || config != C::default() {
            differences.push(format!(
                "{client}: {}={} is not the default: {result:?}",
                row.name, row.default
            ));
        }
    }
    for row in C::SETTINGS.rows() {
        let takes_it = row.clients.contains(&C::SETTINGS.client);
        if row.is_applied() && !takes_it {
            differences.push(format!(
                "{client}: {} is applied but its row does not name the client",
                row.name
            ));
        }
        if !row.is_applied() && takes_it && expected::<C>(&key_of(row)) != Outcome::Applied {
            differences.push(format!(
                "{client}: {} names the client as taking it, but its table has no row for it",
                row.name
            ));
        }
    }
    differences
}

/// A shared file: every client takes it whole, and what it ignores changes nothing.
fn shared_file_differences<C: ClientConfig + PartialEq + Debug>(
    client: &str,
    file: &[(&str, &str)],
) -> Vec<String> {
    let whole = C::SETTINGS.configure(file.iter().copied());
    let Ok(whole) = whole else {
        return vec![format!("{client}: refuses {file:?}: {whole:?}")];
    };
    let mut differences = Vec::new();
    let mut kept = Vec::new();
    for &(key, value) in file {
        match expected::<C>(key) {
            Outcome::Applied => kept.push((key, value)),
            Outcome::Ignored => {}
            Outcome::Unknown => differences.push(format!("{client}: {key} is not in the table")),
        }
    }
    match C::SETTINGS.configure(kept) {
        Ok(without_ignored) if without_ignored == whole => {}
        other => differences.push(format!(
            "{client}: the settings the table ignores changed the configuration: {other:?}"
        )),
    }
    differences
}

/// The names in the first column of the README's Security table.
fn readme_security_names() -> Vec<&'static str> {
    readme_lines("| property | values |")
        .iter()
        .skip(2)
        .filter_map(|line| line.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .collect()
}

#[test]
fn settings_table_matches_readme() {
    let mut differences = Vec::new();
    differences.extend(readme_differences::<ProducerConfig>("producer"));
    differences.extend(readme_differences::<ConsumerConfig>("consumer"));
    differences.extend(readme_differences::<AdminConfig>("admin"));

    let security: Vec<&str> = ProducerConfig::SETTINGS
        .rows()
        .filter(|row| is_security(row))
        .map(|row| row.name)
        .collect();
    let mut in_readme = readme_security_names();
    in_readme.sort_unstable();
    let mut in_table = security.clone();
    in_table.sort_unstable();
    if in_readme != in_table {
        differences.push(format!(
            "security: the README's table names {in_readme:?}, the settings table {in_table:?}"
        ));
    }

    // Every name any client's table has, and the shared files' names: each client does with
    // each what its table says.
    let mut keys: Vec<String> = ProducerConfig::SETTINGS
        .rows()
        .map(key_of)
        .chain(ConsumerConfig::SETTINGS.rows().map(key_of))
        .chain(AdminConfig::SETTINGS.rows().map(key_of))
        .chain(
            CONFLUENT_CLOUD_PROPERTIES
                .iter()
                .map(|(key, _)| key.to_string()),
        )
        .chain(MSK_SCRAM_PROPERTIES.iter().map(|(key, _)| key.to_string()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    differences.extend(behaviour_differences::<ProducerConfig>("producer", &keys));
    differences.extend(behaviour_differences::<ConsumerConfig>("consumer", &keys));
    differences.extend(behaviour_differences::<AdminConfig>("admin", &keys));
    let mut files = vec![&CONFLUENT_CLOUD_PROPERTIES[..]];
    // SASL_SSL with SCRAM validates only in a build that has both.
    if cfg!(all(feature = "tls", feature = "sasl-scram")) {
        files.push(&MSK_SCRAM_PROPERTIES[..]);
    }
    for file in files {
        differences.extend(shared_file_differences::<ProducerConfig>("producer", file));
        differences.extend(shared_file_differences::<ConsumerConfig>("consumer", file));
        differences.extend(shared_file_differences::<AdminConfig>("admin", file));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn an_ignored_name_is_no_suggestion_but_an_applied_one_is() {
    // `group.idd` is one edit from the consumer's `group.id`, which the producer ignores:
    // the producer suggests nothing, the consumer suggests it.
    let reason = |result: Result<(), Error>| match result {
        Err(Error::Config { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    let mut producer = ProducerConfig::default();
    assert_eq!(reason(producer.set("group.idd", "g")), "unknown property");
    let mut consumer = ConsumerConfig::default();
    assert_eq!(
        reason(consumer.set("group.idd", "g")),
        "unknown property; did you mean \"group.id\"?"
    );
}

#[test]
fn a_prefix_row_takes_every_name_under_it_and_only_those() {
    let mut admin = AdminConfig::default();
    admin.set("schema.registry.url", "https://sr").unwrap();
    admin.set("basic.auth.user.info", "k:s").unwrap();
    assert_eq!(admin, AdminConfig::default());
    assert!(admin.set("schema.registryurl", "x").is_err());
}
