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

mod authentication;
pub(crate) mod counters;
mod establish;
mod framing;

use authentication::{PipelinedTransport, SaslSession, reauthenticate};
use counters::NodeRequests;
pub(crate) use counters::{LinkCounters, LinkReading};
use establish::connect;
use framing::{read_frame, write_frame};

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::reconnect::ReconnectBackoff;
use super::security::{SaslConfig, SecurityConfig};
#[cfg(feature = "tls")]
use super::tls::TlsConnector;
use crate::error::{Error, ErrorChain};
use crate::protocol::frame::RequestFrame;
use crate::protocol::header::ResponseHeader;
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decode, Decoder, Request};
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
    /// Connections and per-broker requests, for the metrics the client pushes (KIP-714).
    counters: Arc<LinkCounters>,
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
            counters: Arc::default(),
        }
    }

    /// What the client's links counted: connections and per-broker requests (KIP-714).
    pub fn counters(&self) -> Arc<LinkCounters> {
        Arc::clone(&self.counters)
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
                .then(|| Arc::new(login_of(&config.sasl))),
        })
    }
}

/// The SASL settings every link of a client uses: with a token endpoint login (KIP-768), its
/// token provider, made once here so that the client's connections share one cached token.
fn login_of(sasl: &SaslConfig) -> SaslConfig {
    #[cfg(feature = "sasl-oauthbearer-oidc")]
    if sasl.token_provider.is_none() && sasl.token_endpoint.url.is_some() {
        let provider = crate::net::sasl::oidc_login::token_provider(&sasl.token_endpoint);
        return SaslConfig {
            token_provider: Some(provider),
            ..sasl.clone()
        };
    }
    sasl.clone()
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
        self.call_built(move |_| Ok(request), cap, client_id).await
    }

    /// Like [`BrokerLink::call_with_versions`], with the request built by `build` for the
    /// version negotiated, for a request whose fields depend on it: a generated encoder
    /// refuses a field the version cannot carry rather than dropping it, so what to send
    /// instead (or that the broker is too old, an error from `build`) is the caller's call.
    pub async fn call_built<R, B>(
        &self,
        build: B,
        cap: Option<i16>,
        client_id: Arc<str>,
    ) -> Result<(R::Response, BrokerApiVersions), Error>
    where
        R: Request,
        R::Response: Send + 'static,
        B: FnOnce(i16) -> Result<R, Error> + Send + 'static,
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
                    RequestFrame::contiguous(
                        &build(version)?,
                        version,
                        correlation_id,
                        Some(&client_id),
                    )?,
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
        // Shared: a Fetch answer's records stay slices of the frame read (no copy).
        let mut d = Decoder::shared(&body);
        let response = R::Response::read_body(&mut d, version)?;
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
    /// When it was handed to the connection: its round trip is counted from here, as the
    /// Java client's `request-latency` is.
    sent_at: Instant,
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
    let node = config.counters.node(&address);
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
                config.counters.connection_created();
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
        let ended = serve(
            connection,
            first,
            (&address, &node),
            &config,
            &mut rx,
            &mut correlation_id,
        )
        .await;
        config.counters.connection_closed();
        match ended {
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

/// Writes requests on `connection` to the broker at `address` (whose requests `node` counts),
/// starting with `first`, until it fails or the link closes.
async fn serve(
    connection: Connection,
    first: Outgoing,
    (address, node): (&str, &Arc<NodeRequests>),
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
        Arc::clone(node),
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
        let flexible = frame.flexible();
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
                    sent_at: Instant::now(),
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

/// An I/O error as the crate's error: a TLS failure no retry can fix becomes a fatal
/// [`Error::Tls`]; everything else is a retriable [`Error::Io`].
fn io_error(address: &str, e: &std::io::Error) -> Error {
    #[cfg(feature = "tls")]
    if let Some(fatal) = super::tls::classify(address, e) {
        return fatal;
    }
    Error::io(address, std::io::Error::new(e.kind(), e.to_string()))
}

async fn read_responses(
    read_half: ReadHalf<Stream>,
    address: String,
    pending: PendingQueue,
    node: Arc<NodeRequests>,
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
        node.answered(p.sent_at.elapsed());
        let mut body = frame;
        body.advance(header_len);
        (p.respond)(Ok((p.version, body)));
    };
    let _ = dead.send(error);
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
