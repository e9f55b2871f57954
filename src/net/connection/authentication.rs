//! SASL on a link: the first authentication right after ApiVersions, and KIP-368
//! re-authentication between requests on an open connection, each carried by a transport
//! that frames the SASL requests (directly on a fresh stream, or through the link's own
//! pipeline once requests are in flight).

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::WriteHalf;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::info;

use super::{Pending, PendingQueue, SendFailure, Stream, io_error};
use crate::error::Error;
use crate::net::sasl::{self, SaslTransport};
use crate::net::security::SaslConfig;
use crate::protocol::header::{ResponseHeader, encode_request_frame};
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, EncodeError, Request};
use kafka_protocol::messages::SaslAuthenticateRequest;

use super::framing::{decode_response, read_frame, write_frame};

/// KIP-368: re-authenticate once this share of the session lifetime has passed, leaving the
/// rest as margin for the requests in flight to be answered and the exchange to complete.
/// (Java picks 85–95% at random to spread many clients; one producer has few connections.)
pub(super) const REAUTHENTICATE_AT: f64 = 0.85;

/// A KIP-368 session: when to re-authenticate, and when the broker will stop serving us.
pub(super) struct SaslSession {
    pub(super) reauthenticate_at: Instant,
    pub(super) expires_at: Instant,
}

impl SaslSession {
    /// The session of an authentication started at `started`, if the broker set a lifetime.
    pub(super) fn starting(started: Instant, lifetime: Option<Duration>) -> Option<Self> {
        lifetime.map(|lifetime| SaslSession {
            reauthenticate_at: started + lifetime.mul_f64(REAUTHENTICATE_AT),
            expires_at: started + lifetime,
        })
    }
}

/// KIP-368 re-authentication on an open connection, between requests. Nothing new is written
/// until it completes, and the SaslHandshake's answer comes after the answers to every request
/// written before it (a Kafka connection answers in order, and the broker reads the next
/// request only after answering the last), so in-flight batches are neither failed nor
/// repeated.
pub(super) async fn reauthenticate(
    transport: &mut PipelinedTransport<'_>,
    sasl: &SaslConfig,
    versions: &BrokerApiVersions,
    address: &str,
    local: &str,
) -> Result<Option<SaslSession>, Error> {
    let started = Instant::now();
    let lifetime = authenticate(transport, sasl, versions, address).await?;
    info!(%address, local, ?lifetime, "re-authenticated (KIP-368)");
    Ok(SaslSession::starting(started, lifetime))
}

/// The SASL exchange at the SaslAuthenticate version both sides support.
pub(super) async fn authenticate<T: SaslTransport>(
    transport: &mut T,
    sasl: &SaslConfig,
    versions: &BrokerApiVersions,
    address: &str,
) -> Result<Option<Duration>, Error> {
    let version = versions
        .negotiate::<SaslAuthenticateRequest>(None)
        .ok_or_else(|| Error::Authentication {
            broker: address.to_owned(),
            mechanism: sasl.mechanism.map_or("?", |m| m.name()).to_owned(),
            reason: "the broker does not support SaslAuthenticate".into(),
        })?;
    sasl::authenticate(transport, sasl, version, address).await
}

/// Carries the SASL exchange of a re-authentication through the link's own pipeline: the
/// requests take correlation ids and pending slots like any other, and the reader task
/// delivers their answers.
pub(super) struct PipelinedTransport<'a> {
    pub(super) write_half: &'a mut WriteHalf<Stream>,
    pub(super) pending: &'a PendingQueue,
    pub(super) dead: &'a mut oneshot::Receiver<Error>,
    pub(super) correlation_id: &'a mut i32,
    pub(super) client_id: &'a str,
    pub(super) address: &'a str,
    pub(super) timeout: Duration,
}

impl SaslTransport for PipelinedTransport<'_> {
    async fn call<R>(&mut self, request: R, version: i16) -> Result<R::Response, Error>
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send,
    {
        let frame = next_frame(self.correlation_id, &request, version, self.client_id)?;
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Pending {
                correlation_id: *self.correlation_id,
                api_key: R::API_KEY as i16,
                flexible: R::is_flexible(version),
                version,
                respond: Box::new(move |result| {
                    let _ = tx.send(result);
                }),
                sent_at: Instant::now(),
            });
        write_frame(self.write_half, &frame[..])
            .await
            .map_err(|e| io_error(self.address, &e))?;
        let answer = tokio::select! {
            answer = rx => answer.map_err(|_| Error::Closed)?,
            error = &mut *self.dead => return Err(error.unwrap_or(Error::Closed)),
            _ = tokio::time::sleep(self.timeout) => {
                return Err(Error::Timeout(format!(
                    "re-authentication with {} took longer than {:?}",
                    self.address, self.timeout
                )));
            }
        };
        let (version, body) = answer.map_err(SendFailure::into_error)?;
        decode_response::<R>(&body, version)
    }
}

/// The frame of a SASL request under the connection's next correlation id.
pub(super) fn next_frame<R: Request>(
    correlation_id: &mut i32,
    request: &R,
    version: i16,
    client_id: &str,
) -> Result<BytesMut, EncodeError> {
    *correlation_id = correlation_id.wrapping_add(1);
    encode_request_frame(request, version, *correlation_id, Some(client_id))
}

/// Carries the SASL exchange while a connection is being opened, straight on the stream.
pub(super) struct DirectTransport<'a> {
    pub(super) stream: &'a mut Stream,
    pub(super) correlation_id: &'a mut i32,
    pub(super) client_id: &'a str,
    pub(super) address: &'a str,
}

impl SaslTransport for DirectTransport<'_> {
    async fn call<R>(&mut self, request: R, version: i16) -> Result<R::Response, Error>
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send,
    {
        let frame = next_frame(self.correlation_id, &request, version, self.client_id)?;
        write_frame(self.stream, &frame[..])
            .await
            .map_err(|e| io_error(self.address, &e))?;
        let body = read_frame(self.stream)
            .await
            .map_err(|e| io_error(self.address, &e))?;
        let mut d = Decoder::new(&body);
        let header = ResponseHeader::decode(
            &mut d,
            ResponseHeader::is_v1(R::API_KEY as i16, R::is_flexible(version)),
        )?;
        if header.correlation_id != *self.correlation_id {
            return Err(Error::Timeout(format!(
                "response correlation id {} does not match request {}",
                header.correlation_id, self.correlation_id
            )));
        }
        decode_response::<R>(d.rest(), version)
    }
}
