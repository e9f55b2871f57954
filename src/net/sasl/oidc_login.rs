//! OAUTHBEARER tokens from an OAuth 2.0 token endpoint (KIP-768), as Java's
//! `OAuthBearerLoginCallbackHandler` and librdkafka's `sasl.oauthbearer.method=oidc` get them:
//! a client-credentials grant (RFC 6749 §4.4) with the client's id and secret in HTTP Basic
//! (§2.3.1), the answer's `access_token` (§5.1) checked to be a JWT naming a principal and an
//! expiry (RFC 7519), the SASL extensions added, and the token cached for every connection of
//! the client until 80% of its lifetime has passed (Java's default
//! `sasl.login.refresh.window.factor`), so that the KIP-368 re-authentication at 85% of a
//! session finds a fresh one.
//!
//! One fetch at a time: connections that authenticate together wait for the same answer. A
//! refused client (HTTP 4xx) or an endpoint that cannot be reached fails the authentication
//! with the endpoint's reason, which is fatal (`Error::Authentication`); a failed refresh while
//! the cached token is still valid keeps using it, so a short outage of the identity provider
//! does not stop a running client. The secret and the tokens are never logged.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use serde_json::Value;
use tokio::sync::watch;
use tracing::{info, warn};

use super::oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider};
use super::token_endpoint::TokenEndpointLogin;
use crate::net::secret::Secret;

/// Java's default `sasl.login.refresh.window.factor`: a token is replaced once this share of
/// its lifetime has passed.
const REFRESH_AT: f64 = 0.8;
/// The longest a token is kept, whatever lifetime it claims.
const LONGEST_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How much of an error answer's `error_description` the error keeps.
const DESCRIPTION_LIMIT: usize = 200;

/// The token provider of a login: every connection of one client shares its cache.
pub(crate) fn token_provider(login: &TokenEndpointLogin) -> OAuthBearerTokenProvider {
    let source = Arc::new(TokenSource {
        login: login.clone(),
        agent: agent(login),
        state: Mutex::new(CacheState::default()),
    });
    OAuthBearerTokenProvider::new(move || {
        let source = Arc::clone(&source);
        async move { source.token().await }
    })
}

fn agent(login: &TokenEndpointLogin) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(login.connect_timeout))
        .timeout_recv_response(Some(login.read_timeout))
        .timeout_recv_body(Some(login.read_timeout))
        // Error answers are read for their RFC 6749 §5.2 `error`, not turned into I/O errors.
        .http_status_as_error(false)
        .build()
        .new_agent()
}

struct TokenSource {
    login: TokenEndpointLogin,
    agent: ureq::Agent,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    cached: Option<CachedToken>,
    /// The fetch under way, if any: it ends with `Some(outcome)`.
    refreshing: Option<watch::Receiver<Option<Result<(), String>>>>,
}

struct CachedToken {
    token: OAuthBearerToken,
    refresh_at: Instant,
    expires_at: Instant,
}

impl TokenSource {
    /// The cached token while it is fresh; a still-valid one while a new one is fetched in
    /// the background; else waits for the fetch. The fetch runs in a task of its own that
    /// stores its token, so an authentication that gives up (its connection's timeout) does
    /// not throw the answer away, and every caller shares the one fetch.
    async fn token(self: Arc<Self>) -> Result<OAuthBearerToken, String> {
        let mut outcome = {
            let mut state = lock(&self.state);
            let now = Instant::now();
            if let Some(fresh) = state.cached.as_ref().filter(|c| now < c.refresh_at) {
                return Ok(fresh.token.clone());
            }
            let outcome = match &state.refreshing {
                Some(outcome) => outcome.clone(),
                None => {
                    let outcome = Arc::clone(&self).start_fetch();
                    state.refreshing = Some(outcome.clone());
                    outcome
                }
            };
            if let Some(valid) = state.cached.as_ref().filter(|c| now < c.expires_at) {
                return Ok(valid.token.clone());
            }
            outcome
        };
        let result = outcome
            .wait_for(Option::is_some)
            .await
            .map_err(|_| "the token request did not complete".to_owned())?
            .clone()
            .unwrap_or(Ok(()));
        let state = lock(&self.state);
        match (&state.cached, result) {
            (Some(cached), _) if Instant::now() < cached.expires_at => Ok(cached.token.clone()),
            (_, Err(reason)) => Err(reason),
            (_, Ok(())) => Err("the token endpoint's token expired at once".into()),
        }
    }

