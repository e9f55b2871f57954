//! The settings of an OAUTHBEARER login through an OAuth 2.0 token endpoint (KIP-768): the
//! client-credentials grant (RFC 6749 §4.4) that Confluent Cloud, Strimzi with Keycloak and
//! Azure AD set-ups hand out, under Java's names (`sasl.oauthbearer.token.endpoint.url`, the
//! `OAuthBearerLoginModule` options `clientId` / `clientSecret` / `scope` / `extension_*`, and
//! KIP-1139's `sasl.oauthbearer.client.credentials.*`) and librdkafka's
//! (`sasl.oauthbearer.method=oidc`, `sasl.oauthbearer.client.id`, ...). The fetch itself is in
//! `oidc_login.rs` (crate feature `sasl-oauthbearer-oidc`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::Error;
use crate::net::properties::config_error;
use crate::net::secret::Secret;

// The settings' names; their rows (default, documentation) are in `settings.rs`.
pub(crate) const SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL: &str = "sasl.oauthbearer.token.endpoint.url";
pub(crate) const SASL_OAUTHBEARER_METHOD: &str = "sasl.oauthbearer.method";
pub(crate) const SASL_OAUTHBEARER_CLIENT_ID: &str = "sasl.oauthbearer.client.id";
pub(crate) const SASL_OAUTHBEARER_CLIENT_SECRET: &str = "sasl.oauthbearer.client.secret";
pub(crate) const SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID: &str =
    "sasl.oauthbearer.client.credentials.client.id";
pub(crate) const SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET: &str =
    "sasl.oauthbearer.client.credentials.client.secret";
pub(crate) const SASL_OAUTHBEARER_SCOPE: &str = "sasl.oauthbearer.scope";
pub(crate) const SASL_OAUTHBEARER_EXTENSIONS: &str = "sasl.oauthbearer.extensions";
pub(crate) const SASL_OAUTHBEARER_SUB_CLAIM_NAME: &str = "sasl.oauthbearer.sub.claim.name";
pub(crate) const SASL_LOGIN_CALLBACK_HANDLER_CLASS: &str = "sasl.login.callback.handler.class";
pub(crate) const SASL_LOGIN_CONNECT_TIMEOUT_MS: &str = "sasl.login.connect.timeout.ms";
pub(crate) const SASL_LOGIN_READ_TIMEOUT_MS: &str = "sasl.login.read.timeout.ms";
pub(crate) const SASL_OAUTHBEARER_HEADER_URLENCODE: &str = "sasl.oauthbearer.header.urlencode";

/// Every name [`TokenEndpointLogin::set`] takes.
pub(crate) const SETTINGS: [&str; 13] = [
    SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
    SASL_OAUTHBEARER_METHOD,
    SASL_OAUTHBEARER_CLIENT_ID,
    SASL_OAUTHBEARER_CLIENT_SECRET,
    SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID,
    SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET,
    SASL_OAUTHBEARER_SCOPE,
    SASL_OAUTHBEARER_EXTENSIONS,
    SASL_OAUTHBEARER_SUB_CLAIM_NAME,
    SASL_LOGIN_CALLBACK_HANDLER_CLASS,
    SASL_LOGIN_CONNECT_TIMEOUT_MS,
    SASL_LOGIN_READ_TIMEOUT_MS,
    SASL_OAUTHBEARER_HEADER_URLENCODE,
];

