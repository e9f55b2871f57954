//! TLS for broker connections through rustls (no OpenSSL: the crate builds the same on musl
//! and static targets), with the `ring` provider (no C toolchain beyond `cc`, no cmake).
//!
//! Trust: the CA certificates the user gives in PEM or in a JKS or PKCS#12 trust store
//! (`stores`), or else the Mozilla root program's CAs
//! compiled in by `webpki-roots`. We chose webpki-roots over rustls-native-certs because the
//! public managed services (Confluent Cloud, MSK, Redpanda Cloud) present certificates from
//! public CAs, and a compiled-in list works the same in scratch/distroless containers and on
//! static musl builds, where system trust stores are often missing — one of the reasons to
//! pick this crate. A private CA (Aiven, self-hosted) is given with `ssl.truststore.*` or
//! `ssl.ca.location`.
//!
//! Host names: the broker's certificate must name the host dialled, by DNS name or IP address
//! (SNI carries DNS names; rustls sends none for an IP). With verification turned off
//! (`ssl.endpoint.identification.algorithm=` empty, as in Java) the chain is still checked
//! against the trusted CAs: only the name check is skipped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;
use tracing::warn;

use super::security::{Pem, TlsConfig};
use super::stores;
use crate::error::Error;

/// Opens TLS sessions to brokers with one shared rustls configuration.
#[derive(Clone)]
pub(crate) struct TlsConnector {
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsConnector")
    }
}

impl TlsConnector {
    /// Reads the PEM material and builds the rustls configuration; a missing or malformed
    /// file is a configuration error naming the property, found when the producer is built.
    pub fn new(config: &TlsConfig) -> Result<Self, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        match &config.ca {
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            Some(pem) => {
                let store = match pem {
                    Pem::File(path) => stores::store_format(path, config.truststore_type)
                        .map(|format| (path, format)),
                    Pem::Inline(_) => None,
                };
                let trusted = match store {
                    Some((path, format)) => stores::trusted_certificates(
                        path,
                        format,
                        config.truststore_password.as_ref(),
                    )?,
                    None => certificates(pem, "ssl.truststore.location")?,
                };
                for cert in trusted {
                    roots.add(cert).map_err(|e| {
                        config_error(
                            "ssl.truststore.location",
                            format!("bad CA certificate: {e}"),
                        )
                    })?;
                }
            }
        }
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| config_error("ssl.truststore.location", e.to_string()))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("security.protocol", e.to_string()))?;
        let builder = if config.verify_hostname {
            builder.with_webpki_verifier(verifier)
        } else {
            warn!(
                "ssl.endpoint.identification.algorithm is empty: broker certificates are not \
                 checked against the host name (a man in the middle holding any certificate of a \
                 trusted CA is accepted)"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostName(verifier)))
        };
        let client_config = match (&config.client_certificate, &config.client_key) {
            (Some(chain), Some(key)) => {
                // One file for both (`ssl.keystore.location`) may be a store.
                let store = match (chain, key) {
                    (Pem::File(path), Pem::File(key_path)) if path == key_path => {
                        stores::store_format(path, config.keystore_type)
                            .map(|format| (path, format))
                    }
                    _ => None,
                };
                let (chain, key) = match store {
                    Some((path, format)) => stores::client_identity(
                        path,
                        format,
                        config.keystore_password.as_ref(),
                        config.key_password.as_ref(),
                    )?,
                    None => (
                        certificates(chain, "ssl.keystore.certificate.chain")?,
                        private_key(key)?,
                    ),
                };
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| config_error("ssl.keystore.key", e.to_string()))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(TlsConnector {
            connector: tokio_rustls::TlsConnector::from(Arc::new(client_config)),
        })
    }

    /// Runs the TLS handshake over `io` to `host` (a DNS name or an IP address). A failed
    /// handshake gives `io` back with the error, so the caller can see what came over it.
    pub async fn connect<IO: AsyncRead + AsyncWrite + Unpin>(
        &self,
        host: &str,
        io: IO,
    ) -> Result<TlsStream<IO>, (std::io::Error, IO)> {
        let Ok(name) = ServerName::try_from(host.to_owned()) else {
            let error = std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{host:?} is not a valid TLS server name"),
            );
            return Err((error, io));
        };
        self.connector.connect(name, io).into_fallible().await
    }
}

/// A stream that counts the bytes read from it, to tell a TLS handshake the peer never
/// answered from one cut while it answered.
#[derive(Debug)]
pub(crate) struct CountingStream<S> {
    inner: S,
    bytes_read: u64,
}

impl<S> CountingStream<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            bytes_read: 0,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.bytes_read += (buf.filled().len() - before) as u64;
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CountingStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Whether a handshake failed because the peer's answer is not TLS at all: its first record
/// has a content type or a protocol version no TLS peer sends. A TLS client at a plaintext
/// listener that answers something (an HTTP server's reply, a Kafka response) fails so.
pub(crate) fn answered_without_tls(error: &std::io::Error) -> bool {
    let Some(tls) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    else {
        return false;
    };
    matches!(
        tls,
        rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
                | rustls::InvalidMessage::UnknownProtocolVersion
        )
    )
}