    /// Fetches in a task of its own, which stores the token and reports how it went.
    fn start_fetch(self: Arc<Self>) -> watch::Receiver<Option<Result<(), String>>> {
        let (report, outcome) = watch::channel(None);
        tokio::spawn(async move {
            let (agent, login) = (self.agent.clone(), self.login.clone());
            let fetched = tokio::task::spawn_blocking(move || fetch(&agent, &login))
                .await
                .unwrap_or_else(|e| Err(format!("the token request did not complete: {e}")));
            let mut state = lock(&self.state);
            state.refreshing = None;
            let result = match fetched {
                Ok(token) => {
                    info!(lifetime = ?token.lifetime, "fetched an OAuth token (KIP-768)");
                    let fetched_at = Instant::now();
                    state.cached = Some(CachedToken {
                        token: with_extensions(token.value, &self.login),
                        refresh_at: fetched_at + token.lifetime.mul_f64(REFRESH_AT),
                        expires_at: fetched_at + token.lifetime,
                    });
                    Ok(())
                }
                Err(reason) => {
                    if state
                        .cached
                        .as_ref()
                        .is_some_and(|c| Instant::now() < c.expires_at)
                    {
                        warn!(%reason, "refreshing the OAuth token failed; the current one is still valid");
                    }
                    Err(reason)
                }
            };
            drop(state);
            let _ = report.send(Some(result));
        });
        outcome
    }
}

fn lock(state: &Mutex<CacheState>) -> std::sync::MutexGuard<'_, CacheState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_extensions(value: Secret, login: &TokenEndpointLogin) -> OAuthBearerToken {
    login
        .extensions
        .iter()
        .fold(OAuthBearerToken::new(value), |token, (name, value)| {
            token.extension(name.clone(), value.clone())
        })
}

/// A token the endpoint gave, with how long it is valid from now.
#[derive(Debug)]
struct FetchedToken {
    value: Secret,
    lifetime: Duration,
}

