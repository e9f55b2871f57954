//! How a client secures its connections: `security.protocol`, TLS trust and client
//! certificates, and SASL credentials, under the Java client's property names (and the few
//! librdkafka names people copy from Confluent Cloud or MSK snippets).
//!
//! Key material is read as PEM, or from Java's JKS and PKCS#12 stores with their passwords
//! (crate feature `keystores`, on by default). A `ssl.truststore.location` or
//! `ssl.keystore.location` without a type is read as what its content is (Java's default type
//! is JKS, and files copied from a Java client's setup are often given without one); a file
//! that holds no usable certificate or key is reported when the client is built.

use std::path::PathBuf;
use std::str::FromStr;

use super::jaas;
use super::properties::config_error;
use super::sasl::{kerberos_login, token_endpoint};
use super::secret::Secret;
use crate::error::Error;

#[cfg(feature = "aws-msk-iam")]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
pub use super::sasl::aws_msk_iam::{AwsCredentials, AwsCredentialsProvider};
pub use super::sasl::kerberos_login::KerberosLogin;
#[cfg(feature = "sasl-oauthbearer")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
pub use super::sasl::oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider};
pub use super::sasl::token_endpoint::TokenEndpointLogin;

// The security settings' names; their rows (default, documentation) are in `settings.rs`.
pub(crate) const SECURITY_PROTOCOL: &str = "security.protocol";
pub(crate) const SSL_TRUSTSTORE_TYPE: &str = "ssl.truststore.type";
pub(crate) const SSL_TRUSTSTORE_LOCATION: &str = "ssl.truststore.location";
pub(crate) const SSL_TRUSTSTORE_CERTIFICATES: &str = "ssl.truststore.certificates";
pub(crate) const SSL_CA_LOCATION: &str = "ssl.ca.location";
pub(crate) const SSL_KEYSTORE_TYPE: &str = "ssl.keystore.type";
pub(crate) const SSL_KEYSTORE_LOCATION: &str = "ssl.keystore.location";
pub(crate) const SSL_KEYSTORE_CERTIFICATE_CHAIN: &str = "ssl.keystore.certificate.chain";
pub(crate) const SSL_KEYSTORE_KEY: &str = "ssl.keystore.key";
pub(crate) const SSL_TRUSTSTORE_PASSWORD: &str = "ssl.truststore.password";
pub(crate) const SSL_KEYSTORE_PASSWORD: &str = "ssl.keystore.password";
pub(crate) const SSL_KEY_PASSWORD: &str = "ssl.key.password";
pub(crate) const SSL_CERTIFICATE_LOCATION: &str = "ssl.certificate.location";
pub(crate) const SSL_KEY_LOCATION: &str = "ssl.key.location";
pub(crate) const SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: &str =
    "ssl.endpoint.identification.algorithm";
pub(crate) const SASL_MECHANISM: &str = "sasl.mechanism";
pub(crate) const SASL_MECHANISMS: &str = "sasl.mechanisms";
pub(crate) const SASL_JAAS_CONFIG: &str = "sasl.jaas.config";
pub(crate) const SASL_USERNAME: &str = "sasl.username";
pub(crate) const SASL_PASSWORD: &str = "sasl.password";
pub(crate) const SASL_CLIENT_CALLBACK_HANDLER_CLASS: &str = "sasl.client.callback.handler.class";

/// `security.protocol`: whether connections use TLS, SASL, both or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// Plain TCP (the default).
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS (Confluent Cloud, MSK with SCRAM, Aiven, ...).
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl FromStr for SecurityProtocol {
    type Err = Error;

    /// Parses as Java's `SecurityProtocol.forName`: the names, in any case.
    fn from_str(value: &str) -> Result<Self, Error> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(config_error(
                SECURITY_PROTOCOL,
                format!("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; got {value:?}"),
            )),
        }
    }
}

/// PEM text, in a file or given inline. Inline text is kept as a [`Secret`]: it may be a key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pem {
    /// A file holding PEM blocks.
    File(PathBuf),
    /// PEM blocks given as text.
    Inline(Secret),
}