/// The claim that names the principal when `sasl.oauthbearer.sub.claim.name` is not set (as
/// Java's and the broker's validators).
const DEFAULT_SUB_CLAIM: &str = "sub";
/// How long connecting to the token endpoint, and then its answer, may take when
/// `sasl.login.connect.timeout.ms` / `sasl.login.read.timeout.ms` are not set (librdkafka
/// bounds its token request to 20 s; Java's HTTP client has no bound of its own).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// An OAUTHBEARER login through an OAuth 2.0 token endpoint with the client-credentials grant
/// (KIP-768). The client asks the endpoint for a token with its id and secret (HTTP Basic, RFC
/// 6749 §2.3.1), caches it, and asks for a new one when 80% of its lifetime has passed (Java's
/// default `sasl.login.refresh.window.factor`), before a KIP-368 re-authentication needs it.
///
/// Set from properties (`sasl.oauthbearer.token.endpoint.url` and the JAAS options of Kafka's
/// `OAuthBearerLoginModule`, or librdkafka's names), or with the builders'
/// `sasl_oauthbearer_client_credentials`. The endpoint must be `https://`, except on the
/// loopback interface; its certificate is checked against the Mozilla roots built in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenEndpointLogin {
    /// The token endpoint (`sasl.oauthbearer.token.endpoint.url`).
    pub url: Option<String>,
    /// The OAuth client id (JAAS `clientId`, `sasl.oauthbearer.client.id`).
    pub client_id: Option<String>,
    /// The OAuth client secret (JAAS `clientSecret`, `sasl.oauthbearer.client.secret`).
    pub client_secret: Option<Secret>,
    /// The scope to ask for (JAAS `scope`, `sasl.oauthbearer.scope`); none by default.
    pub scope: Option<String>,
    /// SASL extensions sent with every token (KIP-342; JAAS `extension_<name>`,
    /// `sasl.oauthbearer.extensions`), e.g. Confluent Cloud's `logicalCluster`.
    pub extensions: BTreeMap<String, String>,
    /// The JWT claim that must name the principal (`sasl.oauthbearer.sub.claim.name`,
    /// default `sub`).
    pub sub_claim_name: String,
    /// Bound of connecting to the endpoint (`sasl.login.connect.timeout.ms`, default 10 s).
    pub connect_timeout: Duration,
    /// Bound of the endpoint's answer (`sasl.login.read.timeout.ms`, default 10 s).
    pub read_timeout: Duration,
    /// librdkafka's `sasl.oauthbearer.method`: `Some(true)` for `oidc` (the endpoint is then
    /// required), `Some(false)` for `default` (the application's token provider).
    pub oidc_method: Option<bool>,
    /// Whether the id and secret are form-encoded inside the Basic credentials, as RFC 6749
    /// §2.3.1 says (`sasl.oauthbearer.header.urlencode`; default false, Java's default).
    pub header_urlencode: bool,
}

impl Default for TokenEndpointLogin {
    fn default() -> Self {
        TokenEndpointLogin {
            url: None,
            client_id: None,
            client_secret: None,
            scope: None,
            extensions: BTreeMap::new(),
            sub_claim_name: DEFAULT_SUB_CLAIM.to_owned(),
            connect_timeout: DEFAULT_TIMEOUT,
            read_timeout: DEFAULT_TIMEOUT,
            oidc_method: None,
            header_urlencode: false,
        }
    }
}

impl TokenEndpointLogin {
    /// Whether any setting of the login is given (librdkafka's `method=default` aside, which
    /// says there is none).
    pub(crate) fn is_given(&self) -> bool {
        let without_method = TokenEndpointLogin {
            oidc_method: None,
            ..self.clone()
        };
        without_method != TokenEndpointLogin::default()
    }

