//! SASL/OAUTHBEARER (RFC 7628; KIP-255, with SASL extensions from KIP-342): the client sends a
//! bearer token it got from the application's provider, in one message. Kafka validates it
//! (a JWT, signed or, in test set-ups, unsecured) and answers with an empty message, or with
//! an error status.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use super::SaslClient;
use super::provider::{AsyncProvider, Provided};
use crate::net::secret::Secret;

/// A bearer token and the SASL extensions to send with it (KIP-342).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
pub struct OAuthBearerToken {
    /// The token (a JWT for Kafka's validators). Never printed.
    pub value: Secret,
    /// SASL extensions, e.g. Confluent Cloud's `logicalCluster` and `identityPoolId`. Names
    /// are letters only and not `auth`; values are printable ASCII (RFC 7628 §3.1).
    pub extensions: BTreeMap<String, String>,
}

impl OAuthBearerToken {
    /// A token without extensions.
    pub fn new(value: impl Into<Secret>) -> Self {
        OAuthBearerToken {
            value: value.into(),
            extensions: BTreeMap::new(),
        }
    }

    /// Adds a SASL extension.
    pub fn extension(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.insert(name.into(), value.into());
        self
    }
}

/// Where OAUTHBEARER tokens come from: an async function the application supplies, called for
/// every authentication (each new connection and each KIP-368 re-authentication), so it can
/// refresh tokens as they near expiry. Two providers are equal when they are the same function
/// object.
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
pub struct OAuthBearerTokenProvider(AsyncProvider<OAuthBearerToken>);

impl OAuthBearerTokenProvider {
    /// A provider from an async function.
    pub fn new<F, Fut>(provide: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<OAuthBearerToken, String>> + Send + 'static,
    {
        OAuthBearerTokenProvider(AsyncProvider::new(provide))
    }

    /// Asks the provider for a token.
    pub(crate) fn token(&self) -> Provided<OAuthBearerToken> {
        self.0.provide()
    }
}

impl fmt::Debug for OAuthBearerTokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OAuthBearerTokenProvider")
    }
}

/// The RFC 7628 key/value separator.
const SEPARATOR: char = '\u{1}';

/// RFC 7628 §3.1: key = 1*(ALPHA); value = *(VCHAR / SP / HTAB / CR / LF); KIP-342 reserves
/// `auth`.
pub(crate) fn check_extension(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) || name == "auth" {
        return Err(format!("invalid SASL extension name {name:?}"));
    }
    if !value
        .bytes()
        .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(format!("invalid value of SASL extension {name:?}"));
    }
    Ok(())
}

/// The client side of one OAUTHBEARER exchange.
pub(crate) struct OAuthBearerClient {
    token: OAuthBearerToken,
}

impl OAuthBearerClient {
    pub fn new(token: OAuthBearerToken) -> Result<Self, String> {
        for (name, value) in &token.extensions {
            check_extension(name, value)?;
        }
        if token.value.expose().is_empty() {
            return Err("the token provider returned an empty token".into());
        }
        Ok(OAuthBearerClient { token })
    }
}

impl SaslClient for OAuthBearerClient {
    /// `n,,^Aauth=Bearer <token>^A<name>=<value>^A...^A^A` (RFC 7628 §3.1).
    fn initial(&mut self) -> Result<Vec<u8>, String> {
        let mut message = format!(
            "n,,{SEPARATOR}auth=Bearer {}{SEPARATOR}",
            self.token.value.expose()
        );
        for (name, value) in &self.token.extensions {
            message.push_str(&format!("{name}={value}{SEPARATOR}"));
        }
        message.push(SEPARATOR);
        Ok(message.into_bytes())
    }

    /// Success is an empty answer; anything else is the server's error status (RFC 7628 §3.2.2).
    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        if challenge.is_empty() {
            Ok(None)
        } else {
            Err(format!(
                "the broker rejected the token: {}",
                String::from_utf8_lossy(challenge)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_response_carries_token_and_extensions() {
        let token = OAuthBearerToken::new("abc.def.")
            .extension("logicalCluster", "lkc-1")
            .extension("identityPoolId", "pool-2");
        let mut client = OAuthBearerClient::new(token).unwrap();
        let message = String::from_utf8(client.initial().unwrap()).unwrap();
        assert_eq!(
            message,
            "n,,\u{1}auth=Bearer abc.def.\u{1}identityPoolId=pool-2\u{1}logicalCluster=lkc-1\u{1}\u{1}"
        );
        assert_eq!(client.step(b"").unwrap(), None);
        assert!(client.step(br#"{"status":"invalid_token"}"#).is_err());
    }

    #[test]
    fn bad_extensions_and_empty_tokens_are_refused() {
        for token in [
            OAuthBearerToken::new("t").extension("auth", "x"),
            OAuthBearerToken::new("t").extension("a1", "x"),
            OAuthBearerToken::new("t").extension("a", "\u{1}"),
            OAuthBearerToken::new(""),
        ] {
            assert!(OAuthBearerClient::new(token).is_err());
        }
    }

    #[test]
    fn token_debug_is_redacted() {
        let shown = format!("{:?}", OAuthBearerToken::new("eyJsecret"));
        assert!(!shown.contains("eyJsecret"), "{shown}");
    }
}
