//! One link per broker: a task that connects on demand, negotiates API versions, writes
//! requests in the order they were handed over, and matches responses to them.
//!
//! Order matters: Produce requests to one broker carry consecutive sequences, so they are
//! written in the order the engine emitted them, through one channel per broker. Each request
//! learns whether it was written: a request that never reached the socket is "not written",
//! which the engine treats as certainly not in the log (rule P1), while one that was
//! written and then lost its answer is "unresolved" (P5).
//!
//! The link is generic over the stream (ARCHITECTURE.md): plain TCP or TLS,
//! the framing, timeouts and written / not-written reporting are the same code. A SASL
//! listener is authenticated right after ApiVersions, before any request of ours, and
//! re-authenticated between requests when the broker set a session lifetime (KIP-368). An
//! authentication or certificate failure is fatal: the link fails every request at once and
//! never reconnects, where a network failure backs off and retries as before.
//!
//! So is a `security.protocol` the listener does not speak, found within the first connection
//! attempt (librdkafka only hints at it: "might be caused by incorrect security.protocol").
//! A plaintext link whose first answer starts with a TLS record header where the response
//! size belongs (a TLS listener's alert, `15 03 03 ..`: 352 MB as a size) talks to a TLS
//! listener. A TLS link whose ClientHello is answered with bytes that are not TLS, or closed
//! before any answer by a listener that then answers an ApiVersions request in plaintext on a
//! second connection, talks to a plaintext listener. The probe runs only when nothing came
//! back, so a handshake cut by the network is still an I/O error, retried.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf,
};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::reconnect::ReconnectBackoff;
use super::sasl::{self, SaslTransport};
use super::security::{SaslConfig, SecurityConfig};
#[cfg(feature = "tls")]
use super::tls::TlsConnector;
use crate::error::{Error, ErrorChain};
use crate::protocol::frame::RequestFrame;
use crate::protocol::header::{ResponseHeader, encode_request_frame};
use crate::protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::messages::sasl_authenticate::SaslAuthenticateRequest;
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Message, Request};
use crate::reachability::{Reachability, ReachabilityChange};

/// Where a broker connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionState {
    /// No connection yet, or connecting.
    Connecting,
    /// Connected and negotiated.
    Connected,
    /// The last attempt failed; waiting `reconnect.backoff` before the next.
    BackingOff,
}

impl ConnectionState {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            ConnectionState::Connecting => 0,
            ConnectionState::Connected => 1,
            ConnectionState::BackingOff => 2,
        }
    }

    pub(crate) fn from_u8(value: u8) -> Self {
        match value {
            1 => ConnectionState::Connected,
            2 => ConnectionState::BackingOff,
            _ => ConnectionState::Connecting,
        }
    }
}

/// What a broker connection runs over: a TCP stream, or a TLS session on one.
trait BrokerStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> BrokerStream for T {}

type Stream = Box<dyn BrokerStream>;

/// KIP-368: re-authenticate once this share of the session lifetime has passed, leaving the
/// rest as margin for the requests in flight to be answered and the exchange to complete.
/// (Java picks 85–95% at random to spread many clients; one producer has few connections.)
const REAUTHENTICATE_AT: f64 = 0.85;

/// The largest response frame accepted (a hostile size prefix must not allocate gigabytes).
/// Below every size a TLS record header read as one gives (0x15030000 and up, 352 MB), so a
/// TLS record is never taken for a response.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// How long the plaintext probe after a TLS handshake closed without an answer may take.
#[cfg(feature = "tls")]
const PLAINTEXT_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How a request ended without a response.
#[derive(Debug, Clone)]
pub(crate) enum SendFailure {
    /// It never reached the socket.
    NotWritten(Error),
    /// It was written (at least partly); its answer is lost.
    Lost(Error),
}

impl SendFailure {
    pub fn written(&self) -> bool {
        matches!(self, SendFailure::Lost(_))
    }

    pub fn into_error(self) -> Error {
        match self {
            SendFailure::NotWritten(e) | SendFailure::Lost(e) => e,
        }
    }
}

/// Encodes a request once the broker's versions are known: returns the frame (built with the
/// given correlation id), the version used, and whether the broker will answer (acks=0
/// Produce requests get no response).
pub(crate) type Encoder =
    Box<dyn FnOnce(&BrokerApiVersions, i32) -> Result<(RequestFrame, i16, bool), Error> + Send>;

