//! Parsing and checking of Kafka property values, shared by [`crate::ProducerConfig`],
//! [`crate::ConsumerConfig`] and [`crate::AdminConfig`] (through their settings tables,
//! `settings.rs`): values parsed as Java's `ConfigDef` parses its types, every error naming the
//! property at fault. Nothing here knows which settings there are.

use std::str::FromStr;

use crate::error::Error;

/// A configuration error about `setting`.
pub(crate) fn config_error(setting: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        setting: setting.to_owned(),
        reason: reason.into(),
    }
}

/// The error for a property we do not know, suggesting the name among `known` closest to it
/// when it is at most two edits away (a typo rather than another client's setting).
pub(crate) fn unknown_property<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> Error {
    let closest = known
        .into_iter()
        .map(|name| (edit_distance(key, name), name))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance);
    let reason = match closest {
        Some((_, name)) => format!("unknown property; did you mean {name:?}?"),
        None => "unknown property".to_owned(),
    };
    config_error(key, reason)
}

/// Levenshtein distance between two strings, by characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // `row[j]`: distance between the prefix of `a` read so far and `b[..j]`.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut diagonal = i;
        row[0] = i + 1;
        for (j, b_char) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(a_char != *b_char);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// A Java `BOOLEAN`: `true` or `false`, any case.
pub(crate) fn parse_bool(setting: &str, value: &str) -> Result<bool, Error> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(config_error(
            setting,
            format!("expected true or false, got {value:?}"),
        ))
    }
}

/// A non-negative decimal integer (every numeric producer setting has `atLeast(0)` in Java).
pub(crate) fn parse_number<T: FromStr>(setting: &str, value: &str) -> Result<T, Error> {
    value.parse().map_err(|_| {
        config_error(
            setting,
            format!("expected a non-negative integer, got {value:?}"),
        )
    })
}

/// A decimal integer, possibly negative (the compression levels: zstd's go below zero).
pub(crate) fn parse_signed(setting: &str, value: &str) -> Result<i32, Error> {
    value
        .parse()
        .map_err(|_| config_error(setting, format!("expected an integer, got {value:?}")))
}

/// One of a fixed set of lower-case names, matched in any case (Java's `ValidString` after
/// `CaseInsensitiveValidString`); the error lists the names in the order given.
pub(crate) fn parse_choice<T: Copy>(
    setting: &str,
    value: &str,
    choices: &[(&str, T)],
) -> Result<T, Error> {
    let lower = value.to_ascii_lowercase();
    if let Some((_, choice)) = choices.iter().find(|(name, _)| *name == lower) {
        return Ok(*choice);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let expected = match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(config_error(
        setting,
        format!("expected {expected}, got {value:?}"),
    ))
}

/// The entries of a Java `LIST` (comma-separated), each trimmed.
pub(crate) fn list_entries(value: &str) -> impl Iterator<Item = String> + '_ {
    value.split(',').map(|entry| entry.trim().to_owned())
}

/// `bootstrap.servers`: at least one entry, each `host:port` (Java:
/// `ClientUtils.parseAndValidateAddresses`).
pub(crate) fn check_bootstrap_servers(setting: &str, servers: &[String]) -> Result<(), Error> {
    if servers.is_empty() {
        return Err(config_error(setting, "is required: at least one host:port"));
    }
    for address in servers {
        check_address(address).map_err(|reason| {
            config_error(setting, format!("invalid address {address:?}: {reason}"))
        })?;
    }
    Ok(())
}

/// The host of `host:port`, without the brackets of an IPv6 address: the name TLS checks,
/// AWS_MSK_IAM signs for and GSSAPI names the broker's principal with.
#[cfg(any(feature = "tls", feature = "aws-msk-iam", feature = "gssapi"))]
pub(crate) fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Checks one `host:port`. The host takes the characters Java's `Utils.getHost` pattern
/// accepts (`[0-9a-zA-Z\-%._:]`); an IPv6 address must be in brackets (`[::1]:9092`), since
/// without them its last group could not be told from the port. The port is 1 to 65535.
pub(crate) fn check_address(address: &str) -> Result<(), &'static str> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or("expected host:port (an IPv6 address as [address]:port)")?;
    let host_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '%' | '.' | '_');
    let host_ok = match host.strip_prefix('[') {
        Some(bracketed) => bracketed
            .strip_suffix(']')
            .is_some_and(|ip| !ip.is_empty() && ip.chars().all(|c| host_char(c) || c == ':')),
        None => !host.is_empty() && host.chars().all(host_char),
    };
    if !host_ok {
        return Err("invalid host (an IPv6 address must be written as [address]:port)");
    }
    let port_ok = !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok_and(|port| port != 0);
    if !port_ok {
        return Err("the port must be a number from 1 to 65535");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(any(feature = "tls", feature = "aws-msk-iam"))]
    fn tls_names_the_host_without_port_or_brackets() {
        assert_eq!(host_of("broker-1.example:9092"), "broker-1.example");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(
            host_of("b-1.kafka.us-east-1.amazonaws.com:9098"),
            "b-1.kafka.us-east-1.amazonaws.com"
        );
    }

    #[test]
    fn choices_match_any_case_and_list_every_name_on_error() {
        let choices = [("earliest", 0), ("latest", 1), ("none", 2)];
        assert_eq!(parse_choice("s", "LATEST", &choices).unwrap(), 1);
        match parse_choice("s", "smallest", &choices) {
            Err(Error::Config { setting, reason }) => {
                assert_eq!(setting, "s");
                assert_eq!(
                    reason,
                    "expected earliest, latest or none, got \"smallest\""
                );
            }
            other => panic!("{other:?}"),
        }
        match parse_choice("s", "x", &choices[..2]) {
            Err(Error::Config { reason, .. }) => {
                assert_eq!(reason, "expected earliest or latest, got \"x\"")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions() {
        assert_eq!(edit_distance("acks", "acks"), 0);
        assert_eq!(edit_distance("ack", "acks"), 1);
        assert_eq!(edit_distance("acks", "ack"), 1);
        assert_eq!(edit_distance("acks", "axks"), 1);
        assert_eq!(edit_distance("", "acks"), 4);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