    /// Sets one of [`SETTINGS`].
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let millis = |value: &str| {
            value
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| config_error(key, format!("expected milliseconds, got {value:?}")))
        };
        match key {
            SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL => self.url = Some(value.trim().to_owned()),
            SASL_OAUTHBEARER_METHOD => {
                self.oidc_method = Some(match value.trim().to_ascii_lowercase().as_str() {
                    "oidc" => true,
                    "default" => false,
                    _ => {
                        return Err(config_error(
                            key,
                            format!("expected oidc or default, got {value:?}"),
                        ));
                    }
                })
            }
            SASL_OAUTHBEARER_CLIENT_ID | SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID => {
                self.client_id = Some(value.to_owned())
            }
            SASL_OAUTHBEARER_CLIENT_SECRET | SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET => {
                self.client_secret = Some(Secret::new(value))
            }
            SASL_OAUTHBEARER_SCOPE => self.scope = Some(value.to_owned()),
            SASL_OAUTHBEARER_EXTENSIONS => {
                // librdkafka's form: `name=value,name=value`.
                for pair in value.split(',').filter(|pair| !pair.trim().is_empty()) {
                    let Some((name, extension)) = pair.split_once('=') else {
                        return Err(config_error(
                            key,
                            "expected name=value pairs, comma-separated",
                        ));
                    };
                    self.extensions
                        .insert(name.trim().to_owned(), extension.trim().to_owned());
                }
            }
            SASL_OAUTHBEARER_SUB_CLAIM_NAME => self.sub_claim_name = value.trim().to_owned(),
            SASL_LOGIN_CALLBACK_HANDLER_CLASS => {
                // Java names the handler that does this login; a handler of the
                // application's own is Java code (here: the builders' token provider).
                let class = value.trim();
                if !class.ends_with(".OAuthBearerLoginCallbackHandler") {
                    return Err(config_error(
                        key,
                        format!(
                            "{class} is not understood: only Kafka's \
                             OAuthBearerLoginCallbackHandler (the token endpoint login) is; a \
                             login of your own is an OAuthBearerTokenProvider \
                             (the builders' sasl_oauthbearer)"
                        ),
                    ));
                }
            }
            SASL_LOGIN_CONNECT_TIMEOUT_MS => self.connect_timeout = millis(value)?,
            SASL_LOGIN_READ_TIMEOUT_MS => self.read_timeout = millis(value)?,
            SASL_OAUTHBEARER_HEADER_URLENCODE => {
                self.header_urlencode = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(config_error(
                            key,
                            format!("expected true or false, got {value:?}"),
                        ));
                    }
                }
            }
            _ => return Err(config_error(key, "not a token endpoint setting")),
        }
        Ok(())
    }

    /// Takes the options of a JAAS `OAuthBearerLoginModule` entry this login reads (`clientId`,
    /// `clientSecret`, `scope`, `extension_<name>`); the others (the `unsecuredLogin*` options
    /// of Kafka's test login) have no meaning here.
    pub(crate) fn set_jaas_options<'a>(
        &mut self,
        options: impl Iterator<Item = (&'a String, &'a Secret)>,
    ) {
        for (name, value) in options {
            match name.as_str() {
                "clientId" => self.client_id = Some(value.expose().to_owned()),
                "clientSecret" => self.client_secret = Some(value.clone()),
                "scope" => self.scope = Some(value.expose().to_owned()),
                _ => {
                    if let Some(extension) = name.strip_prefix("extension_") {
                        self.extensions
                            .insert(extension.to_owned(), value.expose().to_owned());
                    }
                }
            }
        }
    }

    /// Checks a login that is given: an endpoint this crate may send a secret to, with the
    /// client's id and secret. `has_provider`: the application also gave a token provider.
    pub(crate) fn validate(&self, has_provider: bool) -> Result<(), Error> {
        let Some(url) = &self.url else {
            if self.oidc_method == Some(true) || self.is_given() {
                return Err(config_error(
                    SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                    "the OAuth client-credentials login's settings are given without its \
                     token endpoint",
                ));
            }
            return Ok(());
        };
        if self.oidc_method == Some(false) {
            return Err(config_error(
                SASL_OAUTHBEARER_METHOD,
                "is default (the application's token provider) but a token endpoint is given",
            ));
        }
        if has_provider {
            return Err(config_error(
                SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                "is given beside a token provider: give one of them",
            ));
        }
        if !cfg!(feature = "sasl-oauthbearer-oidc") {
            return Err(config_error(
                SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                "the token endpoint login needs the crate feature `sasl-oauthbearer-oidc`",
            ));
        }
        check_endpoint(url)?;
        #[cfg(feature = "sasl-oauthbearer-oidc")]
        for (name, value) in &self.extensions {
            super::oauthbearer::check_extension(name, value)
                .map_err(|reason| config_error(SASL_OAUTHBEARER_EXTENSIONS, reason))?;
        }
        if self.client_id.as_deref().is_none_or(str::is_empty)
            || self
                .client_secret
                .as_ref()
                .is_none_or(|s| s.expose().is_empty())
        {
            return Err(config_error(
                SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                "the token endpoint login needs a client id and secret (the \
                 OAuthBearerLoginModule's clientId and clientSecret, or \
                 sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret)",
            ));
        }
        Ok(())
    }
}