/// Receives the response body (after the response header) and the version, or the failure.
pub(crate) type Responder = Box<dyn FnOnce(Result<(i16, Bytes), SendFailure>) + Send>;

struct Outgoing {
    encode: Encoder,
    respond: Responder,
}

/// A handle to one broker's link task. Dropping every handle ends the task.
#[derive(Clone)]
pub(crate) struct BrokerLink {
    tx: mpsc::UnboundedSender<Outgoing>,
    /// The link's [`ConnectionState`], for the metrics.
    pub state: Arc<AtomicU8>,
    /// The broker's address (`host:port`), naming it in errors.
    address: Arc<str>,
}

/// Settings of a link; every link of one client shares them.
#[derive(Debug, Clone)]
pub(crate) struct LinkConfig {
    pub client_id: String,
    pub connect_timeout: Duration,
    /// `reconnect.backoff.ms`.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max: Duration,
    pub security: LinkSecurity,
    /// Whether each address can be reached, shared by the client's links: a broker dialled
    /// by two links (its bootstrap address and its node id) is one outage in the log.
    reachability: Arc<Mutex<HashMap<String, Reachability>>>,
}

impl LinkConfig {
    /// The settings of a client's links. A connection attempt (TCP, TLS, ApiVersions, SASL)
    /// may take `request.timeout.ms`, at most 10 s: a broker that does not answer that fast
    /// is tried again with backoff rather than waited for.
    pub fn new(
        client_id: String,
        request_timeout: Duration,
        reconnect_backoff: Duration,
        reconnect_backoff_max: Duration,
        security: LinkSecurity,
    ) -> Self {
        Self {
            client_id,
            connect_timeout: request_timeout.min(Duration::from_secs(10)),
            reconnect_backoff,
            reconnect_backoff_max,
            security,
            reachability: Arc::default(),
        }
    }

    /// Records a connection attempt to `address` and says what to log about it.
    fn reached(&self, address: &str, connected: bool) -> ReachabilityChange {
        let mut all = self.reachability.lock().unwrap_or_else(|e| e.into_inner());
        let reachability = all.entry(address.to_owned()).or_default();
        if connected {
            reachability.succeeded()
        } else {
            reachability.failed()
        }
    }
}

/// How a link secures its connections; shared by every link of a producer.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkSecurity {
    /// TLS, when `security.protocol` is SSL or SASL_SSL.
    #[cfg(feature = "tls")]
    pub tls: Option<TlsConnector>,
    /// SASL, when `security.protocol` is SASL_PLAINTEXT or SASL_SSL.
    pub sasl: Option<Arc<SaslConfig>>,
}

impl LinkSecurity {
    /// Whether connections run TLS.
    fn uses_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            return true;
        }
        false
    }

    /// The `security.protocol` these links use, by its Kafka name.
    fn protocol_name(&self) -> &'static str {
        match (self.uses_tls(), self.sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (false, true) => "SASL_PLAINTEXT",
            (true, false) => "SSL",
            (true, true) => "SASL_SSL",
        }
    }

    /// The fatal error for a listener that does not speak our `security.protocol`:
    /// `happened` says what it answered; the reason adds the setting that matches it.
    fn mismatch(&self, address: &str, happened: &str) -> Error {
        let matching = match (self.uses_tls(), self.sasl.is_some()) {
            (false, false) => "SSL (or SASL_SSL if the listener authenticates with SASL)",
            (false, true) => "SASL_SSL",
            (true, false) => {
                "PLAINTEXT (or SASL_PLAINTEXT if the listener authenticates with SASL)"
            }
            (true, true) => "SASL_PLAINTEXT",
        };
        Error::SecurityProtocolMismatch {
            broker: address.to_owned(),
            configured: self.protocol_name(),
            reason: format!("{happened}; security.protocol={matching} would match it"),
        }
    }

    /// Reads the key material of a validated configuration; a missing or malformed PEM file is
    /// an [`Error::Config`] here, when the producer is built.
    pub fn from_config(config: &SecurityConfig) -> Result<Self, Error> {
        Ok(LinkSecurity {
            #[cfg(feature = "tls")]
            tls: if config.protocol.uses_tls() {
                Some(TlsConnector::new(&config.tls)?)
            } else {
                None
            },
            sasl: config
                .protocol
                .uses_sasl()
                .then(|| Arc::new(config.sasl.clone())),
        })
    }
}