/// The format of a trust or key store file (`ssl.truststore.type`, `ssl.keystore.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreType {
    /// PEM blocks: certificates, and for a key store the private key beside them.
    Pem,
    /// Java's own keystore format (`keytool -storetype JKS`), read with its store password;
    /// crate feature `keystores`.
    Jks,
    /// PKCS#12 (`.p12`, `.pfx`; keytool's default since Java 9), read with its store
    /// password; crate feature `keystores`.
    Pkcs12,
}

impl FromStr for StoreType {
    type Err = Error;

    /// Parses as Java's `KeyStore.getInstance`: the names, in any case.
    fn from_str(value: &str) -> Result<Self, Error> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PEM" => Ok(StoreType::Pem),
            "JKS" => Ok(StoreType::Jks),
            "PKCS12" => Ok(StoreType::Pkcs12),
            _ => Err(config_error(
                SSL_TRUSTSTORE_TYPE,
                format!("expected PEM, JKS or PKCS12; got {value:?}"),
            )),
        }
    }
}

/// TLS settings (used when [`SecurityProtocol::uses_tls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsConfig {
    /// The certificate authorities to trust (`ssl.truststore.location` /
    /// `ssl.truststore.certificates` / `ssl.ca.location`); `None`: the Mozilla root program's
    /// CAs built into the crate (webpki-roots), which is what public managed clusters use.
    pub ca: Option<Pem>,
    /// The client certificate chain for mutual TLS (`ssl.keystore.certificate.chain`,
    /// `ssl.certificate.location`, or the certificates of `ssl.keystore.location`).
    pub client_certificate: Option<Pem>,
    /// The client certificate's private key, unencrypted PKCS#8, PKCS#1 or SEC1
    /// (`ssl.keystore.key`, `ssl.key.location`, or the key of `ssl.keystore.location`).
    pub client_key: Option<Pem>,
    /// Whether the broker's certificate must name the host dialled
    /// (`ssl.endpoint.identification.algorithm=https`, the default; empty turns it off).
    pub verify_hostname: bool,
    /// The format of the [`TlsConfig::ca`] file (`ssl.truststore.type`); `None`: what the
    /// file's content is (a JKS or PKCS#12 store, else PEM).
    pub truststore_type: Option<StoreType>,
    /// The trust store's password (`ssl.truststore.password`). Without one a JKS trust store
    /// is read unchecked (its integrity check is keyed with the password), as Java reads it,
    /// and a PKCS#12 one with the empty password.
    pub truststore_password: Option<Secret>,
    /// The format of the `ssl.keystore.location` file (`ssl.keystore.type`); `None`: what the
    /// file's content is.
    pub keystore_type: Option<StoreType>,
    /// The key store's password (`ssl.keystore.password`).
    pub keystore_password: Option<Secret>,
    /// The password of the private key inside a JKS or PKCS#12 key store
    /// (`ssl.key.password`); `None`: the store's password, as keytool sets it.
    pub key_password: Option<Secret>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            ca: None,
            client_certificate: None,
            client_key: None,
            verify_hostname: true,
            truststore_type: None,
            truststore_password: None,
            keystore_type: None,
            keystore_password: None,
            key_password: None,
        }
    }
}

/// A SASL mechanism (`sasl.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password travels as is; use it over TLS only.
    Plain,
    /// `SCRAM-SHA-256` (RFC 5802, RFC 7677).
    ScramSha256,
    /// `SCRAM-SHA-512` (RFC 5802).
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628, KIP-255) with a token from an application's provider.
    OAuthBearer,
    /// `AWS_MSK_IAM`: Amazon MSK's IAM access control, a SigV4-signed payload (crate feature
    /// `aws-msk-iam`).
    AwsMskIam,
    /// `GSSAPI` (RFC 4752): Kerberos V5 through the system's GSSAPI library (crate feature
    /// `gssapi`).
    Gssapi,
}

impl SaslMechanism {
    /// The mechanism's name in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
            SaslMechanism::AwsMskIam => "AWS_MSK_IAM",
            SaslMechanism::Gssapi => "GSSAPI",
        }
    }
}

