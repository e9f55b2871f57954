//! What the clients say when no broker answers: an error that names each bootstrap address
//! with what went wrong there (refused, timed out), never "topic not found"; and the readiness
//! call, `wait_ready`, that says the same before the first `send`. The security side (a wrong
//! `security.protocol`, a wrong password) is in `security.rs`, next to the listeners.
//!
//! The unreachable cases need no broker: they run against ports on 127.0.0.1 that refuse or
//! never answer, so they run (and must pass) everywhere.
//!
//! A test that uses the test bed holds its cluster's lock across awaits on purpose (see
//! `broker_failure.rs`).
#![allow(clippy::await_holding_lock)]

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use std::io::ErrorKind;

use exactly::{BrokerFailure, Consumer, Error, Producer, Record};
use support::Cluster;

/// An address on 127.0.0.1 where nothing listens: connections are refused.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    address
}

/// The last failure an unreachable-broker error gives for `address`.
fn failure_of<'a>(error: &'a Error, address: &str) -> Option<&'a BrokerFailure> {
    let Error::NoBrokerAnswered { attempts, .. } = error else {
        return None;
    };
    attempts.iter().find(|f| f.address == address)
}

/// Whether `error` says no broker answered and that `address` refused the connection, in
/// its text and its `io::ErrorKind`.
fn refused_at(error: &Error, address: &str) -> bool {
    error
        .to_string()
        .contains(&format!("{address}: connection refused"))
        && failure_of(error, address)
            .is_some_and(|f| f.error.io_kind() == Some(ErrorKind::ConnectionRefused))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_bootstrap_says_so() {
    support::init_logging();
    let closed = closed_port();
    // Takes connections into its backlog and never answers them.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_address = silent.local_addr().unwrap().to_string();
    let max_block = Duration::from_secs(4);
    let producer = Producer::builder()
        .bootstrap(format!("{closed},{silent_address}"))
        .max_block(max_block)
        .request_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();

    let started = Instant::now();
    let error = producer
        .send(Record::to("an-existing-topic").value("v"))
        .await
        .expect_err("no broker answers");
    let took = started.elapsed();
    assert!(
        took >= max_block && took < max_block + Duration::from_secs(2),
        "failed after {took:?}, max.block.ms is {max_block:?}"
    );
    assert!(
        !matches!(error, Error::UnknownTopic { .. }),
        "no broker answered, so nothing says the topic is unknown: {error}"
    );
    let text = error.to_string();
    assert!(text.contains("no broker answered"), "{text}");
    assert!(
        text.contains(&closed) && text.contains(&silent_address),
        "{text}"
    );
    assert!(refused_at(&error, &closed), "{text}");
    assert!(
        text.contains(&format!("{silent_address}: timed out"))
            && failure_of(&error, &silent_address)
                .is_some_and(|f| matches!(f.error, Error::Timeout(_))),
        "{text}"
    );
    assert!(error.is_retriable() && !error.is_fatal(), "{error:?}");

    // wait_ready says the same within its own bound.
    let started = Instant::now();
    let ready = producer
        .wait_ready(Duration::from_secs(2))
        .await
        .expect_err("not ready");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(refused_at(&ready, &closed), "{ready}");
    producer.close().await.unwrap();

    // A transactional call that never reaches a coordinator says why when it times out.
    let transactional = Producer::builder()
        .bootstrap(&closed)
        .transactional_id("unreachable")
        .max_block(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let error = transactional
        .init_transactions()
        .await
        .expect_err("no coordinator answers");
    let text = error.to_string().to_lowercase();
    assert!(
        matches!(error, Error::Timeout(_))
            && text.contains("max.block.ms")
            && text.contains(&closed)
            && text.contains("connection refused"),
        "{error}"
    );
    transactional.close().await.unwrap();

    // The consumer connects when it is built, and says so there.
    let started = Instant::now();
    let error = Consumer::builder()
        .bootstrap(closed.clone())
        .group_id("unreachable")
        .build()
        .await
        .expect_err("no broker answers");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(refused_at(&error, &closed), "{error}");
    drop(silent);
}

/// Both clients' `wait_ready` against the test bed: ready; then, with the broker's proxy
/// disabled, not ready, naming the address and the refusal; ready again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ready_against_the_test_bed() {
    let Some(cluster) = Cluster::single() else {
        return;
    };
    let _exclusive = cluster.exclusive();
    let producer = Producer::builder()
        .bootstrap(&cluster.bootstrap)
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    producer
        .wait_ready(Duration::from_secs(10))
        .await
        .expect("the test bed answers");
    eprintln!("producer ready after {:?}", started.elapsed());
    let consumer = Consumer::builder()
        .bootstrap(cluster.bootstrap.clone())
        .group_id(support::unique_topic("ready"))
        .build()
        .await
        .unwrap();
    consumer
        .wait_ready(Duration::from_secs(10))
        .await
        .expect("the test bed answers");

    let proxy = cluster.proxy(0);
    proxy.set_enabled(false);
    let address = &cluster.bootstrap;
    for (client, ready) in [
        (
            "producer",
            producer.wait_ready(Duration::from_secs(2)).await,
        ),
        (
            "consumer",
            consumer.wait_ready(Duration::from_secs(2)).await,
        ),
    ] {
        let error = ready.expect_err("the broker is cut off");
        assert!(refused_at(&error, address), "{client}: {error}");
        assert!(error.is_retriable(), "{client}: {error}");
    }
    proxy.set_enabled(true);
    producer
        .wait_ready(Duration::from_secs(20))
        .await
        .expect("ready again");
    consumer
        .wait_ready(Duration::from_secs(20))
        .await
        .expect("ready again");
    consumer.close().await.unwrap();
    producer.close().await.unwrap();
    assert!(
        matches!(
            producer.wait_ready(Duration::from_secs(1)).await,
            Err(Error::Closed)
        ),
        "a closed producer is not ready"
    );
}