impl BrokerLink {
    /// Starts the link task for `address` (`host:port`). It connects when the first request
    /// arrives.
    pub fn spawn(address: String, config: LinkConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(AtomicU8::new(ConnectionState::Connecting.to_u8()));
        let name: Arc<str> = Arc::from(address.as_str());
        tokio::spawn(run_link(address, config, rx, Arc::clone(&state)));
        Self {
            tx,
            state,
            address: name,
        }
    }

    /// The broker's address (`host:port`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Queues a request; `respond` is called exactly once.
    pub fn send(&self, encode: Encoder, respond: Responder) {
        if let Err(mpsc::error::SendError(out)) = self.tx.send(Outgoing { encode, respond }) {
            (out.respond)(Err(SendFailure::NotWritten(Error::Closed)));
        }
    }

    /// Sends `request` at the highest version both sides support (capped by `cap`) and
    /// decodes the response.
    pub async fn call<R: Request + Send + 'static>(
        &self,
        request: R,
        cap: Option<i16>,
        client_id: Arc<str>,
    ) -> Result<R::Response, Error>
    where
        R::Response: Send + 'static,
    {
        Ok(self.call_with_versions(request, cap, client_id).await?.0)
    }

    /// Like [`BrokerLink::call`], also returning the API versions the broker advertised on the
    /// connection that carried the request (transactions v2 is decided from them).
    pub async fn call_with_versions<R: Request + Send + 'static>(
        &self,
        request: R,
        cap: Option<i16>,
        client_id: Arc<str>,
    ) -> Result<(R::Response, BrokerApiVersions), Error>
    where
        R::Response: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let seen = Arc::new(Mutex::new(None));
        let seen_in_encoder = Arc::clone(&seen);
        self.send(
            Box::new(move |versions, correlation_id| {
                *seen_in_encoder.lock().unwrap_or_else(|e| e.into_inner()) = Some(versions.clone());
                let version = versions.negotiate::<R>(cap).ok_or_else(|| {
                    Error::broker(crate::protocol::error_code::ErrorCode::UNSUPPORTED_VERSION)
                })?;
                Ok((
                    RequestFrame::contiguous(encode_request_frame(
                        &request,
                        version,
                        correlation_id,
                        Some(&client_id),
                    )),
                    version,
                    true,
                ))
            }),
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
        let (version, body) = rx
            .await
            .map_err(|_| Error::Closed)?
            .map_err(SendFailure::into_error)?;
        let mut d = Decoder::new(&body);
        let response = R::Response::decode(&mut d, version)?;
        d.finish("response body")?;
        let versions = seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        Ok((response, versions))
    }
}

struct Pending {
    correlation_id: i32,
    api_key: i16,
    flexible: bool,
    version: i16,
    respond: Responder,
}

type PendingQueue = Arc<Mutex<VecDeque<Pending>>>;

