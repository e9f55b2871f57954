//! Opening a connection: TCP, then TLS when the link is secured, then ApiVersions (the
//! versions every later request is encoded at), with the probe that tells a listener speaking
//! the other `security.protocol` from a network failure.

#[cfg(feature = "tls")]
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::authentication::{DirectTransport, SaslSession, authenticate};
use super::framing::{read_opening_frame, write_frame};
use super::{Connection, LinkConfig, LinkSecurity, Stream, io_error};
use crate::error::Error;
#[cfg(feature = "tls")]
use crate::net::tls::TlsConnector;
use crate::protocol::header::{ResponseHeader, encode_request_frame};
use crate::protocol::messages::api_versions::ApiVersionsResponse;
use crate::protocol::versions::BrokerApiVersions;
use crate::protocol::{Decoder, Versioned};
use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;

/// How long the plaintext probe after a TLS handshake closed without an answer may take.
#[cfg(feature = "tls")]
pub(super) const PLAINTEXT_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens a connection: TCP, then TLS if configured, ApiVersions, then SASL if configured; all
/// within the connect timeout.
pub(super) async fn connect(
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
pub(super) async fn tls_handshake(
    tls: &TlsConnector,
    address: &str,
    tcp: TcpStream,
    config: &LinkConfig,
) -> Result<tokio_rustls::client::TlsStream<crate::net::tls::CountingStream<TcpStream>>, Error> {
    use std::io::ErrorKind as K;
    let (error, tcp) = match tls
        .connect(
            crate::net::properties::host_of(address),
            crate::net::tls::CountingStream::new(tcp),
        )
        .await
    {
        Ok(stream) => return Ok(stream),
        Err(failed) => failed,
    };
    if crate::net::tls::answered_without_tls(&error) {
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

/// ApiVersions at the highest version we implement; a broker that does not support it
/// answers in v0 with UNSUPPORTED_VERSION and its own range, and we ask again (KIP-511).
pub(super) async fn negotiate_versions(
    stream: &mut Stream,
    address: &str,
    client_id: &str,
    correlation_id: &mut i32,
    security: &LinkSecurity,
) -> Result<BrokerApiVersions, Error> {
    let mut version = ApiVersionsRequest::MAX_VERSION;
    for _ in 0..2 {
        *correlation_id = correlation_id.wrapping_add(1);
        // KIP-511: the broker checks both against `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`
        // (INVALID_REQUEST otherwise). v0–2 have neither field; the schema marks them
        // ignorable, so the generated encoder leaves them out there instead of refusing.
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("exactly"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let frame = encode_request_frame(&request, version, *correlation_id, Some(client_id))?;
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