/// The TLS failure inside an I/O error, as a fatal [`Error::Tls`], when it is one a retry
/// cannot fix: a certificate we reject, or an alert by which the broker rejects ours or our
/// trust. Anything else (resets, EOF, timeouts) stays a retriable I/O error.
pub(crate) fn classify(broker: &str, error: &std::io::Error) -> Option<Error> {
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    let fatal = match tls {
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::UnsupportedNameType
        | rustls::Error::PeerIncompatible(_) => true,
        rustls::Error::AlertReceived(alert) => {
            use rustls::AlertDescription as A;
            matches!(
                alert,
                A::BadCertificate
                    | A::UnsupportedCertificate
                    | A::CertificateRevoked
                    | A::CertificateExpired
                    | A::CertificateUnknown
                    | A::UnknownCA
                    | A::AccessDenied
                    | A::CertificateRequired
                    | A::HandshakeFailure
                    | A::ProtocolVersion
                    | A::InsufficientSecurity
            )
        }
        _ => false,
    };
    fatal.then(|| Error::Tls {
        broker: broker.to_owned(),
        reason: describe(tls),
    })
}

fn describe(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "{error} (hostname mismatch: the broker's certificate does not name the host \
             dialled; ssl.endpoint.identification.algorithm= turns the check off)"
        ),
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "{error} (untrusted certificate: no trusted CA issued it; set \
             ssl.truststore.location or ssl.ca.location to the broker's CA)"
        ),
        rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
            | rustls::AlertDescription::BadCertificate,
        ) => format!("{error} (the broker requires a client certificate it trusts)"),
        _ => error.to_string(),
    }
}

/// Checks the chain like the WebPKI verifier but accepts any host name in it.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Every certificate in a PEM source; none at all is an error (e.g. a DER file).
fn certificates(pem: &Pem, setting: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let parsed: Result<Vec<_>, _> = match pem {
        Pem::File(path) => CertificateDer::pem_file_iter(path)
            .map_err(|e| config_error(setting, format!("cannot read {}: {e}", path.display())))?
            .collect(),
        Pem::Inline(text) => CertificateDer::pem_slice_iter(text.expose().as_bytes()).collect(),
    };
    let certs = parsed.map_err(|e| config_error(setting, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(config_error(
            setting,
            "holds no PEM certificate (a DER file? give PEM, or a JKS or PKCS12 store)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM source (PKCS#8, PKCS#1 or SEC1, unencrypted).
fn private_key(pem: &Pem) -> Result<PrivateKeyDer<'static>, Error> {
    const SETTING: &str = "ssl.keystore.key";
    match pem {
        Pem::File(path) => PrivateKeyDer::from_pem_file(path).map_err(|e| {
            config_error(
                SETTING,
                format!("no unencrypted private key in {}: {e}", path.display()),
            )
        }),
        Pem::Inline(text) => PrivateKeyDer::from_pem_slice(text.expose().as_bytes())
            .map_err(|e| config_error(SETTING, format!("no unencrypted private key: {e}"))),
    }
}

fn config_error(setting: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        setting: setting.to_owned(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::net::secret::Secret;

    fn setting_of(result: Result<TlsConnector, Error>) -> String {
        match result {
            Err(Error::Config { setting, .. }) => setting,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn public_roots_by_default() {
        TlsConnector::new(&TlsConfig::default()).unwrap();
    }

    #[test]
    fn unreadable_or_non_pem_material_is_a_configuration_error() {
        let missing = TlsConfig {
            ca: Some(Pem::File(PathBuf::from("/nonexistent/ca.pem"))),
            ..TlsConfig::default()
        };
        assert_eq!(
            setting_of(TlsConnector::new(&missing)),
            "ssl.truststore.location"
        );
        // Binary text given inline: no PEM block at all.
        let binary = TlsConfig {
            ca: Some(Pem::Inline(Secret::new("\u{fe}\u{ed}\u{fe}\u{ed} binary"))),
            ..TlsConfig::default()
        };
        assert_eq!(
            setting_of(TlsConnector::new(&binary)),
            "ssl.truststore.location"
        );
        let no_key = TlsConfig {
            client_certificate: Some(Pem::Inline(Secret::new("not a certificate"))),
            client_key: Some(Pem::Inline(Secret::new("not a key"))),
            ..TlsConfig::default()
        };
        assert_eq!(
            setting_of(TlsConnector::new(&no_key)),
            "ssl.keystore.certificate.chain"
        );
    }

    #[test]
    fn only_certificate_failures_are_fatal() {
        let untrusted = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let error = classify("b:1", &untrusted).unwrap();
        assert!(
            error.is_fatal() && error.to_string().contains("untrusted"),
            "{error}"
        );
        let cut = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert!(classify("b:1", &cut).is_none());
    }

    #[test]
    fn a_peer_that_does_not_answer_in_tls_is_told_from_a_cut() {
        let not_tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        );
        assert!(answered_without_tls(&not_tls));
        let cut = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert!(!answered_without_tls(&cut));
        let untrusted = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert!(!answered_without_tls(&untrusted));
    }

    /// A TLS handshake against a plaintext peer that answers with Kafka bytes (a response
    /// size, then a body) fails as "not TLS", without any broker.
    #[tokio::test]
    async fn a_handshake_with_a_plaintext_answer_is_not_tls() {
        let (client, mut server) = tokio::io::duplex(4096);
        let answer = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut hello = [0u8; 5];
            server.read_exact(&mut hello).await.unwrap();
            // What a plaintext Kafka listener's answer starts with: a size, then a body.
            server
                .write_all(&[0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
                .await
                .unwrap();
            hello
        });
        let connector = TlsConnector::new(&TlsConfig::default()).unwrap();
        let (error, stream) = connector
            .connect("127.0.0.1", CountingStream::new(client))
            .await
            .err()
            .unwrap();
        assert!(answered_without_tls(&error), "{error:?}");
        assert!(stream.bytes_read() > 0);
        // The ClientHello went out as a TLS handshake record.
        let hello = answer.await.unwrap();
        assert_eq!(hello[0], 0x16, "{hello:?}");
    }
}