async fn run_link(
    address: String,
    config: LinkConfig,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    state: Arc<AtomicU8>,
) {
    let set_state = |s: ConnectionState| state.store(s.to_u8(), Ordering::Relaxed);
    let mut correlation_id: i32 = 0;
    // The next request to write, held over when a connection attempt failed for it.
    let mut next: Option<Outgoing> = None;
    let jitter_seed = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), &address);
    let mut backoff = ReconnectBackoff::new(
        config.reconnect_backoff,
        config.reconnect_backoff_max,
        jitter_seed,
    );
    // An authentication or certificate failure: every request fails with it, no reconnect.
    let mut fatal: Option<Error> = None;
    loop {
        let first = match next.take() {
            Some(out) => out,
            None => match rx.recv().await {
                Some(out) => out,
                None => return,
            },
        };
        if let Some(error) = &fatal {
            (first.respond)(Err(SendFailure::NotWritten(error.clone())));
            continue;
        }
        set_state(ConnectionState::Connecting);
        let connection = match connect(&address, &config, &mut correlation_id).await {
            Ok(connection) => {
                set_state(ConnectionState::Connected);
                backoff.connected();
                if let ReachabilityChange::Restored { attempts } = config.reached(&address, true) {
                    info!(%address, failed_attempts = attempts, "connected to broker again");
                }
                connection
            }
            Err(error) => {
                set_state(ConnectionState::BackingOff);
                let wait = backoff.failed();
                if error.is_security_failure() {
                    // Never retried: the client that owns the link reports it, once, as fatal.
                    debug!(%address, error = %ErrorChain(&error), "cannot connect to broker; not retried");
                } else {
                    match config.reached(&address, false) {
                        ReachabilityChange::Lost => {
                            warn!(%address, error = %ErrorChain(&error), max_backoff = ?config.reconnect_backoff_max, "cannot connect to broker; retrying with backoff");
                        }
                        ReachabilityChange::StillDown { attempts } => {
                            debug!(%address, error = %ErrorChain(&error), attempts, retry_in = ?wait, "still cannot connect to broker");
                        }
                        ReachabilityChange::Restored { .. } | ReachabilityChange::Unchanged => {}
                    }
                }
                // Nothing was written: fail this request and everything queued behind it, so
                // the engine decides what to retry and when.
                (first.respond)(Err(SendFailure::NotWritten(error.clone())));
                while let Ok(out) = rx.try_recv() {
                    (out.respond)(Err(SendFailure::NotWritten(error.clone())));
                }
                if error.is_security_failure() {
                    fatal = Some(error);
                } else {
                    tokio::time::sleep(wait).await;
                }
                continue;
            }
        };
        match serve(
            connection,
            first,
            &address,
            &config,
            &mut rx,
            &mut correlation_id,
        )
        .await
        {
            Ended::Closed => return,
            Ended::Failed { error, unwritten } => {
                next = unwritten;
                if error.is_security_failure() {
                    fatal = Some(error);
                }
            }
        }
    }
}

/// An open, authenticated connection.
struct Connection {
    stream: Stream,
    /// Our end's address, naming the connection in logs.
    local: String,
    versions: BrokerApiVersions,
    session: Option<SaslSession>,
}

/// A KIP-368 session: when to re-authenticate, and when the broker will stop serving us.
struct SaslSession {
    reauthenticate_at: Instant,
    expires_at: Instant,
}

impl SaslSession {
    /// The session of an authentication started at `started`, if the broker set a lifetime.
    fn starting(started: Instant, lifetime: Option<Duration>) -> Option<Self> {
        lifetime.map(|lifetime| SaslSession {
            reauthenticate_at: started + lifetime.mul_f64(REAUTHENTICATE_AT),
            expires_at: started + lifetime,
        })
    }
}

/// How a connection's life ended.
enum Ended {
    /// Every handle to the link is gone.
    Closed,
    /// The connection failed; `unwritten` is a request taken from the queue and not written.
    Failed {
        error: Error,
        unwritten: Option<Outgoing>,
    },
}

