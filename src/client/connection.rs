//! One link per broker: a task that connects on demand, negotiates API versions, writes
//! requests in the order they were handed over, and matches responses to them.
//!
//! Order matters: Produce requests to one broker carry consecutive sequences, so they are
//! written in the order the engine emitted them, through one channel per broker. Each request
//! learns whether it was written: a request that never reached the socket is "not written",
//! which the engine treats as certainly not in the log (DESIGN rule P1), while one that was
//! written and then lost its answer is "unresolved" (P5).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::metrics::ConnectionState;
use super::reconnect::{Reachability, ReachabilityChange, ReconnectBackoff};
use crate::error::Error;
use crate::protocol::header::{ResponseHeader, encode_request_frame};
use crate::protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Message, Request};

/// The largest response frame accepted (a hostile size prefix must not allocate gigabytes).
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

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
    Box<dyn FnOnce(&BrokerApiVersions, i32) -> Result<(BytesMut, i16, bool), Error> + Send>;

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
}

/// Settings of a link.
#[derive(Debug, Clone)]
pub(crate) struct LinkConfig {
    pub client_id: String,
    pub connect_timeout: Duration,
    /// `reconnect.backoff.ms`.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max: Duration,
}

impl BrokerLink {
    /// Starts the link task for `address` (`host:port`). It connects when the first request
    /// arrives.
    pub fn spawn(address: String, config: LinkConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(AtomicU8::new(ConnectionState::Connecting.to_u8()));
        tokio::spawn(run_link(address, config, rx, Arc::clone(&state)));
        Self { tx, state }
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
                    encode_request_frame(&request, version, correlation_id, Some(&client_id)),
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
    let mut reachability = Reachability::default();
    loop {
        let first = match next.take() {
            Some(out) => out,
            None => match rx.recv().await {
                Some(out) => out,
                None => return,
            },
        };
        set_state(ConnectionState::Connecting);
        let (stream, negotiated) = match connect(&address, &config, &mut correlation_id).await {
            Ok(ok) => {
                set_state(ConnectionState::Connected);
                backoff.connected();
                if let ReachabilityChange::Restored { attempts } = reachability.connected() {
                    info!(%address, failed_attempts = attempts, "connected to broker again");
                }
                ok
            }
            Err(error) => {
                set_state(ConnectionState::BackingOff);
                let wait = backoff.failed();
                match reachability.failed() {
                    ReachabilityChange::Lost => {
                        warn!(%address, %error, max_backoff = ?config.reconnect_backoff_max, "cannot connect to broker; retrying with backoff");
                    }
                    ReachabilityChange::StillDown { attempts } => {
                        debug!(%address, %error, attempts, retry_in = ?wait, "still cannot connect to broker");
                    }
                    ReachabilityChange::Restored { .. } | ReachabilityChange::Unchanged => {}
                }
                // Nothing was written: fail this request and everything queued behind it, so
                // the engine decides what to retry and when.
                (first.respond)(Err(SendFailure::NotWritten(error.clone())));
                while let Ok(out) = rx.try_recv() {
                    (out.respond)(Err(SendFailure::NotWritten(error.clone())));
                }
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let (read_half, mut write_half) = stream.into_split();
        let pending: PendingQueue = Arc::new(Mutex::new(VecDeque::new()));
        let (dead_tx, mut dead_rx) = oneshot::channel::<Error>();
        let reader = tokio::spawn(read_responses(read_half, Arc::clone(&pending), dead_tx));
        let mut out = Some(first);
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
            correlation_id = correlation_id.wrapping_add(1);
            let (frame, version, expects_response) =
                match (item.encode)(&negotiated, correlation_id) {
                    Ok(encoded) => encoded,
                    Err(error) => {
                        (item.respond)(Err(SendFailure::NotWritten(error)));
                        continue;
                    }
                };
            let api_key = i16::from_be_bytes([frame[4], frame[5]]);
            let flexible = is_flexible(api_key, version);
            if expects_response {
                pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(Pending {
                        correlation_id,
                        api_key,
                        flexible,
                        version,
                        respond: item.respond,
                    });
                if let Err(e) = write_half.write_all(&frame).await {
                    break Some(io_error(&address, &e));
                }
            } else {
                match write_half.write_all(&frame).await {
                    Ok(()) => (item.respond)(Ok((version, Bytes::new()))),
                    Err(e) => {
                        let error = io_error(&address, &e);
                        (item.respond)(Err(SendFailure::Lost(error.clone())));
                        break Some(error);
                    }
                }
            }
        };
        reader.abort();
        let _ = write_half.shutdown().await;
        let error = failure.clone().unwrap_or(Error::Closed);
        debug!(%address, %error, "connection closed");
        // Everything written and unanswered is lost; its outcome is unknown (P5).
        for p in pending.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            (p.respond)(Err(SendFailure::Lost(error.clone())));
        }
        if failure.is_none() {
            return;
        }
    }
}

fn io_error(address: &str, e: &std::io::Error) -> Error {
    Error::Io {
        broker: address.to_owned(),
        message: e.to_string(),
    }
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
        9 => offset_fetch::OffsetFetchRequest::is_flexible(version),
        11 => join_group::JoinGroupRequest::is_flexible(version),
        12 => heartbeat::HeartbeatRequest::is_flexible(version),
        13 => leave_group::LeaveGroupRequest::is_flexible(version),
        14 => sync_group::SyncGroupRequest::is_flexible(version),
        _ => false,
    }
}

async fn read_frame(reader: &mut BufReader<OwnedReadHalf>) -> std::io::Result<Bytes> {
    let size = reader.read_i32().await?;
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
    read_half: OwnedReadHalf,
    pending: PendingQueue,
    dead: oneshot::Sender<Error>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    let error = loop {
        let frame = match read_frame(&mut reader).await {
            Ok(frame) => frame,
            Err(e) => break io_error("broker", &e),
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

async fn connect(
    address: &str,
    config: &LinkConfig,
    correlation_id: &mut i32,
) -> Result<(TcpStream, BrokerApiVersions), Error> {
    let timeout = config.connect_timeout;
    let attempt = async {
        let mut stream = TcpStream::connect(address)
            .await
            .map_err(|e| io_error(address, &e))?;
        stream.set_nodelay(true).ok();
        let versions =
            negotiate_versions(&mut stream, address, &config.client_id, correlation_id).await?;
        Ok::<_, Error>((stream, versions))
    };
    tokio::time::timeout(timeout, attempt).await.map_err(|_| {
        Error::Timeout(format!(
            "connecting to {address} took longer than {timeout:?}"
        ))
    })?
}

/// ApiVersions at the highest version we implement; a broker that does not support it
/// answers in v0 with UNSUPPORTED_VERSION and its own range, and we ask again (KIP-511).
async fn negotiate_versions(
    stream: &mut TcpStream,
    address: &str,
    client_id: &str,
    correlation_id: &mut i32,
) -> Result<BrokerApiVersions, Error> {
    let mut version = ApiVersionsRequest::MAX_VERSION;
    for _ in 0..2 {
        *correlation_id = correlation_id.wrapping_add(1);
        let request = ApiVersionsRequest {
            client_software_name: "exactly".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        };
        let frame = encode_request_frame(&request, version, *correlation_id, Some(client_id));
        stream
            .write_all(&frame)
            .await
            .map_err(|e| io_error(address, &e))?;
        let size = stream.read_i32().await.map_err(|e| io_error(address, &e))?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| {
                Error::Timeout(format!(
                    "bad ApiVersions response size {size} from {address}"
                ))
            })?;
        let mut body = vec![0u8; size];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| io_error(address, &e))?;
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
