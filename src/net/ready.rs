//! Whether the brokers answer: what both clients say when none does, and the readiness probe
//! (connect, authenticate, fetch metadata once) behind `wait_ready` and the consumer's start.
//!
//! A wait for metadata that no broker ever answered ends in [`Error::NoBrokerAnswered`], with
//! the last failure of each address asked (refused, reset, a TLS failure, a timeout), never
//! in a "topic not found": the topic may well exist. A fatal failure (authentication, a
//! certificate, a `security.protocol` the listener does not speak) ends the wait at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::error;

use super::connection::{BrokerLink, LinkConfig, LinkSecurity};
use super::security::SecurityConfig;
use crate::error::{BrokerFailure, Error, ErrorChain, Result};
use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::versions::BrokerApiVersions;
use kafka_protocol::messages::MetadataRequest;

/// What the brokers asked for metadata did: how many answers arrived, and the last failure
/// of each address since the last answer.
#[derive(Debug, Default)]
pub(crate) struct MetadataAnswers {
    answers: u64,
    failures: Vec<BrokerFailure>,
}

impl MetadataAnswers {
    /// A broker answered a metadata request.
    pub fn answered(&mut self) {
        self.answers += 1;
        self.failures.clear();
    }

    /// A metadata request to `address` failed with `error`.
    pub fn failed(&mut self, address: &str, error: Error) {
        match self.failures.iter_mut().find(|f| f.address == address) {
            Some(failure) => failure.error = error,
            None => self.failures.push(BrokerFailure::new(address, error)),
        }
    }

    /// Whether a failure of `address` is recorded since the last answer.
    fn knows(&self, address: &str) -> bool {
        self.failures.iter().any(|f| f.address == address)
    }

    /// How many metadata answers arrived so far: a wait compares it with the count at its
    /// start to learn whether any broker answered meanwhile.
    pub fn answers(&self) -> u64 {
        self.answers
    }

    /// The error of a wait of `waited` that no broker answered.
    pub fn no_broker_answered(&self, waited: Duration) -> Error {
        Error::NoBrokerAnswered {
            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            attempts: self.failures.clone(),
        }
    }
}

/// How [`first_metadata`] asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// Each request's bound (`request.timeout.ms`).
    pub request_timeout: Duration,
    /// The pause between two rounds over the links (`retry.backoff.ms`).
    pub retry_backoff: Duration,
    /// Ask again, round after round, until then; `None`: one round.
    pub deadline: Option<Instant>,
}

/// What a client starts from: its connection settings and one link per bootstrap server.
pub(crate) struct BootstrapLinks {
    /// Every connection's settings, kept for the links opened later.
    pub link_config: LinkConfig,
    /// `client.id`, as the requests carry it.
    pub client_id: Arc<str>,
    /// One link per bootstrap server, in the configured order.
    pub links: Vec<BrokerLink>,
}

/// Spawns one link per address in `servers` with a client's connection settings: `client_id`,
/// each request's bound, the reconnect backoff (start, maximum) and `security`.
pub(crate) fn bootstrap_links(
    client_id: &str,
    request_timeout: Duration,
    reconnect_backoff: (Duration, Duration),
    security: &SecurityConfig,
    servers: &[String],
) -> Result<BootstrapLinks> {
    let link_config = LinkConfig::new(
        client_id.to_owned(),
        request_timeout,
        reconnect_backoff.0,
        reconnect_backoff.1,
        LinkSecurity::from_config(security)?,
    );
    let links = servers
        .iter()
        .map(|address| BrokerLink::spawn(address.clone(), link_config.clone()))
        .collect();
    Ok(BootstrapLinks {
        link_config,
        client_id: Arc::from(client_id),
        links,
    })
}