/// Writes requests on `connection`, starting with `first`, until it fails or the link closes.
async fn serve(
    connection: Connection,
    first: Outgoing,
    address: &str,
    config: &LinkConfig,
    rx: &mut mpsc::UnboundedReceiver<Outgoing>,
    correlation_id: &mut i32,
) -> Ended {
    let Connection {
        stream,
        local,
        versions: negotiated,
        mut session,
    } = connection;
    let (read_half, mut write_half) = tokio::io::split(stream);
    let pending: PendingQueue = Arc::new(Mutex::new(VecDeque::new()));
    let (dead_tx, mut dead_rx) = oneshot::channel::<Error>();
    let reader = tokio::spawn(read_responses(
        read_half,
        address.to_owned(),
        Arc::clone(&pending),
        dead_tx,
    ));
    let mut out = Some(first);
    let mut unwritten = None;
    let failure = loop {
        let item = match out.take() {
            Some(item) => item,
            None => tokio::select! {
                item = rx.recv() => match item {
                    Some(item) => item,
                    None => break None,
                },
                error = &mut dead_rx => break Some(error.unwrap_or(Error::Closed)),
            },
        };
        if let Some(current) = &session
            && Instant::now() >= current.reauthenticate_at
        {
            let sasl = config.security.sasl.as_deref();
            let renewed = match sasl {
                Some(sasl) if Instant::now() < current.expires_at => {
                    let mut transport = PipelinedTransport {
                        write_half: &mut write_half,
                        pending: &pending,
                        dead: &mut dead_rx,
                        correlation_id,
                        client_id: &config.client_id,
                        address,
                        timeout: config.connect_timeout,
                    };
                    reauthenticate(&mut transport, sasl, &negotiated, address, &local).await
                }
                // Past expiry the broker would close the connection on our next request
                // (KIP-368): open a new one instead.
                _ => Err(Error::io(
                    address,
                    std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "the SASL session expired while the connection was idle",
                    ),
                )),
            };
            match renewed {
                Ok(renewed) => session = renewed,
                Err(error) => {
                    unwritten = Some(item);
                    break Some(error);
                }
            }
        }
        *correlation_id = correlation_id.wrapping_add(1);
        let (frame, version, expects_response) = match (item.encode)(&negotiated, *correlation_id) {
            Ok(encoded) => encoded,
            Err(error) => {
                (item.respond)(Err(SendFailure::NotWritten(error)));
                continue;
            }
        };
        let api_key = frame.api_key();
        let flexible = is_flexible(api_key, version);
        if expects_response {
            pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(Pending {
                    correlation_id: *correlation_id,
                    api_key,
                    flexible,
                    version,
                    respond: item.respond,
                });
            if let Err(e) = write_frame(&mut write_half, frame).await {
                break Some(io_error(address, &e));
            }
        } else {
            match write_frame(&mut write_half, frame).await {
                Ok(()) => (item.respond)(Ok((version, Bytes::new()))),
                Err(e) => {
                    let error = io_error(address, &e);
                    (item.respond)(Err(SendFailure::Lost(error.clone())));
                    break Some(error);
                }
            }
        }
    };
    reader.abort();
    let _ = write_half.shutdown().await;
    let error = failure.clone().unwrap_or(Error::Closed);
    debug!(%address, error = %ErrorChain(&error), "connection closed");
    // Everything written and unanswered is lost; its outcome is unknown (P5).
    for p in pending.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        (p.respond)(Err(SendFailure::Lost(error.clone())));
    }
    match failure {
        None => Ended::Closed,
        Some(error) => Ended::Failed { error, unwritten },
    }
}