impl FromStr for SaslMechanism {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self, Error> {
        match value.trim() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "AWS_MSK_IAM" => Ok(SaslMechanism::AwsMskIam),
            "GSSAPI" => Ok(SaslMechanism::Gssapi),
            other => Err(config_error(
                SASL_MECHANISM,
                format!(
                    "{other:?} is not supported; expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, \
                     OAUTHBEARER, AWS_MSK_IAM or GSSAPI"
                ),
            )),
        }
    }
}

/// SASL settings (used when [`SecurityProtocol::uses_sasl`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SaslConfig {
    /// The mechanism; required with a SASL protocol (Java's default is GSSAPI; here it is
    /// named, so that a file without it fails clearly in a build without the `gssapi` feature).
    pub mechanism: Option<SaslMechanism>,
    /// The user (PLAIN, SCRAM): `sasl.username` or the JAAS `username` option.
    pub username: Option<String>,
    /// The password (PLAIN, SCRAM): `sasl.password` or the JAAS `password` option.
    pub password: Option<Secret>,
    /// Where OAUTHBEARER tokens come from.
    #[cfg(feature = "sasl-oauthbearer")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
    pub token_provider: Option<OAuthBearerTokenProvider>,
    /// OAUTHBEARER tokens fetched from an OAuth token endpoint (KIP-768), when no
    /// `token_provider` is given; crate feature `sasl-oauthbearer-oidc`.
    pub token_endpoint: TokenEndpointLogin,
    /// Where AWS_MSK_IAM credentials come from; `None`: the environment.
    #[cfg(feature = "aws-msk-iam")]
    #[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
    pub aws_credentials: Option<AwsCredentialsProvider>,
    /// The shared credentials file's profile AWS_MSK_IAM signs with (JAAS `awsProfileName`);
    /// `None`: the environment, then `AWS_PROFILE` or `default`.
    pub aws_profile: Option<String>,
    /// The GSSAPI (Kerberos) login: service name, principal, keytab.
    pub kerberos: KerberosLogin,
}

/// `error` (a configuration error from a parser that names one property) naming `key`, the
/// property given: `ssl.keystore.type` shares the trust store's parser, `sasl.mechanisms`
/// `sasl.mechanism`'s.
fn named(key: &str, error: Error) -> Error {
    match error {
        Error::Config { reason, .. } => config_error(key, reason),
        other => other,
    }
}

/// Everything about securing connections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SecurityConfig {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// TLS settings.
    pub tls: TlsConfig,
    /// SASL settings.
    pub sasl: SaslConfig,
}

