//! SASL authentication of a broker connection (KIP-43, KIP-152): SaslHandshake v1 names the
//! mechanism, then SaslAuthenticate requests carry the mechanism's messages until it is done.
//! The same exchange runs when a connection is opened and, for KIP-368 re-authentication,
//! between requests on an open connection; [`SaslTransport`] is how either place carries it.
//!
//! Any failure the broker reports (wrong password, unknown mechanism, a token it rejects) or
//! that the mechanism detects (a SCRAM server that cannot prove it knows the password) is an
//! [`Error::Authentication`]: fatal, since retrying the same credentials cannot succeed
//! (ARCHITECTURE.md, connections and security). Network failures stay I/O errors (retriable).

#[cfg(feature = "aws-msk-iam")]
pub(crate) mod aws_msk_iam;
#[cfg(feature = "gssapi")]
pub(crate) mod gssapi;
pub(crate) mod kerberos_login;
#[cfg(feature = "sasl-oauthbearer")]
pub(crate) mod oauthbearer;
#[cfg(feature = "sasl-oauthbearer-oidc")]
pub(crate) mod oidc_login;
pub(crate) mod plain;
#[cfg(any(feature = "sasl-oauthbearer", feature = "aws-msk-iam"))]
pub(crate) mod provider;
#[cfg(feature = "sasl-scram")]
pub(crate) mod scram;
pub(crate) mod token_endpoint;

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use super::security::{SaslConfig, SaslMechanism};
use crate::error::Error;
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

/// SaslHandshake v1: tokens then travel in SaslAuthenticate requests (KIP-152).
const HANDSHAKE_VERSION: i16 = 1;

/// One mechanism's side of a SASL conversation.
pub(crate) trait SaslClient: Send {
    /// The first message.
    fn initial(&mut self) -> Result<Vec<u8>, String>;
    /// The broker's answer to the last message: the next message, or `None` when the
    /// exchange is complete on the client's side.
    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String>;
}

/// Carries one request of the exchange to the broker and back.
pub(crate) trait SaslTransport: Send {
    /// Sends `request` at `version` and returns the decoded response.
    fn call<R>(
        &mut self,
        request: R,
        version: i16,
    ) -> impl Future<Output = Result<R::Response, Error>> + Send
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send;
}

/// Runs the whole exchange. Returns the session lifetime the broker set
/// (`connections.max.reauth.ms` or the credential's expiry, KIP-368), if any.
pub(crate) async fn authenticate<T: SaslTransport>(
    transport: &mut T,
    config: &SaslConfig,
    authenticate_version: i16,
    broker: &str,
) -> Result<Option<Duration>, Error> {
    let mechanism = config
        .mechanism
        .ok_or_else(|| failure(broker, "?", "no mechanism"))?;
    let name = mechanism.name();
    let handshake = transport
        .call(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name)),
            HANDSHAKE_VERSION,
        )
        .await?;
    if handshake.error_code != 0 {
        let code = ErrorCode(handshake.error_code);
        return Err(failure(
            broker,
            name,
            format!(
                "{code}; the listener enables {}",
                handshake.mechanisms.join(", ")
            ),
        ));
    }
    let mut client = client_for(mechanism, config, broker)
        .await
        .map_err(|reason| failure(broker, name, reason))?;
    let mut message = client
        .initial()
        .map_err(|reason| failure(broker, name, reason))?;
    loop {
        let response = transport
            .call(
                SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
                authenticate_version,
            )
            .await?;
        if response.error_code != 0 {
            let code = ErrorCode(response.error_code);
            let detail = response.error_message.unwrap_or_default();
            return Err(failure(broker, name, format!("{code}: {detail}")));
        }
        match client
            .step(&response.auth_bytes)
            .map_err(|reason| failure(broker, name, reason))?
        {
            Some(next) => message = next,
            None => {
                let lifetime = u64::try_from(response.session_lifetime_ms)
                    .ok()
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis);
                return Ok(lifetime);
            }
        }
    }
}