/// KIP-368 re-authentication on an open connection, between requests. Nothing new is written
/// until it completes, and the SaslHandshake's answer comes after the answers to every request
/// written before it (a Kafka connection answers in order, and the broker reads the next
/// request only after answering the last), so in-flight batches are neither failed nor
/// repeated.
async fn reauthenticate(
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
async fn authenticate<T: SaslTransport>(
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
struct PipelinedTransport<'a> {
    write_half: &'a mut WriteHalf<Stream>,
    pending: &'a PendingQueue,
    dead: &'a mut oneshot::Receiver<Error>,
    correlation_id: &'a mut i32,
    client_id: &'a str,
    address: &'a str,
    timeout: Duration,
}

impl SaslTransport for PipelinedTransport<'_> {
    async fn call<R>(&mut self, request: R, version: i16) -> Result<R::Response, Error>
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send,
    {
        let frame = next_frame(self.correlation_id, &request, version, self.client_id);
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
fn next_frame<R: Request>(
    correlation_id: &mut i32,
    request: &R,
    version: i16,
    client_id: &str,
) -> BytesMut {
    *correlation_id = correlation_id.wrapping_add(1);
    encode_request_frame(request, version, *correlation_id, Some(client_id))
}

/// Carries the SASL exchange while a connection is being opened, straight on the stream.
struct DirectTransport<'a> {
    stream: &'a mut Stream,
    correlation_id: &'a mut i32,
    client_id: &'a str,
    address: &'a str,
}

impl SaslTransport for DirectTransport<'_> {
    async fn call<R>(&mut self, request: R, version: i16) -> Result<R::Response, Error>
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send,
    {
        let frame = next_frame(self.correlation_id, &request, version, self.client_id);
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

fn decode_response<R: Request>(body: &[u8], version: i16) -> Result<R::Response, Error> {
    let mut d = Decoder::new(body);
    let response = R::Response::decode(&mut d, version)?;
    d.finish("response body")?;
    Ok(response)
}

/// An I/O error as the crate's error: a TLS failure no retry can fix becomes a fatal
/// [`Error::Tls`]; everything else is a retriable [`Error::Io`].
fn io_error(address: &str, e: &std::io::Error) -> Error {
    #[cfg(feature = "tls")]
    if let Some(fatal) = super::tls::classify(address, e) {
        return fatal;
    }
    Error::io(address, std::io::Error::new(e.kind(), e.to_string()))
}

/// Whether `api_key` at `version` is a flexible version, for the response header.
fn is_flexible(api_key: i16, version: i16) -> bool {
    use crate::protocol::messages::*;
    match api_key {
        0 => produce::ProduceRequest::is_flexible(version),
        3 => metadata::MetadataRequest::is_flexible(version),
        18 => ApiVersionsRequest::is_flexible(version),
        22 => init_producer_id::InitProducerIdRequest::is_flexible(version),
        10 => find_coordinator::FindCoordinatorRequest::is_flexible(version),
        24 => add_partitions_to_txn::AddPartitionsToTxnRequest::is_flexible(version),
        25 => add_offsets_to_txn::AddOffsetsToTxnRequest::is_flexible(version),
        26 => end_txn::EndTxnRequest::is_flexible(version),
        28 => txn_offset_commit::TxnOffsetCommitRequest::is_flexible(version),
        1 => fetch::FetchRequest::is_flexible(version),
        2 => list_offsets::ListOffsetsRequest::is_flexible(version),
        8 => offset_commit::OffsetCommitRequest::is_flexible(version),
        9 => offset_fetch::OffsetFetchRequest::is_flexible(version),
        11 => join_group::JoinGroupRequest::is_flexible(version),
        12 => heartbeat::HeartbeatRequest::is_flexible(version),
        13 => leave_group::LeaveGroupRequest::is_flexible(version),
        14 => sync_group::SyncGroupRequest::is_flexible(version),
        17 => sasl_handshake::SaslHandshakeRequest::is_flexible(version),
        36 => sasl_authenticate::SaslAuthenticateRequest::is_flexible(version),
        68 => consumer_group_heartbeat::ConsumerGroupHeartbeatRequest::is_flexible(version),
        _ => false,
    }
}

/// Writes one request frame and flushes it: over TLS, `write_all` can leave the last records
/// in the session's buffer, and a request must be on the socket once it counts as written.
/// (Over TCP the flush does nothing.) A frame in several parts (a Produce request's batches,
/// see [`RequestFrame::produce`]) goes out with vectored writes, one `writev` when the socket
/// takes it all.
async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    mut frame: impl Buf,
) -> std::io::Result<()> {
    writer.write_all_buf(&mut frame).await?;
    writer.flush().await
}

/// Reads one size-prefixed frame, refusing a hostile size.
async fn read_frame<R: AsyncRead + Unpin + ?Sized>(reader: &mut R) -> std::io::Result<Bytes> {
    let size = reader.read_i32().await?;
    read_frame_body(reader, size).await
}

/// Whether the four bytes where a response's size belongs are the start of a TLS record
/// header: content type alert (0x15) or handshake (0x16), then protocol version 3.x (SSL 3.0
/// to TLS 1.3 all start 0x03 0x00..0x04). As a size that is more than 352 MB, which no
/// response reaches.
fn looks_like_tls_record(size: [u8; 4]) -> bool {
    matches!(size, [0x15 | 0x16, 0x03, 0x00..=0x04, _])
}

/// Reads the answer to a request of the connection's opening (ApiVersions). On a plaintext
/// connection, a TLS record where the size belongs means the listener speaks TLS: a fatal
/// [`Error::SecurityProtocolMismatch`], not an I/O error to retry.
async fn read_opening_frame(
    stream: &mut Stream,
    address: &str,
    security: &LinkSecurity,
) -> Result<Bytes, Error> {
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| io_error(address, &e))?;
    if !security.uses_tls() && looks_like_tls_record(size) {
        return Err(security.mismatch(
            address,
            &format!(
                "it answered with a TLS record (bytes {:02x} {:02x} {:02x}), so it is a TLS \
                 listener",
                size[0], size[1], size[2]
            ),
        ));
    }
    read_frame_body(stream, i32::from_be_bytes(size))
        .await
        .map_err(|e| io_error(address, &e))
}

