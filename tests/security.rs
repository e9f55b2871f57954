//! TLS and SASL against the test bed's security listeners (`scripts/testbed`): SSL,
//! SSL with client certificates required, SASL_SSL (PLAIN, SCRAM-SHA-256/512) and
//! SASL_PLAINTEXT with OAUTHBEARER (Kafka's unsecured validator, and its JWT validator with the
//! test bed's identity provider, KIP-768) and with GSSAPI (the test bed's Kerberos KDC), each
//! behind its own Toxiproxy proxy. Every produce test
//! reads the topic back with kcat (librdkafka) over the same listener, with the same kind of
//! credentials, and checks exactly-once delivery in order (`support::delivery`).
//!
//! A test that cuts a listener's proxy holds the cluster's lock exclusively (other tests here
//! share it), across awaits on purpose (see `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]
// The tests use every mechanism; they are built with the default features (all on).
#![cfg(all(feature = "tls", feature = "sasl-scram", feature = "sasl-oauthbearer"))]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use exactly::{
    Error, OAuthBearerToken, OAuthBearerTokenProvider, Producer, ProducerBuilder, Record,
    SaslMechanism, SecurityProtocol,
};
use support::delivery::Run;
use support::logs::Captured;
use support::{Cluster, Isolation, in_ci, kcat_read_with};

const RESOLVE_LIMIT: Duration = Duration::from_secs(90);
/// How fast an authentication or certificate failure must reach the user (T5).
const FATAL_WITHIN: Duration = Duration::from_secs(5);

/// The security side of the test bed, from the variables `scripts/testbed up` exports.
struct Bed {
    ssl: String,
    mtls: String,
    sasl_ssl: String,
    oauth: String,
    /// The OAUTHBEARER listener that checks RS256 JWTs of the test bed's identity provider.
    oidc: String,
    /// The GSSAPI (Kerberos) listener.
    #[cfg_attr(not(feature = "gssapi"), allow(dead_code))]
    gssapi: String,
    /// That provider's client-credentials token endpoint, and its client.
    token_url: String,
    oidc_client_id: String,
    oidc_client_secret: String,
    ca: String,
    untrusted_ca: String,
    client_cert: String,
    client_key: String,
    user: String,
    password: String,
    broker_log: String,
}

impl Bed {
    /// The listeners of `cluster`; `None` (a skip) when they are not there, except under
    /// `CI=true`, where that is a failure.
    fn of(cluster: &Cluster) -> Option<Bed> {
        let mut suffix = String::new();
        if cluster.brokers == 3 {
            suffix.push_str("_3");
        }
        if cluster.txn_version == 1 {
            suffix.push_str("_TV1");
        }
        let var = |name: &str| std::env::var(name).ok();
        let bed = (|| {
            Some(Bed {
                ssl: var(&format!("KAFKA_SSL_BOOTSTRAP{suffix}"))?,
                mtls: var(&format!("KAFKA_MTLS_BOOTSTRAP{suffix}"))?,
                sasl_ssl: var(&format!("KAFKA_SASL_SSL_BOOTSTRAP{suffix}"))?,
                oauth: var(&format!("KAFKA_OAUTH_BOOTSTRAP{suffix}"))?,
                oidc: var(&format!("KAFKA_OIDC_BOOTSTRAP{suffix}"))?,
                gssapi: var(&format!("KAFKA_GSSAPI_BOOTSTRAP{suffix}"))?,
                token_url: var("KAFKA_OIDC_TOKEN_URL")?,
                oidc_client_id: var("KAFKA_OIDC_CLIENT_ID")?,
                oidc_client_secret: var("KAFKA_OIDC_CLIENT_SECRET")?,
                ca: var("KAFKA_TLS_CA")?,
                untrusted_ca: var("KAFKA_TLS_UNTRUSTED_CA")?,
                client_cert: var("KAFKA_TLS_CLIENT_CERT")?,
                client_key: var("KAFKA_TLS_CLIENT_KEY")?,
                user: var("KAFKA_SASL_USERNAME")?,
                password: var("KAFKA_SASL_PASSWORD")?,
                broker_log: format!(
                    "{}/broker0/logs/server.log",
                    var(&format!("KAFKA_CLUSTER_DIR{suffix}"))?
                ),
            })
        })();
        let reachable = bed.as_ref().is_some_and(|bed| {
            let first = bed.sasl_ssl.split(',').next().unwrap_or_default();
            std::net::TcpStream::connect(first).is_ok() && std::path::Path::new(&bed.ca).exists()
        });
        if !reachable {
            assert!(
                !in_ci(),
                "CI=true but the security listeners are not up; `scripts/testbed up` starts them"
            );
            eprintln!("SKIPPED: no security listeners; eval \"$(scripts/testbed up)\" first");
            return None;
        }
        bed
    }

    /// kcat's arguments for a listener: the same protocol and credentials as the producer's.
    fn kcat_args(&self, listener: Listener) -> Vec<String> {
        let x = |setting: String| ["-X".to_owned(), setting];
        let mut args = Vec::new();
        match listener {
            Listener::Ssl => {
                args.extend(x("security.protocol=SSL".into()));
                args.extend(x(format!("ssl.ca.location={}", self.ca)));
            }
            Listener::Mtls => {
                args.extend(x("security.protocol=SSL".into()));
                args.extend(x(format!("ssl.ca.location={}", self.ca)));
                args.extend(x(format!("ssl.certificate.location={}", self.client_cert)));
                args.extend(x(format!("ssl.key.location={}", self.client_key)));
            }
            // kcat logs in with PLAIN whatever the producer used: Debian's kcat links
            // librdkafka 2.0.2, whose SCRAM client-final message repeats the client nonce,
            // which Kafka 4.x rejects as invalid credentials (fixed in librdkafka 2.6.1,
            // confluentinc/librdkafka#4895; edenhill/kcat#462). It still reads over the same
            // SASL_SSL listener and proxy.
            Listener::SaslSsl => {
                args.extend(x("security.protocol=SASL_SSL".into()));
                args.extend(x(format!("ssl.ca.location={}", self.ca)));
                args.extend(x("sasl.mechanisms=PLAIN".into()));
                args.extend(x(format!("sasl.username={}", self.user)));
                args.extend(x(format!("sasl.password={}", self.password)));
            }
            Listener::OAuth => {
                args.extend(x("security.protocol=SASL_PLAINTEXT".into()));
                args.extend(x("sasl.mechanisms=OAUTHBEARER".into()));
                args.extend(x("enable.sasl.oauthbearer.unsecure.jwt=true".into()));
                args.extend(x("sasl.oauthbearer.config=principal=kcat".into()));
            }
        }
        args
    }

    fn bootstrap(&self, listener: Listener) -> &str {
        match listener {
            Listener::Ssl => &self.ssl,
            Listener::Mtls => &self.mtls,
            Listener::SaslSsl => &self.sasl_ssl,
            Listener::OAuth => &self.oauth,
        }
    }

    /// Reads `topic` with kcat over `listener`.
    fn read(
        &self,
        listener: Listener,
        topic: &str,
        isolation: Isolation,
    ) -> Vec<support::ConsumedRecord> {
        kcat_read_with(
            self.bootstrap(listener),
            topic,
            isolation,
            &self.kcat_args(listener),
        )
    }