/// The mechanism's client for `broker`, with the credentials (fetching an OAUTHBEARER token,
/// signing for AWS_MSK_IAM).
async fn client_for(
    mechanism: SaslMechanism,
    config: &SaslConfig,
    // AWS_MSK_IAM signs for the broker's host; GSSAPI names the broker's principal with it.
    #[cfg_attr(
        not(any(feature = "aws-msk-iam", feature = "gssapi")),
        allow(unused_variables)
    )]
    broker: &str,
) -> Result<Box<dyn SaslClient>, String> {
    let credentials = || match (&config.username, &config.password) {
        (Some(user), Some(password)) => Ok((user.as_str(), password)),
        _ => Err(format!(
            "{} needs a username and password",
            mechanism.name()
        )),
    };
    match mechanism {
        SaslMechanism::Plain => {
            let (user, password) = credentials()?;
            Ok(Box::new(plain::PlainClient::new(user, password)))
        }
        #[cfg(feature = "sasl-scram")]
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let (user, password) = credentials()?;
            let hash = if mechanism == SaslMechanism::ScramSha256 {
                scram::ScramHash::Sha256
            } else {
                scram::ScramHash::Sha512
            };
            Ok(Box::new(scram::ScramClient::new(hash, user, password)?))
        }
        #[cfg(feature = "sasl-oauthbearer")]
        SaslMechanism::OAuthBearer => {
            let provider = config
                .token_provider
                .as_ref()
                .ok_or("OAUTHBEARER needs a token provider")?;
            let token = provider
                .token()
                .await
                .map_err(|e| format!("the token provider failed: {e}"))?;
            Ok(Box::new(oauthbearer::OAuthBearerClient::new(token)?))
        }
        #[cfg(feature = "aws-msk-iam")]
        SaslMechanism::AwsMskIam => {
            let credentials = aws_msk_iam::credentials_of(
                config.aws_credentials.as_ref(),
                config.aws_profile.as_deref(),
            )
            .await?;
            Ok(Box::new(aws_msk_iam::AwsMskIamClient::new(
                broker,
                &credentials,
            )?))
        }
        #[cfg(feature = "gssapi")]
        SaslMechanism::Gssapi => {
            // The principal is `<service>/<host>`, with the host as connected to (the address
            // the broker advertises), as Java's and librdkafka's clients name it.
            let login = config.kerberos.clone();
            let host = crate::net::properties::host_of(broker).to_owned();
            let client = tokio::task::spawn_blocking(move || {
                gssapi::GssapiClient::start(login.service_name(), &host, login.principal.as_deref())
            })
            .await
            .map_err(|e| format!("the Kerberos login stopped: {e}"))??;
            Ok(Box::new(client))
        }
        #[allow(unreachable_patterns)] // reached when a mechanism's feature is off
        other => Err(format!(
            "{} is not built into this crate (see its features)",
            other.name()
        )),
    }
}

fn failure(broker: &str, mechanism: &str, reason: impl Into<String>) -> Error {
    Error::Authentication {
        broker: broker.to_owned(),
        mechanism: mechanism.to_owned(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::net::secret::Secret;
    use crate::protocol::messages::sasl_authenticate::SaslAuthenticateResponse;
    use crate::protocol::messages::sasl_handshake::SaslHandshakeResponse;
    use crate::protocol::{Decode, Decoder, Message};

    /// Answers each call with the next scripted response and keeps what was sent.
    struct Scripted {
        answers: VecDeque<Vec<u8>>,
        sent: Vec<(i16, Vec<u8>)>,
    }

    impl Scripted {
        fn new(
            handshake: SaslHandshakeResponse,
            authenticate: &[SaslAuthenticateResponse],
        ) -> Self {
            let mut answers = VecDeque::new();
            let mut bytes = Vec::new();
            handshake.encode(HANDSHAKE_VERSION, &mut bytes);
            answers.push_back(bytes);
            for answer in authenticate {
                let mut bytes = Vec::new();
                answer.encode(2, &mut bytes);
                answers.push_back(bytes);
            }
            Scripted {
                answers,
                sent: Vec::new(),
            }
        }
    }

    impl SaslTransport for Scripted {
        async fn call<R>(&mut self, request: R, version: i16) -> Result<R::Response, Error>
        where
            R: Request + Send + Sync + 'static,
            R::Response: Send,
        {
            let mut bytes = bytes::BytesMut::new();
            request.write_body(version, &mut bytes)?;
            self.sent.push((R::API_KEY as i16, bytes.to_vec()));
            let answer = self.answers.pop_front().expect("a scripted answer");
            Ok(R::Response::read_body(&mut Decoder::new(&answer), version)?)
        }
    }

    // The token provider field exists only with `sasl-oauthbearer`.
    #[allow(clippy::needless_update)]
    fn plain() -> SaslConfig {
        SaslConfig {
            mechanism: Some(SaslMechanism::Plain),
            username: Some("alice".into()),
            password: Some(Secret::new("pw")),
            ..SaslConfig::default()
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn success_returns_the_session_lifetime() {
        let mut transport = Scripted::new(
            SaslHandshakeResponse::default(),
            &[SaslAuthenticateResponse {
                error_message: None,
                session_lifetime_ms: 10_000,
                ..SaslAuthenticateResponse::default()
            }],
        );
        let lifetime = block_on(authenticate(&mut transport, &plain(), 2, "b:1")).unwrap();
        assert_eq!(lifetime, Some(Duration::from_secs(10)));
        assert_eq!(transport.sent.len(), 2);
        assert_eq!(transport.sent[0].0, 17);
        assert_eq!(transport.sent[1].0, 36);
    }

    #[test]
    fn broker_refusals_are_authentication_errors() {
        let unsupported = SaslHandshakeResponse {
            error_code: 33,
            mechanisms: vec!["SCRAM-SHA-512".into()],
        };
        let mut transport = Scripted::new(unsupported, &[]);
        let error = block_on(authenticate(&mut transport, &plain(), 2, "b:1")).unwrap_err();
        assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
        assert!(error.to_string().contains("SCRAM-SHA-512"), "{error}");
        assert!(error.is_fatal());

        let mut transport = Scripted::new(
            SaslHandshakeResponse::default(),
            &[SaslAuthenticateResponse {
                error_code: 58,
                error_message: Some("Authentication failed: Invalid username or password".into()),
                ..SaslAuthenticateResponse::default()
            }],
        );
        let error = block_on(authenticate(&mut transport, &plain(), 2, "b:1")).unwrap_err();
        assert!(
            error.to_string().contains("SASL_AUTHENTICATION_FAILED"),
            "{error}"
        );
        assert!(!error.to_string().contains("pw"), "{error}");
        assert!(error.is_fatal() && !error.is_retriable());
    }
}