/// Reads the `size` bytes of a frame whose size prefix was read, refusing a hostile size.
async fn read_frame_body<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
    size: i32,
) -> std::io::Result<Bytes> {
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("response size {size}"),
            )
        })?;
    let mut frame = BytesMut::zeroed(size);
    reader.read_exact(&mut frame).await?;
    Ok(frame.freeze())
}

async fn read_responses(
    read_half: ReadHalf<Stream>,
    address: String,
    pending: PendingQueue,
    dead: oneshot::Sender<Error>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    let error = loop {
        let frame = match read_frame(&mut reader).await {
            Ok(frame) => frame,
            Err(e) => break io_error(&address, &e),
        };
        let Some(p) = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        else {
            break Error::Timeout("response without a request".into());
        };
        let mut d = Decoder::new(&frame);
        let decoded = ResponseHeader::decode(&mut d, ResponseHeader::is_v1(p.api_key, p.flexible));
        let header_len = d.position();
        let header = match decoded {
            Ok(h) => h,
            Err(e) => {
                (p.respond)(Err(SendFailure::Lost(e.clone().into())));
                break e.into();
            }
        };
        if header.correlation_id != p.correlation_id {
            let error = Error::Timeout(format!(
                "response correlation id {} does not match request {}",
                header.correlation_id, p.correlation_id
            ));
            (p.respond)(Err(SendFailure::Lost(error.clone())));
            break error;
        }
        let mut body = frame;
        body.advance(header_len);
        (p.respond)(Ok((p.version, body)));
    };
    let _ = dead.send(error);
}

/// Opens a connection: TCP, then TLS if configured, ApiVersions, then SASL if configured; all
/// within the connect timeout.
async fn connect(
    address: &str,
    config: &LinkConfig,
    correlation_id: &mut i32,
) -> Result<Connection, Error> {
    let timeout = config.connect_timeout;
    let attempt = async {
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| io_error(address, &e))?;
        tcp.set_nodelay(true).ok();
        let local = tcp
            .local_addr()
            .map_or_else(|_| "?".to_owned(), |a| a.to_string());
        let mut stream: Stream = match &config.security {
            #[cfg(feature = "tls")]
            LinkSecurity { tls: Some(tls), .. } => {
                Box::new(tls_handshake(tls, address, tcp, config).await?)
            }
            _ => Box::new(tcp),
        };
        let versions = negotiate_versions(
            &mut stream,
            address,
            &config.client_id,
            correlation_id,
            &config.security,
        )
        .await?;
        let session = match &config.security.sasl {
            Some(sasl) => {
                let started = Instant::now();
                let mut transport = DirectTransport {
                    stream: &mut stream,
                    correlation_id,
                    client_id: &config.client_id,
                    address,
                };
                let lifetime = authenticate(&mut transport, sasl, &versions, address).await?;
                SaslSession::starting(started, lifetime)
            }
            None => None,
        };
        Ok::<_, Error>(Connection {
            stream,
            local,
            versions,
            session,
        })
    };
    tokio::time::timeout(timeout, attempt).await.map_err(|_| {
        Error::Timeout(format!(
            "connecting to {address} took longer than {timeout:?}"
        ))
    })?
}