/// One client-credentials request, on a blocking thread.
fn fetch(agent: &ureq::Agent, login: &TokenEndpointLogin) -> Result<FetchedToken, String> {
    let url = login.url.as_deref().unwrap_or_default();
    let id = login.client_id.as_deref().unwrap_or_default();
    let secret = login.client_secret.as_ref().map_or("", Secret::expose);
    // RFC 6749 §2.3.1 form-encodes both inside the Basic credentials; Java sends them as they
    // are unless `sasl.oauthbearer.header.urlencode` is true (KAFKA-16345), and so do we, for
    // the identity providers that do not decode them.
    let credentials = if login.header_urlencode {
        format!("{}:{}", form_encode(id), form_encode(secret))
    } else {
        format!("{id}:{secret}")
    };
    let credentials = STANDARD.encode(credentials);
    let mut body = String::from("grant_type=client_credentials");
    if let Some(scope) = login.scope.as_deref().filter(|s| !s.is_empty()) {
        body.push_str("&scope=");
        body.push_str(&form_encode(scope));
    }
    let mut response = agent
        .post(url)
        .header("Authorization", format!("Basic {credentials}"))
        .header("Accept", "application/json")
        .content_type("application/x-www-form-urlencoded")
        .send(body.as_str())
        .map_err(|e| format!("the token endpoint {url} could not be reached: {e}"))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("reading the token endpoint's answer failed: {e}"))?;
    token_from_answer(status, &text, &login.sub_claim_name, now_unix())
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Reads the endpoint's answer: an access token (RFC 6749 §5.1) or an error (§5.2). The token
/// must be a JWT with the principal's claim and an expiry, as Java's client-side check wants;
/// its lifetime is the sooner of `expires_in` and the JWT's `exp`.
fn token_from_answer(
    status: u16,
    text: &str,
    sub_claim: &str,
    now_unix: f64,
) -> Result<FetchedToken, String> {
    let answer: Option<Value> = serde_json::from_str(text).ok();
    let field = |name: &str| {
        answer
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
    };
    if !(200..300).contains(&status) {
        let mut reason = format!("the token endpoint refused the request (HTTP {status}");
        if let Some(error) = field("error") {
            reason.push_str(&format!(": {}", clip(error)));
        }
        if let Some(description) = field("error_description") {
            reason.push_str(&format!(", {}", clip(description)));
        }
        reason.push(')');
        return Err(reason);
    }
    let access_token = field("access_token")
        .filter(|t| !t.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    if let Some(kind) = field("token_type").filter(|kind| !kind.eq_ignore_ascii_case("bearer")) {
        return Err(format!(
            "the token endpoint gave a {} token, not a bearer token",
            clip(kind)
        ));
    }
    let claims = jwt_claims(access_token)?;
    match claims.get(sub_claim) {
        Some(Value::String(subject)) if !subject.is_empty() => {}
        _ => {
            return Err(format!(
                "the token names no principal in its {sub_claim:?} claim \
                 (sasl.oauthbearer.sub.claim.name)"
            ));
        }
    }
    let from_exp = claims
        .get("exp")
        .and_then(Value::as_f64)
        .map(|exp| exp - now_unix);
    let from_expires_in = answer
        .as_ref()
        .and_then(|a| a.get("expires_in"))
        .and_then(|v| v.as_f64().or_else(|| v.as_str()?.parse().ok()));
    let seconds = match (from_exp, from_expires_in) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return Err("the token has no exp claim".into()),
    };
    if seconds.is_nan() {
        return Err("the token's lifetime is not a number".into());
    }
    if seconds <= 0.0 {
        return Err("the token endpoint gave an expired token".into());
    }
    Ok(FetchedToken {
        value: Secret::new(access_token),
        // A token is asked for again after a day at the latest, however long it claims to
        // live (and an absurd claim cannot overflow the clock).
        lifetime: Duration::from_secs_f64(seconds.min(LONGEST_LIFETIME.as_secs_f64())),
    })
}

/// The claims of a JWT (its second, base64url part), without checking the signature: the
/// broker does that; the client only needs the principal and the expiry.
fn jwt_claims(token: &str) -> Result<serde_json::Map<String, Value>, String> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the access token is not a JWT (three dot-separated parts)".into());
    };
    let bytes = LENIENT
        .decode(payload)
        .map_err(|_| "the access token's claims are not base64url")?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(claims)) => Ok(claims),
        _ => Err("the access token's claims are not a JSON object".into()),
    }
}

/// `application/x-www-form-urlencoded` (the WHATWG URL standard's byte serializer), as RFC 6749
/// §2.3.1 asks for the id and secret inside the Basic credentials and §4.4.2 for the body.
fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