/// Asks `links` for cluster metadata, one after the other, until one answers: its answer and
/// the API versions of the connection that carried it. A fatal failure ends the probe at
/// once (logged here, once); when no link answered, [`Error::NoBrokerAnswered`] names each
/// address with its last failure.
pub(crate) async fn first_metadata(
    links: &[BrokerLink],
    client_id: &Arc<str>,
    probe: Probe,
) -> Result<(MetadataResponse, BrokerApiVersions)> {
    let started = Instant::now();
    let mut answers = MetadataAnswers::default();
    // Bounded by the deadline, or one round without one.
    loop {
        for link in links {
            let timeout = match probe.deadline {
                Some(deadline) => deadline
                    .saturating_duration_since(Instant::now())
                    .min(probe.request_timeout),
                None => probe.request_timeout,
            };
            if timeout.is_zero() {
                break;
            }
            let call =
                link.call_with_versions(MetadataRequest::default(), None, Arc::clone(client_id));
            let failure = match tokio::time::timeout(timeout, call).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) if e.is_fatal() => {
                    error!(address = link.address(), error = %ErrorChain(&e), "cannot use the broker: fatal, not retried");
                    return Err(e);
                }
                Ok(Err(e)) => e,
                Err(_) if timeout < probe.request_timeout => {
                    // Cut short by the probe's deadline: how the address failed before says
                    // more than that (a refused connection waits out its reconnect backoff).
                    if answers.knows(link.address()) {
                        continue;
                    }
                    Error::Timeout(format!(
                        "no answer to Metadata within the {} ms left",
                        timeout.as_millis()
                    ))
                }
                Err(_) => Error::Timeout(format!(
                    "no answer to Metadata within request.timeout.ms ({} ms)",
                    timeout.as_millis()
                )),
            };
            answers.failed(link.address(), failure);
        }
        let again = probe
            .deadline
            .is_some_and(|d| Instant::now() + probe.retry_backoff < d);
        if !again {
            return Err(answers.no_broker_answered(started.elapsed()));
        }
        tokio::time::sleep(probe.retry_backoff).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(address: &str) -> Error {
        Error::io(
            address,
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"),
        )
    }

    #[test]
    fn each_address_keeps_its_last_failure_until_an_answer() {
        let mut answers = MetadataAnswers::default();
        answers.failed("a:1", refused("a:1"));
        answers.failed("b:2", Error::Timeout("no answer".into()));
        answers.failed("a:1", Error::Timeout("slow".into()));
        let Error::NoBrokerAnswered {
            waited_ms,
            attempts,
        } = answers.no_broker_answered(Duration::from_millis(1500))
        else {
            panic!("not NoBrokerAnswered");
        };
        assert_eq!(waited_ms, 1500);
        let described: Vec<(String, String)> = attempts
            .iter()
            .map(|f| (f.address.clone(), f.error.to_string()))
            .collect();
        assert_eq!(
            described,
            vec![
                ("a:1".to_owned(), "timed out: slow".to_owned()),
                ("b:2".to_owned(), "timed out: no answer".to_owned()),
            ]
        );
        let before = answers.answers();
        answers.answered();
        assert_eq!(answers.answers(), before + 1);
        let Error::NoBrokerAnswered { attempts, .. } = answers.no_broker_answered(Duration::ZERO)
        else {
            panic!("not NoBrokerAnswered");
        };
        assert!(
            attempts.is_empty(),
            "an answer clears the failures before it"
        );
    }

    /// A closed port: one round fails at once, naming the address and the refusal.
    #[tokio::test]
    async fn a_closed_port_is_no_broker_answered() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let link = BrokerLink::spawn(
            address.clone(),
            super::super::connection::LinkConfig::new(
                "test".into(),
                Duration::from_secs(1),
                Duration::from_millis(10),
                Duration::from_millis(10),
                Default::default(),
            ),
        );
        let probe = Probe {
            request_timeout: Duration::from_secs(1),
            retry_backoff: Duration::from_millis(10),
            deadline: Some(Instant::now() + Duration::from_millis(200)),
        };
        let started = Instant::now();
        let error = first_metadata(&[link], &Arc::from("test"), probe)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "bounded");
        let text = error.to_string();
        assert!(
            matches!(error, Error::NoBrokerAnswered { .. })
                && text.contains(&address)
                && text.contains("connection refused"),
            "{text}"
        );
    }
}