/// The TLS handshake over `tcp`. A listener that does not speak TLS is a fatal
/// [`Error::SecurityProtocolMismatch`]: one that answers the ClientHello with bytes that are
/// not TLS, or one that closes the connection without answering anything and then answers an
/// ApiVersions request in plaintext (what a Kafka plaintext listener does: it reads the
/// ClientHello as a request size of 369 MB and drops the connection).
#[cfg(feature = "tls")]
async fn tls_handshake(
    tls: &TlsConnector,
    address: &str,
    tcp: TcpStream,
    config: &LinkConfig,
) -> Result<tokio_rustls::client::TlsStream<super::tls::CountingStream<TcpStream>>, Error> {
    use std::io::ErrorKind as K;
    let (error, tcp) = match tls
        .connect(host_of(address), super::tls::CountingStream::new(tcp))
        .await
    {
        Ok(stream) => return Ok(stream),
        Err(failed) => failed,
    };
    if super::tls::answered_without_tls(&error) {
        return Err(config.security.mismatch(
            address,
            "it answered the TLS ClientHello with bytes that are not TLS, so it is not a TLS \
             listener",
        ));
    }
    let closed = matches!(
        error.kind(),
        K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe
    );
    if closed && tcp.bytes_read() == 0 {
        drop(tcp);
        let probe = async {
            let mut plain: Stream = Box::new(TcpStream::connect(address).await.ok()?);
            let mut correlation_id = 0;
            negotiate_versions(
                &mut plain,
                address,
                &config.client_id,
                &mut correlation_id,
                &LinkSecurity::default(),
            )
            .await
            .ok()
        };
        let probe_timeout = PLAINTEXT_PROBE_TIMEOUT.min(config.connect_timeout);
        if let Ok(Some(_)) = tokio::time::timeout(probe_timeout, probe).await {
            return Err(config.security.mismatch(
                address,
                "it closed the connection on the TLS ClientHello without a TLS answer, and \
                 answers Kafka requests in plaintext, so it is a plaintext listener",
            ));
        }
    }
    Err(io_error(address, &error))
}

/// The host of `host:port`, without the brackets of an IPv6 address: the name TLS checks.
#[cfg(feature = "tls")]
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// ApiVersions at the highest version we implement; a broker that does not support it
/// answers in v0 with UNSUPPORTED_VERSION and its own range, and we ask again (KIP-511).
async fn negotiate_versions(
    stream: &mut Stream,
    address: &str,
    client_id: &str,
    correlation_id: &mut i32,
    security: &LinkSecurity,
) -> Result<BrokerApiVersions, Error> {
    let mut version = ApiVersionsRequest::MAX_VERSION;
    for _ in 0..2 {
        *correlation_id = correlation_id.wrapping_add(1);
        let request = ApiVersionsRequest {
            client_software_name: "exactly".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        };
        let frame = encode_request_frame(&request, version, *correlation_id, Some(client_id));
        write_frame(stream, &frame[..])
            .await
            .map_err(|e| io_error(address, &e))?;
        let body = read_opening_frame(stream, address, security).await?;
        let mut d = Decoder::new(&body);
        ResponseHeader::decode(&mut d, false)?;
        let response = ApiVersionsResponse::decode_with_v0_fallback(d.rest(), version)?;
        if response.error_code == ApiVersionsResponse::UNSUPPORTED_VERSION {
            version = response
                .api_versions_max_version()
                .unwrap_or(0)
                .min(ApiVersionsRequest::MAX_VERSION);
            continue;
        }
        if response.error_code != 0 {
            return Err(Error::broker(crate::protocol::error_code::ErrorCode(
                response.error_code,
            )));
        }
        return Ok(BrokerApiVersions::from_response(&response));
    }
    Err(Error::broker(
        crate::protocol::error_code::ErrorCode::UNSUPPORTED_VERSION,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_record_headers_are_told_from_response_sizes() {
        // A TLS 1.2 alert and a TLS 1.0 ClientHello record, as the first four bytes.
        assert!(looks_like_tls_record([0x15, 0x03, 0x03, 0x00]));
        assert!(looks_like_tls_record([0x16, 0x03, 0x01, 0x01]));
        for size in [0, 1, 1_000_000, MAX_RESPONSE_BYTES as i32] {
            assert!(!looks_like_tls_record(size.to_be_bytes()), "{size}");
        }
        // Each TLS header is larger than any response we accept, so none was a valid size.
        let smallest = i32::from_be_bytes([0x15, 0x03, 0x00, 0x00]);
        assert!(smallest as usize > MAX_RESPONSE_BYTES);
    }

    #[test]
    fn a_mismatch_names_the_setting_the_listener_and_what_would_match() {
        let plaintext = LinkSecurity::default();
        let error = plaintext.mismatch("127.0.0.1:9093", "it answered with a TLS record");
        let text = error.to_string();
        assert!(error.is_fatal(), "{text}");
        assert!(
            text.contains("security.protocol=PLAINTEXT")
                && text.contains("127.0.0.1:9093")
                && text.contains("security.protocol=SSL"),
            "{text}"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_names_the_host_without_port_or_brackets() {
        assert_eq!(host_of("broker-1.example:9092"), "broker-1.example");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }
}