    /// Lines of the broker's log saying an authentication failed.
    fn failed_authentications(&self) -> usize {
        self.broker_log_lines("Failed authentication with")
    }

    /// Lines of the broker's log holding `text`.
    fn broker_log_lines(&self, text: &str) -> usize {
        std::fs::read_to_string(&self.broker_log)
            .map(|log| log.matches(text).count())
            .unwrap_or(0)
    }
}

/// What the broker logs for each connection that is not TLS on a TLS listener.
const BROKER_TLS_HANDSHAKE_FAILED: &str = "(SSL handshake failed)";
/// What the broker logs for each TLS ClientHello on a plaintext listener: it reads the TLS
/// record header as a request size of 369 MB.
const BROKER_OVERSIZED_REQUEST: &str = "InvalidReceiveException: Invalid receive";

#[derive(Debug, Clone, Copy)]
enum Listener {
    Ssl,
    Mtls,
    SaslSsl,
    OAuth,
}

/// A builder with the test bed's short timeouts.
fn builder(bootstrap: &str) -> ProducerBuilder {
    Producer::builder()
        .bootstrap(bootstrap)
        .linger(Duration::from_millis(5))
        .request_timeout(Duration::from_secs(3))
        .delivery_timeout(Duration::from_secs(30))
        .retry_backoff(Duration::from_millis(50))
}

/// Properties for the SASL_SSL listener with a JAAS line, as a Java user writes them.
fn jaas_properties(bed: &Bed, mechanism: SaslMechanism) -> Vec<(String, String)> {
    let module = match mechanism {
        SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        _ => "org.apache.kafka.common.security.scram.ScramLoginModule",
    };
    vec![
        ("bootstrap.servers".into(), bed.sasl_ssl.clone()),
        ("security.protocol".into(), "SASL_SSL".into()),
        ("ssl.truststore.type".into(), "PEM".into()),
        ("ssl.truststore.location".into(), bed.ca.clone()),
        ("sasl.mechanism".into(), mechanism.name().into()),
        (
            "sasl.jaas.config".into(),
            format!(
                r#"{module} required username="{}" password="{}";"#,
                bed.user, bed.password
            ),
        ),
        ("linger.ms".into(), "5".into()),
        ("request.timeout.ms".into(), "3000".into()),
        ("delivery.timeout.ms".into(), "30000".into()),
    ]
}

/// An unsigned JWT (`alg: none`) for Kafka's unsecured OAUTHBEARER validator.
fn unsecured_jwt(subject: &str, lifetime: Duration) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(
        r#"{{"sub":"{subject}","iat":{now},"exp":{}}}"#,
        now + lifetime.as_secs()
    ));
    format!("{header}.{claims}.")
}

fn oauth_provider(calls: Arc<Mutex<usize>>) -> OAuthBearerTokenProvider {
    OAuthBearerTokenProvider::new(move || {
        let calls = Arc::clone(&calls);
        async move {
            *calls.lock().unwrap() += 1;
            Ok(
                OAuthBearerToken::new(unsecured_jwt("exactly", Duration::from_secs(3600)))
                    .extension("traceId", "trace-1"),
            )
        }
    })
}

