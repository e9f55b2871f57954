//! The producer configuration's parsing and validation, against Kafka's property names.

use super::*;
use crate::net::security::{SaslMechanism, SecurityProtocol};
use crate::net::settings::{
    ENABLE_METRICS_PUSH, METADATA_MAX_AGE_MS, RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_MS,
    RETRY_BACKOFF_MS,
};

/// The setting named by a configuration error.
fn setting_of(result: Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Err(Error::Config { setting, .. }) => setting,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

fn with(props: &[(&str, &str)]) -> Result<ProducerConfig, Error> {
    let base = [(BOOTSTRAP_SERVERS, "127.0.0.1:9092")];
    ProducerConfig::from_properties(base.iter().chain(props).copied())
}

#[test]
fn defaults_are_the_java_producers() {
    let config = with(&[]).unwrap();
    assert_eq!(config.bootstrap_servers, vec!["127.0.0.1:9092"]);
    assert_eq!(
        config.client_id, "",
        "empty: numbered when the producer is built"
    );
    assert!(config.enable_idempotence);
    assert_eq!(config.acks, Acks::All);
    assert_eq!(config.linger_ms, 5);
    assert_eq!(config.batch_size, 16384);
    assert_eq!(config.buffer_memory, 33_554_432);
    assert_eq!(config.max_in_flight_requests_per_connection, 5);
    assert_eq!(config.retries, 2_147_483_647);
    assert_eq!(config.retry_backoff_ms, 100);
    assert_eq!(config.retry_backoff_max_ms, 1000);
    assert_eq!(config.delivery_timeout_ms, 120_000);
    assert_eq!(config.request_timeout_ms, 30_000);
    assert_eq!(config.max_request_size, 1_048_576);
    assert_eq!(config.produce_request_max_bytes, 16 * 1_048_576);
    assert_eq!(config.metadata_max_age_ms, 300_000);
    assert_eq!(config.max_block_ms, 60_000);
    assert_eq!(config.transactional_id, None);
    assert_eq!(config.transaction_timeout_ms, 60_000);
}

#[test]
fn default_config_lacks_bootstrap_servers() {
    assert_eq!(
        setting_of(ProducerConfig::default().validate()),
        BOOTSTRAP_SERVERS
    );
    assert_eq!(
        setting_of(ProducerBuilder::new().config()),
        BOOTSTRAP_SERVERS
    );
}

#[test]
fn every_property_parses() {
    let properties = [
        (BOOTSTRAP_SERVERS, " a.example:9092, [::1]:9093 ,10.0.0.1:1"),
        (CLIENT_ID, " app-1 "),
        (ENABLE_IDEMPOTENCE, "TRUE"),
        (ACKS, "-1"),
        (LINGER_MS, "20"),
        (BATCH_SIZE, "65536"),
        (BUFFER_MEMORY, "1048576"),
        (MAX_IN_FLIGHT, "3"),
        (RETRIES, "7"),
        (RETRY_BACKOFF_MS, "50"),
        (RETRY_BACKOFF_MAX_MS, "2000"),
        (RECONNECT_BACKOFF_MS, "25"),
        (RECONNECT_BACKOFF_MAX_MS, "4000"),
        (DELIVERY_TIMEOUT_MS, "90000"),
        (REQUEST_TIMEOUT_MS, "10000"),
        (MAX_REQUEST_SIZE, "2097152"),
        (PRODUCE_REQUEST_MAX_BYTES, "8388608"),
        (METADATA_MAX_AGE_MS, "60000"),
        (MAX_BLOCK_MS, "5000"),
        (TRANSACTIONAL_ID, "copy-1"),
        (TRANSACTION_TIMEOUT_MS, "30000"),
        (compression::COMPRESSION_CODEC, "lz4"),
        (compression::COMPRESSION_TYPE, "none"),
        (compression::GZIP_LEVEL, "9"),
        (compression::LZ4_LEVEL, "1"),
        (compression::ZSTD_LEVEL, "7"),
        (ENABLE_METRICS_PUSH, "false"),
    ];
    // Every row of the producer's own and shared (the security ones have their tests).
    for row in SETTINGS.rows() {
        if row.is_applied() && !matches!(row.apply, Apply::Security { .. }) {
            assert!(
                properties.iter().any(|(key, _)| *key == row.name),
                "{} is not covered",
                row.name
            );
        }
    }
    let config = ProducerConfig::from_properties(properties).unwrap();
    assert_eq!(
        config.bootstrap_servers,
        vec!["a.example:9092", "[::1]:9093", "10.0.0.1:1"]
    );
    assert_eq!(config.client_id, "app-1");
    assert!(config.enable_idempotence);
    assert_eq!(config.acks, Acks::All);
    assert_eq!(config.linger_ms, 20);
    assert_eq!(config.batch_size, 65536);
    assert_eq!(config.buffer_memory, 1_048_576);
    assert_eq!(config.max_in_flight_requests_per_connection, 3);
    assert_eq!(config.retries, 7);
    assert_eq!(config.retry_backoff_ms, 50);
    assert_eq!(config.retry_backoff_max_ms, 2000);
    assert_eq!(config.reconnect_backoff_ms, 25);
    assert_eq!(config.reconnect_backoff_max_ms, 4000);
    assert_eq!(config.delivery_timeout_ms, 90_000);
    assert_eq!(config.request_timeout_ms, 10_000);
    assert_eq!(config.max_request_size, 2_097_152);
    assert_eq!(config.produce_request_max_bytes, 8_388_608);
    assert_eq!(config.metadata_max_age_ms, 60_000);
    assert_eq!(config.max_block_ms, 5000);
    assert_eq!(config.transactional_id.as_deref(), Some("copy-1"));
    assert_eq!(config.transaction_timeout_ms, 30_000);
    // The later of the two codec names wins (whichever codecs this build has).
    assert_eq!(config.compression.compression(), Compression::None);
    assert_eq!(config.compression.gzip_level, 9);
    assert_eq!(config.compression.lz4_level, 1);
    assert_eq!(config.compression.zstd_level, 7);
    assert!(!config.enable_metrics_push);
}

#[test]
fn acks_values_and_wire_form() {
    for (text, acks, wire) in [
        ("all", Acks::All, -1),
        ("-1", Acks::All, -1),
        ("1", Acks::Leader, 1),
        ("0", Acks::None, 0),
    ] {
        assert_eq!(text.parse::<Acks>().unwrap(), acks);
        assert_eq!(acks.as_i16(), wire);
    }
    // Java's validator is `in("all", "-1", "0", "1")`, case-sensitive.
    for bad in ["ALL", "2", "leader", ""] {
        assert_eq!(setting_of(bad.parse::<Acks>()), ACKS);
    }
    let config = with(&[(ENABLE_IDEMPOTENCE, "false"), (ACKS, "1")]).unwrap();
    assert_eq!(config.acks, Acks::Leader);
}

#[test]
fn malformed_values_name_the_property_and_the_value() {
    for (key, value) in [
        (ENABLE_IDEMPOTENCE, "yes"),
        (LINGER_MS, "-1"),
        (BATCH_SIZE, "16k"),
        (RETRIES, "4294967296"),
        (REQUEST_TIMEOUT_MS, ""),
        (ACKS, "2"),
    ] {
        match with(&[(key, value)]) {
            Err(Error::Config { setting, reason }) => {
                assert_eq!(setting, key);
                assert!(reason.contains(&format!("{value:?}")), "{reason}");
            }
            other => panic!("{key}={value}: {other:?}"),
        }
    }
}

#[test]
fn unknown_property_suggests_the_closest_name() {
    match with(&[("linger.msec", "5")]) {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "linger.msec");
            assert!(reason.contains("\"linger.ms\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match with(&[("enable.idempotency", "true")]) {
        Err(Error::Config { reason, .. }) => {
            assert!(reason.contains("\"enable.idempotence\""), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Another client's setting, not a typo: no suggestion.
    match with(&[("key.serializer", "x")]) {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "key.serializer");
            assert_eq!(reason, "unknown property");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_clients_settings_are_ignored_but_typos_are_not() {
    let config = with(&[
        ("client.dns.lookup", "use_all_dns_ips"),
        ("session.timeout.ms", "45000"),
        ("schema.registry.url", "https://sr.example"),
        ("basic.auth.credentials.source", "USER_INFO"),
        ("basic.auth.user.info", "key:secret"),
    ])
    .unwrap();
    assert_eq!(config, with(&[]).unwrap());
    match with(&[("sasl.mechanisim", "PLAIN")]) {
        Err(Error::Config { reason, .. }) => {
            assert!(reason.contains("\"sasl.mechanism\""), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// AWS MSK's client.properties for SASL/SCRAM (its brokers present public certificates,
/// trusted by the built-in roots).
#[test]
#[cfg(all(feature = "tls", feature = "sasl-scram"))]
fn msk_scram_properties_parse() {
    let config = with(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#,
        ),
    ])
    .unwrap();
    assert_eq!(config.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(
        config.security.sasl.mechanism,
        Some(SaslMechanism::ScramSha512)
    );
    assert_eq!(config.security.tls.ca, None);
    assert!(!format!("{config:?}").contains("alice-secret"));
}

#[test]
fn idempotence_contradictions_name_the_contradicting_setting() {
    assert_eq!(setting_of(with(&[(ACKS, "1")])), ACKS);
    assert_eq!(setting_of(with(&[(ACKS, "0")])), ACKS);
    assert_eq!(setting_of(with(&[(MAX_IN_FLIGHT, "6")])), MAX_IN_FLIGHT);
    assert_eq!(setting_of(with(&[(RETRIES, "0")])), RETRIES);
    // Without idempotence, the same settings are fine.
    let relaxed = with(&[
        (ENABLE_IDEMPOTENCE, "false"),
        (ACKS, "0"),
        (MAX_IN_FLIGHT, "6"),
        (RETRIES, "0"),
    ]);
    assert!(relaxed.is_ok(), "{relaxed:?}");
}

#[test]
fn transactional_id_rules() {
    assert_eq!(
        setting_of(with(&[
            (ENABLE_IDEMPOTENCE, "false"),
            (TRANSACTIONAL_ID, "t")
        ])),
        TRANSACTIONAL_ID
    );
    assert_eq!(
        setting_of(with(&[(TRANSACTIONAL_ID, "  ")])),
        TRANSACTIONAL_ID
    );
    let long = "t".repeat(STRING_MAX_BYTES + 1);
    assert_eq!(
        setting_of(with(&[(TRANSACTIONAL_ID, &long)])),
        TRANSACTIONAL_ID
    );
    let longest = "t".repeat(STRING_MAX_BYTES);
    assert!(with(&[(TRANSACTIONAL_ID, &longest)]).is_ok());
}

#[test]
fn client_id_is_free_form_but_bounded() {
    assert!(with(&[(CLIENT_ID, "any thing/é:1")]).is_ok());
    assert!(with(&[(CLIENT_ID, "")]).is_ok());
    let long = "c".repeat(STRING_MAX_BYTES + 1);
    assert_eq!(setting_of(with(&[(CLIENT_ID, &long)])), CLIENT_ID);
}

#[test]
fn delivery_timeout_must_cover_linger_and_request_timeout() {
    assert_eq!(
        setting_of(with(&[
            (LINGER_MS, "1000"),
            (REQUEST_TIMEOUT_MS, "30000"),
            (DELIVERY_TIMEOUT_MS, "30999")
        ])),
        DELIVERY_TIMEOUT_MS
    );
    assert!(
        with(&[
            (LINGER_MS, "1000"),
            (REQUEST_TIMEOUT_MS, "30000"),
            (DELIVERY_TIMEOUT_MS, "31000")
        ])
        .is_ok()
    );
    // Java clamps linger + request timeout to Integer.MAX_VALUE.
    assert!(
        with(&[
            (LINGER_MS, &u64::MAX.to_string()),
            (DELIVERY_TIMEOUT_MS, "2147483647")
        ])
        .is_ok()
    );
}

#[test]
fn ranges() {
    assert_eq!(setting_of(with(&[(MAX_IN_FLIGHT, "0")])), MAX_IN_FLIGHT);
    assert_eq!(setting_of(with(&[(BATCH_SIZE, "0")])), BATCH_SIZE);
    // Java INT properties stop at Integer.MAX_VALUE.
    for setting in [
        BATCH_SIZE,
        RETRIES,
        DELIVERY_TIMEOUT_MS,
        REQUEST_TIMEOUT_MS,
        MAX_REQUEST_SIZE,
        TRANSACTION_TIMEOUT_MS,
    ] {
        assert_eq!(setting_of(with(&[(setting, "2147483648")])), setting);
    }
    assert_eq!(
        setting_of(with(&[
            (ENABLE_IDEMPOTENCE, "false"),
            (MAX_IN_FLIGHT, "2147483648")
        ])),
        MAX_IN_FLIGHT
    );
    // Java LONG properties go further.
    assert!(with(&[(MAX_BLOCK_MS, "2147483648")]).is_ok());
    // The builder's durations are checked the same way.
    assert_eq!(
        setting_of(
            ProducerBuilder::new()
                .bootstrap("h:1")
                .transaction_timeout(Duration::from_secs(3_000_000))
                .config()
        ),
        TRANSACTION_TIMEOUT_MS
    );
}

#[test]
fn bootstrap_addresses() {
    for good in [
        "localhost:9092",
        "127.0.0.1:1",
        "[::1]:65535",
        "[fe80::b1da:69ca:57f7:63d8%3]:5678",
        "My_Domain.com:8080",
        "a:1,b:2",
    ] {
        assert!(with(&[(BOOTSTRAP_SERVERS, good)]).is_ok(), "{good}");
    }
    for bad in [
        "",
        "localhost",
        "localhost:",
        ":9092",
        "localhost:0",
        "localhost:65536",
        "localhost:+80",
        "::1:9092",
        "[::1:9092",
        "[]:9092",
        "PLAINTEXT://localhost:9092",
        "host name:9092",
        "a:1,,b:2",
        "a:1,",
    ] {
        assert_eq!(
            setting_of(with(&[(BOOTSTRAP_SERVERS, bad)])),
            BOOTSTRAP_SERVERS,
            "{bad:?}"
        );
    }
}

#[test]
fn builder_and_properties_give_equal_configs() {
    let from_builder = ProducerBuilder::new()
        .bootstrap("b1:9092,b2:9092")
        .client_id("app")
        .idempotence(true)
        .acks(Acks::All)
        .linger(Duration::from_millis(10))
        .batch_size(32768)
        .buffer_memory(1 << 20)
        .max_in_flight(2)
        .retries(9)
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(500))
        .delivery_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(20))
        .max_request_size(500_000)
        .produce_request_max_bytes(4_000_000)
        .metadata_max_age(Duration::from_secs(30))
        .max_block(Duration::from_secs(2))
        .transactional_id("copy-1")
        .transaction_timeout(Duration::from_secs(45))
        .config()
        .unwrap();
    let from_properties = ProducerConfig::from_properties([
        ("bootstrap.servers", "b1:9092,b2:9092"),
        ("client.id", "app"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("linger.ms", "10"),
        ("batch.size", "32768"),
        ("buffer.memory", "1048576"),
        ("max.in.flight.requests.per.connection", "2"),
        ("retries", "9"),
        ("retry.backoff.ms", "20"),
        ("retry.backoff.max.ms", "500"),
        ("delivery.timeout.ms", "60000"),
        ("request.timeout.ms", "20000"),
        ("max.request.size", "500000"),
        ("produce.request.max.bytes", "4000000"),
        ("metadata.max.age.ms", "30000"),
        ("max.block.ms", "2000"),
        ("transactional.id", "copy-1"),
        ("transaction.timeout.ms", "45000"),
    ])
    .unwrap();
    assert_eq!(from_builder, from_properties);

    let by_property = ProducerBuilder::new()
        .property("bootstrap.servers", "b1:9092,b2:9092")
        .property("linger.ms", "10")
        .config()
        .unwrap();
    let typed = ProducerBuilder::new()
        .bootstrap("b1:9092,b2:9092")
        .linger(Duration::from_millis(10))
        .config()
        .unwrap();
    assert_eq!(by_property, typed);
}

#[test]
fn a_request_cap_below_the_largest_batch_is_refused() {
    let result = ProducerBuilder::new()
        .bootstrap("h:1")
        .max_request_size(2 << 20)
        .produce_request_max_bytes(1 << 20)
        .config();
    assert_eq!(setting_of(result), PRODUCE_REQUEST_MAX_BYTES);
}

#[test]
fn builder_reports_the_first_bad_property() {
    let result = ProducerBuilder::new()
        .bootstrap("h:1")
        .property("lingr.ms", "5")
        .property("batch.size", "lots")
        .config();
    match result {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "lingr.ms");
            assert!(reason.contains("\"linger.ms\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A later valid setting does not clear the remembered error.
    let result = ProducerBuilder::new()
        .property("acks", "most")
        .bootstrap("h:1")
        .acks(Acks::All)
        .config();
    assert_eq!(setting_of(result), ACKS);
}

#[test]
fn durations_are_whole_milliseconds() {
    assert_eq!(millis(Duration::from_micros(1999)), 1);
    assert_eq!(millis(Duration::MAX), u64::MAX);
}