/// The endpoint gets the client secret: `https://`, or `http://` to this machine only (a local
/// identity provider or a test's), never in clear text over a network.
fn check_endpoint(url: &str) -> Result<(), Error> {
    let invalid = |reason: &str| config_error(SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, reason);
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid("expected an https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // `http://localhost:1@idp.example/` is a request to idp.example: no user info at all.
    if authority.contains('@') {
        return Err(invalid(
            "must not carry user information (`user@`) before the host",
        ));
    }
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
    };
    if host.is_empty() {
        return Err(invalid("the URL names no host"));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(()),
        "http" if is_loopback(host) => Ok(()),
        "http" => Err(invalid(
            "must be https:// (the client secret would cross the network in clear text); \
             http:// is accepted for this machine's own addresses only",
        )),
        _ => Err(invalid("expected an https:// URL")),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(pairs: &[(&str, &str)]) -> TokenEndpointLogin {
        let mut login = TokenEndpointLogin::default();
        for (key, value) in pairs {
            login.set(key, value).unwrap();
        }
        login
    }

    #[test]
    fn java_and_librdkafka_names_land_in_the_same_fields() {
        let java = login(&[
            (
                SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                "https://idp.example/token",
            ),
            (
                SASL_LOGIN_CALLBACK_HANDLER_CLASS,
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            ),
            (SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_ID, "app"),
            (SASL_OAUTHBEARER_CLIENT_CREDENTIALS_CLIENT_SECRET, "s3cret"),
            (SASL_OAUTHBEARER_SCOPE, "kafka"),
        ]);
        let mut librdkafka = login(&[
            (SASL_OAUTHBEARER_METHOD, "OIDC"),
            (
                SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
                "https://idp.example/token",
            ),
            (SASL_OAUTHBEARER_CLIENT_ID, "app"),
            (SASL_OAUTHBEARER_CLIENT_SECRET, "s3cret"),
            (SASL_OAUTHBEARER_SCOPE, "kafka"),
        ]);
        librdkafka.oidc_method = None;
        assert_eq!(java, librdkafka);
        if cfg!(feature = "sasl-oauthbearer-oidc") {
            java.validate(false).unwrap();
        }
        assert!(!format!("{java:?}").contains("s3cret"), "{java:?}");
    }

    #[test]
    fn jaas_options_and_extensions_are_read() {
        let entry = crate::net::jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             clientId='app' clientSecret='s3cret' scope='kafka' \
             extension_logicalCluster='lkc-1' extension_identityPoolId='pool-2';",
        )
        .unwrap();
        let mut from_jaas = TokenEndpointLogin::default();
        from_jaas.set_jaas_options(entry.options.iter());
        let from_names = login(&[
            (SASL_OAUTHBEARER_CLIENT_ID, "app"),
            (SASL_OAUTHBEARER_CLIENT_SECRET, "s3cret"),
            (SASL_OAUTHBEARER_SCOPE, "kafka"),
            (
                SASL_OAUTHBEARER_EXTENSIONS,
                "logicalCluster=lkc-1, identityPoolId=pool-2",
            ),
        ]);
        assert_eq!(from_jaas, from_names);
    }

    #[test]
    fn a_secret_is_never_sent_in_clear_text_over_a_network() {
        for url in [
            "https://idp.example/token",
            "https://idp.example:8443/oauth2/token?x=1",
            "http://127.0.0.1:19990/token",
            "http://localhost/token",
            "http://[::1]:8080/token",
        ] {
            check_endpoint(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
        for url in [
            "http://idp.example/token",
            "http://10.0.0.1/token",
            "ftp://idp.example/token",
            "idp.example/token",
            "https:///token",
            "http://localhost:1@idp.example/token",
            "https://user@idp.example/token",
        ] {
            assert!(check_endpoint(url).is_err(), "{url} is refused");
        }
    }

    #[test]
    fn an_incomplete_or_contradictory_login_is_refused() {
        let refused = |pairs: &[(&str, &str)], has_provider: bool, names: &str| {
            let error = login(pairs).validate(has_provider).unwrap_err();
            assert!(error.to_string().contains(names), "{error}");
        };
        let url = (SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, "https://idp.example/t");
        refused(
            &[(SASL_OAUTHBEARER_METHOD, "oidc")],
            false,
            "token.endpoint.url",
        );
        refused(
            &[(SASL_OAUTHBEARER_CLIENT_ID, "app")],
            false,
            "token.endpoint.url",
        );
        refused(
            &[url, (SASL_OAUTHBEARER_METHOD, "default")],
            false,
            "method",
        );
        refused(
            &[(SASL_OAUTHBEARER_SCOPE, "kafka")],
            false,
            "token endpoint",
        );
        refused(&[url], true, "token provider");
        if cfg!(feature = "sasl-oauthbearer-oidc") {
            refused(
                &[url, (SASL_OAUTHBEARER_CLIENT_ID, "app")],
                false,
                "client id and secret",
            );
            let id = (SASL_OAUTHBEARER_CLIENT_ID, "app");
            let secret = (SASL_OAUTHBEARER_CLIENT_SECRET, "s");
            let extension = (SASL_OAUTHBEARER_EXTENSIONS, "logical_cluster=x");
            refused(&[url, id, secret, extension], false, "extension");
        }
        let mut login = TokenEndpointLogin::default();
        assert!(
            login
                .set(SASL_LOGIN_CALLBACK_HANDLER_CLASS, "com.example.MyHandler")
                .is_err()
        );
        assert!(login.set(SASL_LOGIN_READ_TIMEOUT_MS, "soon").is_err());
        assert!(login.set(SASL_OAUTHBEARER_EXTENSIONS, "novalue").is_err());
    }
}