impl SecurityConfig {
    /// Sets a security property by its name (a row of the settings tables, `settings.rs`).
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let value = value.trim();
        let file = || Some(Pem::File(PathBuf::from(value)));
        let inline = || Some(Pem::Inline(Secret::new(value)));
        match key {
            SECURITY_PROTOCOL => return value.parse().map(|p| self.protocol = p),
            SSL_TRUSTSTORE_TYPE | SSL_KEYSTORE_TYPE => {
                let kind = value.parse::<StoreType>().map_err(|e| named(key, e))?;
                if kind != StoreType::Pem && !cfg!(feature = "keystores") {
                    return Err(config_error(
                        key,
                        "JKS and PKCS12 stores need the crate feature `keystores`",
                    ));
                }
                if key == SSL_TRUSTSTORE_TYPE {
                    self.tls.truststore_type = Some(kind);
                } else {
                    self.tls.keystore_type = Some(kind);
                }
            }
            SSL_TRUSTSTORE_PASSWORD => self.tls.truststore_password = Some(Secret::new(value)),
            SSL_KEYSTORE_PASSWORD => self.tls.keystore_password = Some(Secret::new(value)),
            SSL_KEY_PASSWORD => self.tls.key_password = Some(Secret::new(value)),
            SSL_TRUSTSTORE_LOCATION | SSL_CA_LOCATION => self.tls.ca = file(),
            SSL_TRUSTSTORE_CERTIFICATES => self.tls.ca = inline(),
            // A PEM keystore file holds the key and the certificate chain together.
            SSL_KEYSTORE_LOCATION => {
                self.tls.client_certificate = file();
                self.tls.client_key = file();
            }
            SSL_KEYSTORE_CERTIFICATE_CHAIN => self.tls.client_certificate = inline(),
            SSL_KEYSTORE_KEY => self.tls.client_key = inline(),
            SSL_CERTIFICATE_LOCATION => self.tls.client_certificate = file(),
            SSL_KEY_LOCATION => self.tls.client_key = file(),
            SSL_ENDPOINT_IDENTIFICATION_ALGORITHM => match value {
                // Warned about when the producer is built (`TlsConnector::new`).
                "" => self.tls.verify_hostname = false,
                v if v.eq_ignore_ascii_case("https") => self.tls.verify_hostname = true,
                other => {
                    return Err(config_error(
                        key,
                        format!("expected https or an empty value, got {other:?}"),
                    ));
                }
            },
            SASL_MECHANISM | SASL_MECHANISMS => {
                // Under either name the error names the property given.
                return value
                    .parse()
                    .map(|m| self.sasl.mechanism = Some(m))
                    .map_err(|e| named(key, e));
            }
            SASL_USERNAME => self.sasl.username = Some(value.to_owned()),
            SASL_PASSWORD => self.sasl.password = Some(Secret::new(value)),
            SASL_JAAS_CONFIG => return self.set_jaas(value),
            SASL_CLIENT_CALLBACK_HANDLER_CLASS => {
                // MSK's guides set the IAM library's handler; it is what AWS_MSK_IAM does here.
                let class = value.trim();
                if class != "software.amazon.msk.auth.iam.IAMClientCallbackHandler" {
                    return Err(config_error(
                        key,
                        format!(
                            "{class} is not understood: only the aws-msk-iam-auth library's \
                             IAMClientCallbackHandler (AWS_MSK_IAM) is"
                        ),
                    ));
                }
            }
            key if token_endpoint::SETTINGS.contains(&key) => {
                return self.sasl.token_endpoint.set(key, value);
            }
            key if kerberos_login::SETTINGS.contains(&key) => {
                return self.sasl.kerberos.set(key, value);
            }
            // Only the security rows call this, each with its own name.
            _ => return Err(config_error(key, "not a security property")),
        }
        Ok(())
    }

    /// Takes the credentials out of a `sasl.jaas.config` entry.
    fn set_jaas(&mut self, value: &str) -> Result<(), Error> {
        let entry = jaas::parse(value).map_err(|reason| config_error(SASL_JAAS_CONFIG, reason))?;
        match entry.module_name() {
            "PlainLoginModule" | "ScramLoginModule" => {
                let (Some(username), Some(password)) =
                    (entry.option("username"), entry.option("password"))
                else {
                    return Err(config_error(
                        SASL_JAAS_CONFIG,
                        format!("{} needs username and password", entry.module_name()),
                    ));
                };
                self.sasl.username = Some(username.expose().to_owned());
                self.sasl.password = Some(password.clone());
                Ok(())
            }
            // The client-credentials login's options; without a token endpoint, tokens come
            // from the application's provider.
            "OAuthBearerLoginModule" => {
                self.sasl
                    .token_endpoint
                    .set_jaas_options(entry.options.iter());
                Ok(())
            }
            // AWS_MSK_IAM: credentials from the environment or the application's provider; the
            // library's own options (a profile, a role to assume) would need the AWS SDK's
            // credential chain, which is the provider's to bring.
            "IAMLoginModule" => {
                for (option, value) in &entry.options {
                    match option.as_str() {
                        "awsProfileName" => self.sasl.aws_profile = Some(value.expose().to_owned()),
                        // Only changes what the Java library logs.
                        "awsDebugCreds" => {}
                        _ => {
                            return Err(config_error(
                                SASL_JAAS_CONFIG,
                                format!(
                                    "IAMLoginModule option {option} is not supported: AWS \
                                     credentials come from the environment, a profile of the \
                                     shared credentials file (awsProfileName) or the builders' \
                                     sasl_aws_msk_iam provider (which can wrap aws-config's \
                                     roles and SSO)"
                                ),
                            ));
                        }
                    }
                }
                Ok(())
            }
            // GSSAPI: Java's own Kerberos login module.
            "Krb5LoginModule" => self.sasl.kerberos.set_jaas_options(entry.options.iter()),
            other => Err(config_error(
                SASL_JAAS_CONFIG,
                format!(
                    "login module {other} is not supported (PlainLoginModule, ScramLoginModule, \
                     OAuthBearerLoginModule, IAMLoginModule and Krb5LoginModule are)"
                ),
            )),
        }
    }

    /// Checks that the settings the protocol needs are there and belong together.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.protocol.uses_tls() {
            if !cfg!(feature = "tls") {
                return Err(config_error(
                    SECURITY_PROTOCOL,
                    "TLS needs the crate feature `tls`",
                ));
            }
            self.validate_stores()?;
            match (&self.tls.client_certificate, &self.tls.client_key) {
                (Some(_), None) => {
                    return Err(config_error(
                        SSL_KEYSTORE_KEY,
                        "a client certificate needs its private key (ssl.keystore.key or \
                         ssl.key.location)",
                    ));
                }
                (None, Some(_)) => {
                    return Err(config_error(
                        SSL_KEYSTORE_CERTIFICATE_CHAIN,
                        "a client key needs its certificate chain \
                         (ssl.keystore.certificate.chain or ssl.certificate.location)",
                    ));
                }
                _ => {}
            }
        }
        if self.protocol.uses_sasl() {
            self.validate_sasl()?;
        }
        Ok(())
    }

    /// A JKS or PKCS#12 store is a file with its password; a password without a store is an
    /// encrypted PEM key, which is not read.
    fn validate_stores(&self) -> Result<(), Error> {
        let tls = &self.tls;
        let is_store = |kind: Option<StoreType>| kind.is_some_and(|k| k != StoreType::Pem);
        if is_store(tls.truststore_type) {
            if matches!(tls.ca, Some(Pem::Inline(_))) {
                return Err(config_error(
                    SSL_TRUSTSTORE_CERTIFICATES,
                    "inline certificates are PEM; a JKS or PKCS12 trust store is a file \
                     (ssl.truststore.location)",
                ));
            }
            if tls.ca.is_none() {
                return Err(config_error(
                    SSL_TRUSTSTORE_LOCATION,
                    "ssl.truststore.type names a JKS or PKCS12 store: give its file",
                ));
            }
        }
        if is_store(tls.keystore_type) {
            let same_file = match (&tls.client_certificate, &tls.client_key) {
                (Some(Pem::File(chain)), Some(Pem::File(key))) => chain == key,
                _ => false,
            };
            if !same_file {
                return Err(config_error(
                    SSL_KEYSTORE_LOCATION,
                    "ssl.keystore.type names a JKS or PKCS12 store: give its file as \
                     ssl.keystore.location (it holds the key and its certificates together)",
                ));
            }
        }
        if tls.key_password.is_some() && tls.keystore_type == Some(StoreType::Pem) {
            return Err(config_error(
                SSL_KEY_PASSWORD,
                "encrypted PEM private keys are not supported; give an unencrypted PKCS#8 key \
                 (`openssl pkcs8 -topk8 -nocrypt`) or a JKS or PKCS12 key store",
            ));
        }
        Ok(())
    }

    fn validate_sasl(&self) -> Result<(), Error> {
        let Some(mechanism) = self.sasl.mechanism else {
            return Err(config_error(
                SASL_MECHANISM,
                "is required with a SASL security.protocol (PLAIN, SCRAM-SHA-256, \
                 SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI)",
            ));
        };
        match mechanism {
            SaslMechanism::Plain | SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                if matches!(
                    mechanism,
                    SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512
                ) && !cfg!(feature = "sasl-scram")
                {
                    return Err(config_error(
                        SASL_MECHANISM,
                        "SCRAM needs the crate feature `sasl-scram`",
                    ));
                }
                if self.sasl.username.is_none() || self.sasl.password.is_none() {
                    return Err(config_error(
                        SASL_JAAS_CONFIG,
                        format!(
                            "{} needs a username and a password (sasl.jaas.config, or \
                             sasl.username and sasl.password)",
                            mechanism.name()
                        ),
                    ));
                }
            }
            SaslMechanism::Gssapi => {
                if !cfg!(feature = "gssapi") {
                    return Err(config_error(
                        SASL_MECHANISM,
                        "GSSAPI needs the crate feature `gssapi` (it links the system's MIT \
                         krb5 GSSAPI library)",
                    ));
                }
                let variable = std::env::var(kerberos_login::CLIENT_KEYTAB_VARIABLE).ok();
                self.sasl.kerberos.validate(variable.as_deref())?;
            }
            SaslMechanism::AwsMskIam => {
                if !cfg!(feature = "aws-msk-iam") {
                    return Err(config_error(
                        SASL_MECHANISM,
                        "AWS_MSK_IAM needs the crate feature `aws-msk-iam`",
                    ));
                }
            }
            SaslMechanism::OAuthBearer => {
                #[cfg(feature = "sasl-oauthbearer")]
                let has_provider = self.sasl.token_provider.is_some();
                #[cfg(not(feature = "sasl-oauthbearer"))]
                let has_provider = false;
                let endpoint = &self.sasl.token_endpoint;
                endpoint.validate(has_provider)?;
                if !has_provider && endpoint.url.is_none() {
                    return Err(config_error(
                        SASL_MECHANISM,
                        "OAUTHBEARER needs a token provider (the builders' sasl_oauthbearer, \
                         crate feature `sasl-oauthbearer`) or a token endpoint \
                         (sasl.oauthbearer.token.endpoint.url with a client id and secret, \
                         crate feature `sasl-oauthbearer-oidc`)",
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(feature = "tls", feature = "sasl-scram"))]
    fn jaas_credentials_and_librdkafka_names_land_in_the_same_fields() {
        let mut from_jaas = SecurityConfig::default();
        from_jaas.set("security.protocol", "sasl_ssl").unwrap();
        from_jaas.set("sasl.mechanism", "SCRAM-SHA-512").unwrap();
        from_jaas.set("sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#,
        )
        .unwrap();
        let mut from_names = SecurityConfig::default();
        from_names.set("security.protocol", "SASL_SSL").unwrap();
        from_names.set("sasl.mechanisms", "SCRAM-SHA-512").unwrap();
        from_names.set("sasl.username", "u").unwrap();
        from_names.set("sasl.password", "p").unwrap();
        assert_eq!(from_jaas, from_names);
        from_jaas.validate().unwrap();
    }

    #[test]
    fn an_msk_iam_file_is_read_and_what_it_cannot_do_is_refused() {
        let mut config = SecurityConfig::default();
        config.set("security.protocol", "SASL_SSL").unwrap();
        config.set("sasl.mechanism", "AWS_MSK_IAM").unwrap();
        config
            .set(
                "sasl.jaas.config",
                "software.amazon.msk.auth.iam.IAMLoginModule required;",
            )
            .unwrap();
        config
            .set(
                "sasl.client.callback.handler.class",
                "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
            )
            .unwrap();
        assert_eq!(config.sasl.mechanism, Some(SaslMechanism::AwsMskIam));
        assert_eq!(config.validate().is_ok(), cfg!(feature = "aws-msk-iam"));
        config
            .set(
                "sasl.jaas.config",
                r#"software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="dev";"#,
            )
            .unwrap();
        assert_eq!(config.sasl.aws_profile.as_deref(), Some("dev"));
        let role = config.set(
            "sasl.jaas.config",
            r#"software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn="arn:aws:iam::1:role/r";"#,
        );
        assert!(role.unwrap_err().to_string().contains("awsRoleArn"));
        assert!(
            config
                .set("sasl.client.callback.handler.class", "com.example.Handler")
                .is_err()
        );
    }

    #[test]
    fn debug_of_the_security_config_shows_no_secret() {
        let mut config = SecurityConfig::default();
        config.set("sasl.password", "hunter2").unwrap();
        config
            .set("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----abc")
            .unwrap();
        config.set("sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="jaas-pw";"#,
        )
        .unwrap();
        let shown = format!("{config:?}");
        for secret in ["hunter2", "BEGIN PRIVATE KEY", "jaas-pw"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    #[cfg(feature = "tls")]
    fn missing_or_unsupported_settings_are_named() {
        let mut config = SecurityConfig::default();
        config.set("security.protocol", "SASL_PLAINTEXT").unwrap();
        assert!(
            matches!(config.validate(), Err(Error::Config { setting, .. }) if setting == SASL_MECHANISM)
        );
        config.set("sasl.mechanism", "PLAIN").unwrap();
        assert!(
            matches!(config.validate(), Err(Error::Config { setting, .. }) if setting == SASL_JAAS_CONFIG)
        );
        assert!(config.set("sasl.mechanism", "GSSAPI").is_ok());
        assert_eq!(
            config.validate().is_ok(),
            cfg!(feature = "gssapi"),
            "GSSAPI needs its feature and nothing else"
        );
        assert!(config.set("sasl.mechanism", "KERBEROS").is_err());
        assert_eq!(
            config.set("ssl.truststore.type", "JKS").is_ok(),
            cfg!(feature = "keystores")
        );
        assert!(config.set("ssl.truststore.type", "BKS").is_err());
        assert!(config.set("ssl.truststore.type", "pem").is_ok());
        assert!(config.set("security.protocol", "TLS").is_err());
        assert!(
            config
                .set("ssl.endpoint.identification.algorithm", "ldap")
                .is_err()
        );
        assert!(
            config
                .set(
                    "sasl.jaas.config",
                    "com.example.auth.LdapLoginModule required;"
                )
                .is_err()
        );
        let mut tls = SecurityConfig::default();
        tls.set("security.protocol", "SSL").unwrap();
        tls.set("ssl.certificate.location", "/c.pem").unwrap();
        assert!(tls.validate().is_err());
        tls.set("ssl.key.location", "/k.pem").unwrap();
        tls.validate().unwrap();
    }

    #[test]
    #[cfg(feature = "keystores")]
    fn stores_are_files_with_passwords() {
        let named = |config: &SecurityConfig| match config.validate() {
            Err(Error::Config { setting, .. }) => setting,
            other => panic!("{other:?}"),
        };
        let mut trust = SecurityConfig::default();
        trust.set("security.protocol", "SSL").unwrap();
        trust.set("ssl.truststore.type", "PKCS12").unwrap();
        assert_eq!(named(&trust), SSL_TRUSTSTORE_LOCATION);
        trust
            .set("ssl.truststore.certificates", "-----BEGIN")
            .unwrap();
        assert_eq!(named(&trust), SSL_TRUSTSTORE_CERTIFICATES);
        trust.set("ssl.truststore.location", "/t.p12").unwrap();
        trust.set("ssl.truststore.password", "secret").unwrap();
        trust.validate().unwrap();
        assert_eq!(trust.tls.truststore_type, Some(StoreType::Pkcs12));

        let mut key = SecurityConfig::default();
        key.set("security.protocol", "SSL").unwrap();
        key.set("ssl.keystore.type", "jks").unwrap();
        key.set("ssl.certificate.location", "/c.pem").unwrap();
        key.set("ssl.key.location", "/k.pem").unwrap();
        assert_eq!(named(&key), SSL_KEYSTORE_LOCATION);
        key.set("ssl.keystore.location", "/k.jks").unwrap();
        key.set("ssl.keystore.password", "store-pw").unwrap();
        key.set("ssl.key.password", "key-pw").unwrap();
        key.validate().unwrap();
        let shown = format!("{key:?}");
        assert!(
            !shown.contains("store-pw") && !shown.contains("key-pw"),
            "{shown}"
        );
        // A key password with a PEM key store: an encrypted PEM key, not read.
        key.set("ssl.keystore.type", "PEM").unwrap();
        assert_eq!(named(&key), SSL_KEY_PASSWORD);
    }

    #[test]
    fn hostname_verification_is_on_unless_emptied() {
        let mut config = SecurityConfig::default();
        assert!(config.tls.verify_hostname);
        config
            .set("ssl.endpoint.identification.algorithm", "")
            .unwrap();
        assert!(!config.tls.verify_hostname);
        config
            .set("ssl.endpoint.identification.algorithm", "HTTPS")
            .unwrap();
        assert!(config.tls.verify_hostname);
    }
}