fn clip(text: &str) -> String {
    text.chars()
        .take(DESCRIPTION_LIMIT)
        .filter(|c| !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    const NOW: f64 = 1_800_000_000.0;

    fn jwt(claims: &str) -> String {
        format!(
            "{}.{}.c2lnbmF0dXJl",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","kid":"k1"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    fn answer(token: &str, extra: &str) -> String {
        format!(r#"{{"access_token":"{token}","token_type":"Bearer"{extra}}}"#)
    }

    #[test]
    fn the_lifetime_is_the_sooner_of_expires_in_and_exp() {
        let token = jwt(&format!(r#"{{"sub":"app","exp":{}}}"#, NOW + 300.0));
        let from_exp = token_from_answer(200, &answer(&token, ""), "sub", NOW).unwrap();
        assert_eq!(from_exp.lifetime, Duration::from_secs(300));
        assert_eq!(from_exp.value.expose(), token);
        let sooner = token_from_answer(200, &answer(&token, r#","expires_in":60"#), "sub", NOW);
        assert_eq!(sooner.unwrap().lifetime, Duration::from_secs(60));
        let no_exp = jwt(r#"{"sub":"app"}"#);
        let from_expires_in =
            token_from_answer(200, &answer(&no_exp, r#","expires_in":"120""#), "sub", NOW);
        assert_eq!(from_expires_in.unwrap().lifetime, Duration::from_secs(120));
        let error = token_from_answer(200, &answer(&no_exp, ""), "sub", NOW).unwrap_err();
        assert!(error.contains("exp"), "{error}");
        // Absurd lifetimes neither panic nor overflow the clock.
        let nan = token_from_answer(200, &answer(&no_exp, r#","expires_in":"NaN""#), "sub", NOW);
        assert!(nan.unwrap_err().contains("not a number"));
        let forever = jwt(r#"{"sub":"app","exp":1e300}"#);
        let capped = token_from_answer(200, &answer(&forever, ""), "sub", NOW).unwrap();
        assert_eq!(capped.lifetime, LONGEST_LIFETIME);
    }

    #[test]
    fn an_error_answer_says_why_without_echoing_the_body() {
        let error = token_from_answer(
            401,
            r#"{"error":"invalid_client","error_description":"Invalid client credentials","echo":"s3cret"}"#,
            "sub",
            NOW,
        )
        .unwrap_err();
        assert!(
            error.contains("HTTP 401: invalid_client, Invalid client credentials"),
            "{error}"
        );
        assert!(!error.contains("s3cret"));
        let error = token_from_answer(503, "<html>busy</html>", "sub", NOW).unwrap_err();
        assert_eq!(error, "the token endpoint refused the request (HTTP 503)");
    }

    #[test]
    fn a_token_must_be_a_live_jwt_naming_its_principal() {
        let refused = |token: &str, claim: &str, names: &str| {
            let error = token_from_answer(200, &answer(token, ""), claim, NOW).unwrap_err();
            assert!(error.contains(names), "{error}");
        };
        let live = format!(r#"{{"sub":"app","client":"other","exp":{}}}"#, NOW + 60.0);
        refused("opaque-token", "sub", "not a JWT");
        refused(&jwt(&live), "azp", "\"azp\" claim");
        refused(
            &jwt(&format!(r#"{{"sub":"app","exp":{}}}"#, NOW - 1.0)),
            "sub",
            "expired",
        );
        token_from_answer(200, &answer(&jwt(&live), ""), "client", NOW).unwrap();
        let wrong_type = answer(&jwt(&live), "").replace("Bearer", "mac");
        let error = token_from_answer(200, &wrong_type, "sub", NOW).unwrap_err();
        assert!(error.contains("not a bearer token"), "{error}");
    }

    #[test]
    fn credentials_are_form_encoded_as_rfc_6749_asks() {
        assert_eq!(form_encode("a b+c/d:e%é"), "a+b%2Bc%2Fd%3Ae%25%C3%A9");
        assert_eq!(form_encode("Az09*-._"), "Az09*-._");
    }

    #[test]
    fn extensions_go_with_every_token() {
        let mut login = TokenEndpointLogin::default();
        login
            .extensions
            .insert("logicalCluster".into(), "lkc-1".into());
        let token = with_extensions(Secret::new("t"), &login);
        assert_eq!(token.extensions["logicalCluster"], "lkc-1");
    }
}