/// Sends `count` numbered records idempotently, then checks with kcat over the same listener
/// that each is in the log exactly once, in order.
async fn produce_and_verify(
    producer: Producer,
    bed: &Bed,
    listener: Listener,
    topic: &str,
    count: u64,
) {
    let mut run = Run::default();
    let futures = Run::send_range(&producer, topic, 0, count, false).await;
    run.collect(futures, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();
    assert_eq!(
        run.tally(),
        (count as usize, 0, 0),
        "{:?}",
        run.errors().first()
    );
    let log = bed.read(listener, topic, Isolation::ReadUncommitted);
    assert_eq!(
        log.len(),
        count as usize,
        "kcat over {listener:?} reads every record"
    );
    run.verify_records(&log, topic);
}

/// The cluster and its listeners, or return (a skip) when they are not up.
macro_rules! bed {
    ($cluster:expr) => {{
        let Some(cluster) = $cluster else { return };
        let Some(bed) = Bed::of(&cluster) else { return };
        (cluster, bed)
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_ssl() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("ssl");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = Producer::from_properties([
        ("bootstrap.servers", bed.ssl.as_str()),
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", bed.ca.as_str()),
        ("linger.ms", "5"),
    ])
    .await
    .unwrap();
    produce_and_verify(producer, &bed, Listener::Ssl, &topic, 10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_mtls() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("mtls");
    cluster.create_topic(&topic, 3, 1, &[]);
    // Key material given inline (Java's ssl.keystore.certificate.chain / ssl.keystore.key).
    let read = |path: &str| std::fs::read_to_string(path).unwrap();
    let producer = Producer::from_properties([
        ("bootstrap.servers", bed.mtls.clone()),
        ("security.protocol", "SSL".into()),
        ("ssl.truststore.type", "PEM".into()),
        ("ssl.truststore.certificates", read(&bed.ca)),
        ("ssl.keystore.type", "PEM".into()),
        ("ssl.keystore.certificate.chain", read(&bed.client_cert)),
        ("ssl.keystore.key", read(&bed.client_key)),
    ])
    .await
    .unwrap();
    produce_and_verify(producer, &bed, Listener::Mtls, &topic, 10_000).await;
}

/// The test bed's client certificate and CA in the stores a Java client is given: a PKCS#12
/// key store made by OpenSSL, a JKS key store converted from it by keytool, and PKCS#12 and
/// JKS trust stores made by `keytool -importcert`. Returns their paths in a fresh directory.
fn java_stores(bed: &Bed, store_password: &str) -> [String; 4] {
    let dir = std::env::temp_dir().join(format!(
        "exactly-stores-{}-{}",
        std::process::id(),
        support::unique_topic("s")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let run = |program: &str, args: &[&str]| {
        let out = std::process::Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let pass = format!("pass:{store_password}");
    let (key_p12, key_jks, trust_p12, trust_jks) = (
        path("client.p12"),
        path("client.jks"),
        path("trust.p12"),
        path("trust.jks"),
    );
    run(
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-in",
            &bed.client_cert,
            "-inkey",
            &bed.client_key,
            "-name",
            "client",
            "-out",
            &key_p12,
            "-passout",
            &pass,
        ],
    );
    run(
        "keytool",
        &[
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            &key_p12,
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            store_password,
            "-destkeystore",
            &key_jks,
            "-deststoretype",
            "JKS",
            "-deststorepass",
            store_password,
        ],
    );
    for (store, kind) in [(&trust_p12, "PKCS12"), (&trust_jks, "JKS")] {
        run(
            "keytool",
            &[
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                &bed.ca,
                "-keystore",
                store,
                "-storetype",
                kind,
                "-storepass",
                store_password,
            ],
        );
    }
    [key_p12, key_jks, trust_p12, trust_jks]
}

/// mTLS with Java's stores: PKCS#12 key and trust stores named by their type, and JKS ones
/// given without a type (Java's default type is JKS), each producing records kcat reads back
/// once; a wrong store password is a configuration error naming the store, found when the
/// producer is built, with no password in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jks_and_pkcs12_stores() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let [key_p12, key_jks, trust_p12, trust_jks] = java_stores(&bed, "store-secret");
    let stores = |key: &str, trust: &str, typed: Option<&str>, password: &str| {
        let mut properties = vec![
            ("bootstrap.servers", bed.mtls.clone()),
            ("security.protocol", "SSL".into()),
            ("ssl.keystore.location", key.to_owned()),
            ("ssl.keystore.password", password.to_owned()),
            ("ssl.key.password", password.to_owned()),
            ("ssl.truststore.location", trust.to_owned()),
            ("ssl.truststore.password", "store-secret".into()),
        ];
        if let Some(kind) = typed {
            properties.push(("ssl.keystore.type", kind.into()));
            properties.push(("ssl.truststore.type", kind.into()));
        }
        properties
    };
    for (key, trust, typed) in [
        (&key_p12, &trust_p12, Some("PKCS12")),
        (&key_jks, &trust_jks, None),
    ] {
        let topic = support::unique_topic("stores");
        cluster.create_topic(&topic, 1, 1, &[]);
        let producer = Producer::from_properties(stores(key, trust, typed, "store-secret"))
            .await
            .unwrap_or_else(|e| panic!("{key} / {trust}: {e}"));
        produce_and_verify(producer, &bed, Listener::Mtls, &topic, 1_000).await;
    }
    for (key, trust, typed) in [
        (&key_p12, &trust_p12, Some("PKCS12")),
        (&key_jks, &trust_jks, Some("JKS")),
    ] {
        let started = Instant::now();
        let error = Producer::from_properties(stores(key, trust, typed, "wrong-secret"))
            .await
            .expect_err("a wrong key store password");
        assert!(started.elapsed() < FATAL_WITHIN);
        let Error::Config { setting, reason } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(setting, "ssl.keystore.location");
        assert!(reason.contains("password is wrong"), "{reason}");
        assert!(!error.to_string().contains("wrong-secret"), "{error}");
    }
}

async fn produce_over_sasl_ssl(mechanism: SaslMechanism) {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic(&format!("sasl-{}", mechanism.name()));
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = Producer::from_properties(jaas_properties(&bed, mechanism))
        .await
        .unwrap();
    produce_and_verify(producer, &bed, Listener::SaslSsl, &topic, 10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_sasl_ssl_plain() {
    produce_over_sasl_ssl(SaslMechanism::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_sasl_ssl_scram_sha_256() {
    produce_over_sasl_ssl(SaslMechanism::ScramSha256).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_sasl_ssl_scram_sha_512() {
    // The typed builder this time, with librdkafka's ssl.ca.location as a property.
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("sasl-scram512");
    cluster.create_topic(&topic, 3, 1, &[]);
    let producer = builder(&bed.sasl_ssl)
        .security_protocol(SecurityProtocol::SaslSsl)
        .property("ssl.ca.location", &bed.ca)
        .sasl_credentials(
            SaslMechanism::ScramSha512,
            bed.user.clone(),
            bed.password.clone(),
        )
        .build()
        .await
        .unwrap();
    let listener = Listener::SaslSsl;
    produce_and_verify(producer, &bed, listener, &topic, 10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_over_oauthbearer() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("oauth");
    cluster.create_topic(&topic, 3, 1, &[]);
    let calls = Arc::new(Mutex::new(0));
    let producer = builder(&bed.oauth)
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_oauthbearer(oauth_provider(Arc::clone(&calls)))
        .build()
        .await
        .unwrap();
    produce_and_verify(producer, &bed, Listener::OAuth, &topic, 10_000).await;
    assert!(*calls.lock().unwrap() >= 1, "the token provider was asked");
}

/// One transaction of 100 records valued `<prefix>-<i>`, committed or aborted; every delivery
/// future resolves (a commit's successfully).
async fn transaction(producer: &Producer, topic: &str, prefix: &str, commit: bool) {
    producer.begin_transaction().unwrap();
    let mut futures = Vec::new();
    for i in 0..100 {
        let record = Record::to(topic)
            .key(format!("k{i}"))
            .value(format!("{prefix}-{i}"));
        futures.push(producer.send(record).await.unwrap());
    }
    if commit {
        producer.commit_transaction().await.unwrap();
        for f in futures {
            tokio::time::timeout(RESOLVE_LIMIT, f)
                .await
                .unwrap()
                .unwrap();
        }
    } else {
        producer.abort_transaction().await.unwrap();
        for f in futures {
            let _ = tokio::time::timeout(RESOLVE_LIMIT, f).await.unwrap();
        }
    }
}

async fn transaction_over_sasl_ssl(cluster: Option<Cluster>) {
    let (cluster, bed) = bed!(cluster);
    let _shared = cluster.shared();
    let topic = support::unique_topic("sasl-txn");
    cluster.create_topic(&topic, 3, 1, &[]);
    let mut props = jaas_properties(&bed, SaslMechanism::ScramSha256);
    props.push((
        "transactional.id".into(),
        support::unique_topic("sasl-txn-id"),
    ));
    let producer = Producer::from_properties(props).await.unwrap();
    producer.init_transactions().await.unwrap();
    for (prefix, commit) in [("committed", true), ("aborted", false)] {
        transaction(&producer, &topic, prefix, commit).await;
    }
    producer.close().await.unwrap();
    let listener = Listener::SaslSsl;
    let committed = bed.read(listener, &topic, Isolation::ReadCommitted);
    let mut values: Vec<String> = committed.iter().filter_map(|r| r.value.clone()).collect();
    values.sort();
    let mut expected: Vec<String> = (0..100).map(|i| format!("committed-{i}")).collect();
    expected.sort();
    assert_eq!(
        values, expected,
        "read_committed sees the commit and not the abort"
    );
}

mod transaction_over_sasl_ssl {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tv2() {
        super::transaction_over_sasl_ssl(super::support::Cluster::single()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tv1() {
        super::transaction_over_sasl_ssl(super::support::Cluster::tv1()).await;
    }
}

/// Sends one record and expects the fatal error `check` accepts within [`FATAL_WITHIN`],
/// on the `send` or on its delivery future.
async fn expect_fatal(producer: Producer, topic: &str, check: impl Fn(&Error) -> bool) -> Error {
    let started = Instant::now();
    let outcome = tokio::time::timeout(FATAL_WITHIN, async {
        match producer.send(Record::to(topic).value("x")).await {
            Err(error) => error,
            Ok(future) => future.await.expect_err("delivery must fail"),
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no error within {FATAL_WITHIN:?}"));
    assert!(check(&outcome), "unexpected error: {outcome:?}");
    assert!(outcome.is_fatal(), "{outcome} is fatal");
    assert!(
        !outcome.is_indeterminate(),
        "nothing was written: {outcome:?}"
    );
    eprintln!("fatal after {:?}: {outcome}", started.elapsed());
    // Later sends fail at once with the same cause.
    let again = producer.send(Record::to(topic).value("y")).await;
    assert!(again.is_err(), "the producer stays failed");
    outcome
}

fn is_authentication(error: &Error) -> bool {
    match error {
        Error::Fatal(inner) => matches!(**inner, Error::Authentication { .. }),
        _ => false,
    }
}

fn tls_reason(error: &Error) -> Option<String> {
    match error {
        Error::Fatal(inner) => match &**inner {
            Error::Tls { reason, .. } => Some(reason.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_fatal_and_fast() {
    let (cluster, bed) = bed!(Cluster::single());
    // Exclusive: the broker log's failure count must be ours alone.
    let _exclusive = cluster.exclusive();
    let topic = support::unique_topic("wrong-password");
    cluster.create_topic(&topic, 1, 1, &[]);
    let before = bed.failed_authentications();
    let producer = builder(&bed.sasl_ssl)
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_file(&bed.ca)
        .sasl_credentials(
            SaslMechanism::ScramSha256,
            bed.user.clone(),
            "not-the-password",
        )
        .build()
        .await
        .unwrap();
    let error = expect_fatal(producer, &topic, is_authentication).await;
    assert!(!error.to_string().contains("not-the-password"), "{error}");
    // No retry storm: wait a while and count the broker's failed authentications.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let attempts = bed.failed_authentications() - before;
    assert!(
        (1..=2).contains(&attempts),
        "{attempts} failed authentications reached the broker; expected one per link"
    );
}

/// How fast a `security.protocol` that does not match the listener must reach the user.
const MISMATCH_WITHIN: Duration = Duration::from_secs(2);

/// The listener a fatal `security.protocol` mismatch names, if `error` is one.
fn mismatched_listener(error: &Error) -> Option<String> {
    match error {
        Error::Fatal(inner) => match &**inner {
            Error::SecurityProtocolMismatch { broker, .. } => Some(broker.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// A producer whose `security.protocol` does not match `listener` (built by `build`, which
/// starts connecting at once): the first `send` fails fatally within [`MISMATCH_WITHIN`]
/// with an error that names the setting and the listener, and `wait_ready` says the same at
/// once. The broker's log then has at most two failed connections (`broker_line`) from it.
async fn expect_mismatch(
    build: impl std::future::Future<Output = Producer>,
    listener: &str,
    bed: &Bed,
    broker_line: &str,
) {
    let before = bed.broker_log_lines(broker_line);
    // From the build on: the driver connects as soon as it starts.
    let started = Instant::now();
    let producer = build.await;
    let error = expect_fatal(producer.clone(), "any-topic", |e| {
        mismatched_listener(e).is_some()
    })
    .await;
    let took = started.elapsed();
    assert!(
        took < MISMATCH_WITHIN,
        "the mismatch took {took:?} to report"
    );
    assert_eq!(mismatched_listener(&error).as_deref(), Some(listener));
    let report = support::report(&error);
    assert!(
        report.contains("security.protocol") && report.contains(listener),
        "{report}"
    );
    let ready = producer
        .wait_ready(Duration::from_secs(10))
        .await
        .expect_err("not ready");
    assert_eq!(
        mismatched_listener(&ready).as_deref(),
        Some(listener),
        "{ready}"
    );
    producer.close().await.unwrap();
    // No retry storm: wait a while, then count the broker's failed connections.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let attempts = bed.broker_log_lines(broker_line) - before;
    assert!(
        (1..=2).contains(&attempts),
        "{attempts} connections failed at the listener; expected one attempt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_client_at_tls_listener_is_fatal_and_fast() {
    let (cluster, bed) = bed!(Cluster::single());
    // Exclusive: the broker log's failure count must be ours alone.
    let _exclusive = cluster.exclusive();
    // security.protocol=PLAINTEXT (the default) at the SSL listener.
    let producer = async { builder(&bed.ssl).build().await.unwrap() };
    expect_mismatch(producer, &bed.ssl, &bed, BROKER_TLS_HANDSHAKE_FAILED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_at_plaintext_listener_is_fatal_and_fast() {
    let (cluster, bed) = bed!(Cluster::single());
    let _exclusive = cluster.exclusive();
    let plaintext = cluster.bootstrap.clone();
    let producer = async {
        builder(&plaintext)
            .security_protocol(SecurityProtocol::Ssl)
            .ssl_ca_file(&bed.ca)
            .build()
            .await
            .unwrap()
    };
    expect_mismatch(producer, &plaintext, &bed, BROKER_OVERSIZED_REQUEST).await;
    // The consumer, which connects when it is built, fails there the same way.
    let started = Instant::now();
    let error = exactly::Consumer::builder()
        .bootstrap(plaintext.clone())
        .group_id(support::unique_topic("mismatch"))
        .set("security.protocol", "SSL")
        .set("ssl.truststore.location", bed.ca.clone())
        .build()
        .await
        .expect_err("a TLS consumer at a plaintext listener");
    assert!(
        started.elapsed() < MISMATCH_WITHIN,
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&error, Error::SecurityProtocolMismatch { broker, .. } if *broker == plaintext),
        "{error:?}"
    );
    assert!(error.is_fatal(), "{error}");
}

/// `wait_ready` with a wrong password: the fatal authentication error, fast, logged once as
/// fatal and never as a connection to retry.
#[test]
fn wait_ready_reports_auth_failure() {
    let (logged, _capture) = Captured::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (cluster, bed) = bed!(Cluster::single());
        let _exclusive = cluster.exclusive();
        let before = bed.failed_authentications();
        let producer = builder(&bed.sasl_ssl)
            .security_protocol(SecurityProtocol::SaslSsl)
            .ssl_ca_file(&bed.ca)
            .sasl_credentials(SaslMechanism::ScramSha512, bed.user.clone(), "wrong")
            .build()
            .await
            .unwrap();
        let started = Instant::now();
        let error = producer
            .wait_ready(Duration::from_secs(30))
            .await
            .expect_err("wrong credentials are not ready");
        let took = started.elapsed();
        assert!(is_authentication(&error), "{error:?}");
        assert!(error.is_fatal(), "{error}");
        assert!(took < FATAL_WITHIN, "took {took:?}");
        eprintln!(
            "wait_ready failed after {took:?}: {}",
            support::report(&error)
        );
        // Called again, it fails at once with the same error.
        let again = producer.wait_ready(Duration::from_secs(30)).await;
        assert!(again.as_ref().is_err_and(is_authentication), "{again:?}");
        producer.close().await.unwrap();
        let attempts = bed.failed_authentications() - before;
        assert!(
            (1..=2).contains(&attempts),
            "{attempts} failed authentications"
        );

        // The consumer's wait_ready: its build authenticates already, and fails so.
        let mut props = jaas_properties(&bed, SaslMechanism::ScramSha512);
        // The connection's settings only (the rest are the producer's).
        props.retain(|(key, _)| {
            ["bootstrap.", "security.", "ssl.", "sasl."]
                .iter()
                .any(|prefix| key.starts_with(prefix))
        });
        for (_, value) in &mut props {
            *value = value.replace(&bed.password, "wrong");
        }
        props.push(("group.id".into(), support::unique_topic("wrong-password")));
        let consumer = exactly::Consumer::from_properties(props).await;
        assert!(
            matches!(consumer, Err(Error::Authentication { .. })),
            "{consumer:?}"
        );
    });
    let events = logged.events();
    let retrying: Vec<_> = events
        .iter()
        .filter(|e| e.message.contains("retrying"))
        .collect();
    assert!(
        retrying.is_empty(),
        "a fatal failure is not retried: {retrying:?}"
    );
    let errors = logged.at(tracing::Level::ERROR);
    // One ERROR for the producer, one for the consumer.
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.field("error").contains("SASL")),
        "{errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_ca_is_fatal() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let producer = builder(&bed.ssl)
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_file(&bed.untrusted_ca)
        .build()
        .await
        .unwrap();
    let error = expect_fatal(producer, "any-topic", |e| tls_reason(e).is_some()).await;
    let reason = tls_reason(&error).unwrap();
    assert!(reason.contains("untrusted"), "{reason}");
}

/// `localhost` instead of `127.0.0.1`: the broker certificate names only the IP address.
fn localhost(bootstrap: &str) -> String {
    bootstrap.replace("127.0.0.1", "localhost")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_mismatch_is_fatal() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let producer = builder(&localhost(&bed.ssl))
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_file(&bed.ca)
        .build()
        .await
        .unwrap();
    let error = expect_fatal(producer, "any-topic", |e| tls_reason(e).is_some()).await;
    let reason = tls_reason(&error).unwrap();
    assert!(reason.contains("hostname mismatch"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_check_can_be_disabled() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("no-hostname-check");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = builder(&localhost(&bed.ssl))
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_file(&bed.ca)
        .ssl_verify_hostname(false)
        .build()
        .await
        .unwrap();
    produce_and_verify(producer, &bed, Listener::Ssl, &topic, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_cut_over_sasl_ssl_keeps_exactly_once() {
    // The sarama_1430 scenario of broker_failure.rs, on the SASL_SSL listener's proxy.
    let (cluster, bed) = bed!(Cluster::single());
    let _exclusive = cluster.exclusive();
    let proxy = support::Proxy {
        name: format!(
            "b{}-tv{}-sasl_ssl-broker0",
            cluster.brokers, cluster.txn_version
        ),
    };
    proxy.remove_all_toxics();
    proxy.set_enabled(true);
    let topic = support::unique_topic("sasl-cut");
    cluster.create_topic(&topic, 3, 1, &[]);
    let mut props = jaas_properties(&bed, SaslMechanism::ScramSha512);
    props.retain(|(k, _)| k != "delivery.timeout.ms" && k != "request.timeout.ms");
    props.push(("delivery.timeout.ms".into(), "4000".into()));
    props.push(("request.timeout.ms".into(), "1500".into()));
    props.push(("retry.backoff.ms".into(), "50".into()));
    let producer = Producer::from_properties(props).await.unwrap();
    // Answers lost, then the connection cut while batches are in flight; sends during the
    // cut fail for good; the TLS and SASL handshakes of the reconnections are cut too.
    let (mut run, later) =
        support::delivery::sarama_1430_schedule(&producer, &topic, &proxy, RESOLVE_LIMIT).await;
    producer.close().await.unwrap();

    for e in run.errors().into_iter().chain(later.errors()) {
        assert!(
            !e.is_fatal() || matches!(e, Error::Closed),
            "a network cut is not fatal: {e}"
        );
    }
    let (_, failed, indeterminate) = run.tally();
    assert!(failed > 0, "sends made while the listener was cut fail");
    assert!(
        indeterminate > 0,
        "sends whose answers were lost are indeterminate"
    );
    assert_eq!(
        later.tally().0,
        300,
        "every send after the cut succeeds: {:?}",
        later.errors()
    );
    run.outcomes.extend(later.outcomes);
    let log = bed.read(Listener::SaslSsl, &topic, Isolation::ReadUncommitted);
    run.verify_records(&log, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_cut_by_the_network_is_retried() {
    let (cluster, bed) = bed!(Cluster::single());
    let _exclusive = cluster.exclusive();
    let proxy = support::Proxy {
        name: format!("b{}-tv{}-ssl-broker0", cluster.brokers, cluster.txn_version),
    };
    proxy.remove_all_toxics();
    proxy.set_enabled(true);
    let topic = support::unique_topic("tls-cut");
    cluster.create_topic(&topic, 1, 1, &[]);
    // Every connection is closed after the broker's first 100 bytes: inside its handshake.
    proxy.add_toxic(
        "cut_handshake",
        "limit_data",
        "downstream",
        r#"{"bytes":100}"#,
    );
    let producer = builder(&bed.ssl)
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_file(&bed.ca)
        .build()
        .await
        .unwrap();
    let sender = producer.clone();
    let topic_for_send = topic.clone();
    let delivery = tokio::spawn(async move {
        let future = sender
            .send(Record::to(&topic_for_send).value(support::delivery::value_of(0)))
            .await?;
        future.await
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !delivery.is_finished(),
        "a cut handshake is retried, not fatal"
    );
    proxy.remove_toxic("cut_handshake");
    let acked = tokio::time::timeout(RESOLVE_LIMIT, delivery)
        .await
        .expect("delivered once the network is back")
        .unwrap();
    assert!(acked.is_ok(), "{acked:?}");
    producer.close().await.unwrap();
    let log = bed.read(Listener::Ssl, &topic, Isolation::ReadUncommitted);
    assert_eq!(log.len(), 1);
}

#[test]
fn reauthentication_keeps_producing() {
    // A current-thread runtime, so the capture (set for this thread) sees every event of the
    // producer's tasks.
    let (logged, _capture) = Captured::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (cluster, bed) = bed!(Cluster::single());
        let _shared = cluster.shared();
        let topic = support::unique_topic("reauth");
        cluster.create_topic(&topic, 3, 1, &[]);
        let producer = Producer::from_properties(jaas_properties(&bed, SaslMechanism::ScramSha512))
            .await
            .unwrap();
        // 30 s of production across three 10 s sessions (connections.max.reauth.ms=10000),
        // without waiting for acknowledgements, so batches are in flight whenever the
        // connection re-authenticates.
        let started = Instant::now();
        let mut run = Run::default();
        let mut futures = Vec::new();
        let mut next = 0;
        while started.elapsed() < Duration::from_secs(30) {
            futures.extend(Run::send_range(&producer, &topic, next, next + 50, false).await);
            next += 50;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        run.collect(futures, RESOLVE_LIMIT).await;
        producer.close().await.unwrap();
        assert_eq!(
            run.tally(),
            (next as usize, 0, 0),
            "{:?}",
            run.errors().first()
        );
        let log = bed.read(Listener::SaslSsl, &topic, Isolation::ReadUncommitted);
        run.verify_records(&log, &topic);
        // The "re-authenticated" events per connection (its local address).
        let mut per_connection: HashMap<String, usize> = HashMap::new();
        for event in logged.events() {
            if event.message.contains("re-authenticated") {
                *per_connection
                    .entry(event.field("local").to_owned())
                    .or_default() += 1;
            }
        }
        eprintln!("re-authentications per connection: {per_connection:?}");
        assert!(
            per_connection.values().any(|&n| n >= 2),
            "a connection used for 30 s re-authenticated: {per_connection:?}"
        );
        // At most one re-authentication per session: the client re-authenticates at 85% of
        // the 10 s lifetime, so a connection open for `elapsed` did it at most
        // elapsed / 8.5 s times.
        let most = (started.elapsed().as_secs_f64() / 8.5).floor() as usize;
        assert!(
            per_connection.values().all(|&n| n <= most),
            "at most one re-authentication per session ({most}): {per_connection:?}"
        );
    });
}

/// Writes `text` to a fresh `client.properties` and loads it as Java's `Properties.load` would.
fn load_file(text: &str) -> Vec<(String, String)> {
    let dir = std::env::temp_dir().join(support::unique_topic("properties"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("client.properties");
    std::fs::write(&path, text).unwrap();
    let properties = exactly::load_properties(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    properties
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn properties_file_loads_a_confluent_cloud_file() {
    // As Confluent Cloud's "Configure a client" page hands it out (Java), with the test bed's
    // address, user and CA put in, and its JAAS line continued over three (as people wrap it).
    let text = |bed: &Bed| {
        format!(
            r#"# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers={bootstrap}
security.protocol=SASL_SSL
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username='{user}' \
    password='{password}';
sasl.mechanism=PLAIN
# Required for correctness in Apache Kafka clients prior to 2.6
client.dns.lookup=use_all_dns_ips
# Best practice for higher availability in Apache Kafka clients prior to 3.0
session.timeout.ms=45000
# Best practice for Kafka producer to prevent data loss
acks=all
# Required connection configs for Confluent Cloud Schema Registry
schema.registry.url=https://psrc-00000.us-east-2.aws.confluent.cloud
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=SRKEY:SRSECRET
ssl.truststore.location={ca}
"#,
            bootstrap = bed.sasl_ssl,
            user = bed.user,
            password = bed.password,
            ca = bed.ca,
        )
    };
    // It parses without a broker...
    let offline = Bed {
        ssl: String::new(),
        mtls: String::new(),
        sasl_ssl: "pkc-00000.us-east-2.aws.confluent.cloud:9092".into(),
        oauth: String::new(),
        oidc: String::new(),
        gssapi: String::new(),
        token_url: String::new(),
        oidc_client_id: String::new(),
        oidc_client_secret: String::new(),
        ca: "/etc/ssl/ca.pem".into(),
        untrusted_ca: String::new(),
        client_cert: String::new(),
        client_key: String::new(),
        user: "APIKEY".into(),
        password: "APISECRET".into(),
        broker_log: String::new(),
    };
    let config = exactly::ProducerConfig::from_properties(load_file(&text(&offline))).unwrap();
    assert_eq!(config.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(config.security.sasl.username.as_deref(), Some("APIKEY"));
    assert!(!format!("{config:?}").contains("APISECRET"));
    // ...and, pointed at the test bed, it produces.
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("client-properties");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = Producer::from_properties(load_file(&text(&bed)))
        .await
        .unwrap();
    produce_and_verify(producer, &bed, Listener::SaslSsl, &topic, 100).await;
}

/// An MSK-shaped `client.properties` (AWS's SCRAM guide): SASL_SSL with SCRAM-SHA-512 and a JKS
/// trust store given without a password or type (the guide copies the JVM's `cacerts`; here a
/// JKS store holding the test bed's CA), for the producer and the consumer alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn properties_file_loads_an_msk_file() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let [_, _, _, trust_jks] = java_stores(&bed, "changeit");
    let text = format!(
        r#"bootstrap.servers={bootstrap}
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
  username="{user}" \
  password="{password}";
ssl.truststore.location={trust_jks}
"#,
        bootstrap = bed.sasl_ssl,
        user = bed.user,
        password = bed.password,
    );
    let properties = load_file(&text);
    let topic = support::unique_topic("msk-properties");
    cluster.create_topic(&topic, 1, 1, &[]);
    let producer = Producer::from_properties(properties.clone()).await.unwrap();
    produce_and_verify(producer, &bed, Listener::SaslSsl, &topic, 100).await;
    let mut consumer = exactly::Consumer::from_properties(
        properties
            .into_iter()
            .chain([("auto.offset.reset".to_owned(), "earliest".to_owned())]),
    )
    .await
    .unwrap();
    consumer
        .assign(&[exactly::TopicPartition::new(topic.as_str(), 0)])
        .unwrap();
    let mut read = 0;
    let end = Instant::now() + Duration::from_secs(60);
    while read < 100 && Instant::now() < end {
        if let Some(exactly::ConsumerEvent::Records(records)) = consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap()
        {
            read += records.len();
        }
    }
    assert_eq!(read, 100, "the consumer reads what the producer wrote");
    consumer.close().await.unwrap();
}

/// A topic the producer was refused (TOPIC_AUTHORIZATION_FAILED) is asked about again by the
/// next `send`: an ACL granted meanwhile with Kafka's `kafka-acls` lets the very next sends
/// through, without waiting for `metadata.max.age.ms` (left at its 5-minute default here).
/// The test bed's limited user (no super user, rights from ACLs alone) over SASL_PLAINTEXT
/// with SCRAM-SHA-512; the record is read back with kcat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_acl_is_seen_by_the_next_send() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let vars = [
        "KAFKA_SASL_PLAINTEXT_BOOTSTRAP",
        "KAFKA_SASL_LIMITED_USER",
        "KAFKA_SASL_LIMITED_PASSWORD",
    ]
    .map(|name| std::env::var(name).ok());
    let [Some(bootstrap), Some(user), Some(password)] = vars else {
        assert!(
            !in_ci(),
            "CI=true but the test bed exported no limited SASL user"
        );
        eprintln!("SKIPPED: no limited SASL user in the environment");
        return;
    };
    let _shared = cluster.shared();
    let topic = support::unique_topic("granted");
    cluster.create_topic(&topic, 1, 1, &[]);
    let principal = format!("User:{user}");
    let allow_write = |topic: &str| {
        cluster.kafka_tool(
            "org.apache.kafka.tools.AclCommand",
            &[
                "--add",
                "--allow-principal",
                &principal,
                "--operation",
                "Write",
                "--operation",
                "Describe",
                "--topic",
                topic,
            ],
        )
    };
    // The user may write some other topic: since Kafka 3.0 that implies IDEMPOTENT_WRITE
    // (KIP-679), without which the idempotent producer's InitProducerId is refused for good.
    allow_write(&support::unique_topic("other"));
    let producer = builder(&bootstrap)
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_credentials(SaslMechanism::ScramSha512, user.clone(), password)
        .max_block(Duration::from_secs(10))
        .build()
        .await
        .expect("producer");
    let refused = producer
        .send(Record::to(&topic).value("refused"))
        .await
        .expect_err("no ACL lets the limited user write");
    assert!(
        refused.to_string().contains("TOPIC_AUTHORIZATION_FAILED"),
        "{refused}"
    );

    allow_write(&topic);
    // ACLs reach the broker through the metadata log: a few refusals may come first.
    let started = Instant::now();
    let delivered = loop {
        match producer.send(Record::to(&topic).value("allowed")).await {
            Ok(delivery) => break delivery.await.expect("delivered"),
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                assert!(e.to_string().contains("TOPIC_AUTHORIZATION_FAILED"), "{e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                panic!("still refused 30 s after the ACL, well within metadata.max.age.ms: {e}")
            }
        }
    };
    assert_eq!(delivered.offset, 0);
    producer.close().await.unwrap();
    assert_eq!(
        cluster.read_values(&topic, Isolation::ReadUncommitted),
        ["allowed"]
    );
}

/// A Confluent Cloud OAuth `client.properties` (Confluent's "Configure clients for
/// OAUTHBEARER" form: the token endpoint, Kafka's login callback handler, the login module with
/// `clientId`, `clientSecret`, `scope` and the `extension_*` pair Confluent Cloud routes by),
/// pointed at the test bed's OIDC listener and identity provider. `query` is added to the
/// token endpoint's URL (the test provider's token lifetime and the label it counts under).
fn oidc_properties(bed: &Bed, secret: &str, query: &str) -> Vec<(String, String)> {
    load_file(&format!(
        r#"bootstrap.servers={bootstrap}
security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
sasl.login.connect.timeout.ms=15000
sasl.oauthbearer.token.endpoint.url={url}?{query}
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
  clientId='{id}' \
  clientSecret='{secret}' \
  scope='kafka' \
  extension_logicalCluster='lkc-testbed' \
  extension_identityPoolId='pool-testbed';
linger.ms=5
request.timeout.ms=3000
delivery.timeout.ms=30000
"#,
        bootstrap = bed.oidc,
        url = bed.token_url,
        id = bed.oidc_client_id,
    ))
}

/// How many tokens the test bed's identity provider gave under `label`.
fn tokens_issued(bed: &Bed, label: &str) -> u64 {
    let url = bed
        .token_url
        .replace("/token", &format!("/issued?label={label}"));
    let output = std::process::Command::new("curl")
        .args(["-fsS", "--max-time", "5", &url])
        .output()
        .expect("curl runs");
    assert!(output.status.success(), "{url}: {output:?}");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    answer["issued"].as_u64().unwrap()
}

/// KIP-768 end to end: a producer and a consumer configured from a Confluent Cloud OAuth file
/// fetch RS256 JWTs from the identity provider with the client-credentials grant, and the
/// broker's OAuthBearerValidatorCallbackHandler accepts them. Tokens live 6 s and the listener
/// re-authenticates at least every 10 s (KIP-368), so during the 16 s of sending the client
/// fetches new tokens and re-authenticates on open connections; not one send may fail. kcat
/// reads the log back over the unsecured OAUTHBEARER listener: every record once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_oidc_client_credentials() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("oidc");
    cluster.create_topic(&topic, 3, 1, &[]);
    let label = topic.clone();
    let properties = oidc_properties(
        &bed,
        &bed.oidc_client_secret,
        &format!("lifetime=6&label={label}"),
    );
    let producer = Producer::from_properties(properties.clone()).await.unwrap();
    let (rounds, per_round) = (16u64, 250u64);
    let mut run = Run::default();
    for round in 0..rounds {
        let futures = Run::send_range(
            &producer,
            &topic,
            round * per_round,
            (round + 1) * per_round,
            false,
        )
        .await;
        run.collect(futures, RESOLVE_LIMIT).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    producer.close().await.unwrap();
    let count = rounds * per_round;
    assert_eq!(
        run.tally(),
        (count as usize, 0, 0),
        "every send through token refreshes succeeds: {:?}",
        run.errors().first()
    );
    let issued = tokens_issued(&bed, &label);
    assert!(
        issued >= 3,
        "16 s of 6-second tokens take at least three fetches; the provider gave {issued}"
    );
    let log = bed.read(Listener::OAuth, &topic, Isolation::ReadUncommitted);
    assert_eq!(log.len(), count as usize, "kcat reads every record");
    run.verify_records(&log, &topic);

    // The consumer logs in the same way and reads it all.
    let producer_only = ["linger.ms", "delivery.timeout.ms"];
    let connection = properties
        .into_iter()
        .filter(|(key, _)| !producer_only.contains(&key.as_str()));
    let mut consumer = exactly::Consumer::from_properties(connection.chain([
        ("group.id".to_owned(), support::unique_topic("oidc-group")),
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
    ]))
    .await
    .unwrap();
    consumer.subscribe([topic.as_str()]).unwrap();
    let mut values = std::collections::HashSet::new();
    let end = Instant::now() + Duration::from_secs(60);
    while values.len() < count as usize && Instant::now() < end {
        if let Some(exactly::ConsumerEvent::Records(records)) = consumer
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap()
        {
            values.extend(records.into_iter().map(|r| r.value));
        }
    }
    assert_eq!(
        values.len(),
        count as usize,
        "the consumer reads every record"
    );
    consumer.close().await.unwrap();
}

/// A client secret the identity provider refuses, or a token endpoint nobody answers at, is a
/// fatal authentication error naming the cause within 2 s, not a reconnect loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_oidc_refused_or_unreachable_is_fatal() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("oidc-refused");
    cluster.create_topic(&topic, 1, 1, &[]);
    let unreachable = {
        // A loopback port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}/token")
    };
    for (case, secret, url, names) in [
        (
            "wrong secret",
            "not-the-secret",
            bed.token_url.clone(),
            "invalid_client",
        ),
        (
            "unreachable",
            bed.oidc_client_secret.as_str(),
            unreachable,
            "could not be reached",
        ),
    ] {
        let mut properties = oidc_properties(&bed, secret, "");
        for (key, value) in &mut properties {
            if key == "sasl.oauthbearer.token.endpoint.url" {
                *value = url.clone();
            }
        }
        let started = Instant::now();
        let producer = Producer::from_properties(properties).await.unwrap();
        let error = expect_fatal(producer, &topic, is_authentication).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{case}: fatal after {:?}",
            started.elapsed()
        );
        let error = format!("{error:?}");
        assert!(error.contains(names), "{case}: {error}");
        assert!(
            !error.contains(secret),
            "{case}: the secret is not in {error}"
        );
    }
}

/// An MSK IAM `client.properties` (AWS's "Configure clients for IAM access control" form)
/// pointed at a listener that does not enable AWS_MSK_IAM (the test bed's SASL_SSL one: PLAIN
/// and SCRAM): the broker's UNSUPPORTED_SASL_MECHANISM is a fatal error within 2 s that names
/// the mechanism and what the listener enables. (The payload itself is checked against AWS's
/// library in the unit test `payload_matches_aws_msk_iam_auth`; no MSK cluster is reachable
/// here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_msk_iam_at_a_listener_without_it_is_fatal() {
    let (cluster, bed) = bed!(Cluster::single());
    let _shared = cluster.shared();
    let topic = support::unique_topic("msk-iam");
    cluster.create_topic(&topic, 1, 1, &[]);
    let properties = load_file(&format!(
        r#"bootstrap.servers={bootstrap}
security.protocol=SASL_SSL
sasl.mechanism=AWS_MSK_IAM
sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required;
sasl.client.callback.handler.class=software.amazon.msk.auth.iam.IAMClientCallbackHandler
ssl.truststore.location={ca}
"#,
        bootstrap = bed.sasl_ssl,
        ca = bed.ca,
    ));
    let started = Instant::now();
    let producer = Producer::from_properties(properties).await.unwrap();
    let error = format!(
        "{:?}",
        expect_fatal(producer, &topic, is_authentication).await
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "fatal after {:?}",
        started.elapsed()
    );
    for names in ["AWS_MSK_IAM", "UNSUPPORTED_SASL_MECHANISM", "PLAIN"] {
        assert!(error.contains(names), "{names} is in {error}");
    }
}

/// SASL/GSSAPI (Kerberos) against the test bed's KDC and its GSSAPI listener (the brokers are
/// `kafka/127.0.0.1@EXACTLY.TEST`); the process's Kerberos environment (`KRB5_CONFIG`,
/// `KRB5_CLIENT_KTNAME`, `KRB5CCNAME`) is what `scripts/testbed up` exports.
#[cfg(feature = "gssapi")]
mod gssapi {
    use super::*;

    /// The GSSAPI listener and the Kerberos names of the test bed.
    struct Kerberos {
        bootstrap: String,
        principal: String,
        unknown_principal: String,
        client_keytab: String,
    }

    impl Kerberos {
        fn of(bed: &Bed) -> Kerberos {
            let var = |name: &str| {
                std::env::var(name).unwrap_or_else(|_| {
                    panic!("{name} is not set; eval \"$(scripts/testbed up)\" exports it")
                })
            };
            Kerberos {
                bootstrap: bed.gssapi.clone(),
                principal: var("KAFKA_KERBEROS_PRINCIPAL"),
                unknown_principal: var("KAFKA_KERBEROS_UNKNOWN_PRINCIPAL"),
                client_keytab: var("KRB5_CLIENT_KTNAME"),
            }
        }

        /// A Java client's `client.properties` for a Kerberos cluster: the JAAS line names the
        /// keytab and the principal.
        fn properties(&self, principal: &str) -> Vec<(String, String)> {
            load_file(&format!(
                r#"bootstrap.servers={bootstrap}
security.protocol=SASL_PLAINTEXT
sasl.mechanism=GSSAPI
sasl.kerberos.service.name=kafka
sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \
    useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}";
request.timeout.ms=3000
"#,
                bootstrap = self.bootstrap,
                keytab = self.client_keytab,
            ))
        }
    }

    /// Transactions over Kerberos for longer than the listener's `connections.max.reauth.ms`
    /// (10 s, so connections re-authenticate, KIP-368, mid-run): three committed, one aborted.
    /// kcat reads the log over the plaintext listener (read_committed: the commits only), and
    /// a consumer logging in with Kerberos reads the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gssapi_produce_and_consume() {
        let (cluster, bed) = bed!(Cluster::single());
        let _shared = cluster.shared();
        let kerberos = Kerberos::of(&bed);
        let topic = support::unique_topic("gssapi");
        cluster.create_topic(&topic, 3, 1, &[]);
        let mut properties = kerberos.properties(&kerberos.principal);
        properties.push((
            "transactional.id".into(),
            support::unique_topic("gssapi-txn"),
        ));
        let started = Instant::now();
        let producer = Producer::from_properties(properties).await.unwrap();
        producer.init_transactions().await.unwrap();
        let mut expected = Vec::new();
        for (round, commit) in [(0, true), (1, false), (2, true), (3, true)] {
            let prefix = format!("round{round}");
            if commit {
                expected.extend((0..100).map(|i| format!("{prefix}-{i}")));
            }
            transaction(&producer, &topic, &prefix, commit).await;
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
        producer.close().await.unwrap();
        assert!(
            started.elapsed() > Duration::from_secs(10),
            "the run outlasts connections.max.reauth.ms"
        );
        expected.sort();
        let mut committed = cluster.read_values(&topic, Isolation::ReadCommitted);
        committed.sort();
        assert_eq!(
            committed, expected,
            "kcat (read_committed) sees the commits only"
        );

        // The consumer names no principal or keytab (librdkafka's way): it logs in as the
        // client keytab's principal.
        let group = support::unique_topic("gssapi-group");
        let mut consumer = exactly::Consumer::from_properties([
            ("bootstrap.servers", kerberos.bootstrap.as_str()),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "GSSAPI"),
            ("group.id", group.as_str()),
            ("auto.offset.reset", "earliest"),
            ("isolation.level", "read_committed"),
        ])
        .await
        .unwrap();
        consumer.subscribe([topic.as_str()]).unwrap();
        let mut values = Vec::new();
        let end = Instant::now() + Duration::from_secs(60);
        while values.len() < expected.len() && Instant::now() < end {
            if let Some(exactly::ConsumerEvent::Records(records)) = consumer
                .poll_timeout(Duration::from_millis(500))
                .await
                .unwrap()
            {
                values.extend(
                    records
                        .into_iter()
                        .map(|r| String::from_utf8(r.value.expect("a value").to_vec()).unwrap()),
                );
            }
        }
        consumer.close().await.unwrap();
        values.sort();
        assert_eq!(
            values, expected,
            "the Kerberos consumer reads the commits once"
        );
    }

    /// A principal no keytab or ticket cache holds, or a service the KDC does not know, is a
    /// fatal authentication error naming the cause within 5 s, not a reconnect loop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gssapi_wrong_principal_or_service_is_fatal() {
        let (cluster, bed) = bed!(Cluster::single());
        let _shared = cluster.shared();
        let kerberos = Kerberos::of(&bed);
        let topic = support::unique_topic("gssapi-wrong");
        cluster.create_topic(&topic, 1, 1, &[]);
        let mut wrong_service = kerberos.properties(&kerberos.principal);
        wrong_service.push(("sasl.kerberos.service.name".into(), "nokafka".into()));
        for (case, properties, names) in [
            (
                "principal",
                kerberos.properties(&kerberos.unknown_principal),
                kerberos.unknown_principal.as_str(),
            ),
            ("service", wrong_service, "nokafka@127.0.0.1"),
        ] {
            let producer = Producer::from_properties(properties).await.unwrap();
            let error = format!(
                "{:?}",
                expect_fatal(producer, &topic, is_authentication).await
            );
            eprintln!("{case}: {error}");
            for text in ["GSSAPI", names] {
                assert!(error.contains(text), "{case}: {text} is in {error}");
            }
        }
    }

    /// A keytab that does not exist, or one the GSSAPI library would not read (not the file
    /// `KRB5_CLIENT_KTNAME` names), is refused when the client is built, with the line to set.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gssapi_missing_keytab_is_fatal() {
        let (_cluster, bed) = bed!(Cluster::single());
        let kerberos = Kerberos::of(&bed);
        let other_keytab = std::path::Path::new(&kerberos.client_keytab)
            .with_file_name("broker.keytab")
            .display()
            .to_string();
        for (keytab, names) in [
            ("/nonexistent/client.keytab".to_owned(), "does not exist"),
            (other_keytab, "KRB5_CLIENT_KTNAME="),
        ] {
            let mut properties = kerberos.properties(&kerberos.principal);
            properties.push(("sasl.kerberos.keytab".into(), keytab.clone()));
            let error = match Producer::from_properties(properties).await {
                Err(error) => error,
                Ok(_) => panic!("a producer was built with the keytab {keytab}"),
            };
            match &error {
                Error::Config { setting, reason } => {
                    assert_eq!(setting, "sasl.kerberos.keytab");
                    assert!(reason.contains(names), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
