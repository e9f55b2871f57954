//! How a client secures its connections: `security.protocol`, TLS trust and client
//! certificates, and SASL credentials, under the Java client's property names (and the few
//! librdkafka names people copy from Confluent Cloud or MSK snippets).
//!
//! Only PEM key material is read (`ssl.truststore.type=PEM`, `ssl.keystore.type=PEM`): JKS and
//! PKCS#12 stores are Java formats, and `keytool -exportcert -rfc` / `openssl pkcs12` turn them
//! into PEM. A `ssl.truststore.location` without a type is read as PEM too, and a file that
//! holds no PEM certificate is reported as such when the producer is built.

use std::path::PathBuf;
use std::str::FromStr;

use super::jaas;
use super::properties::config_error;
use super::secret::Secret;
use crate::error::Error;

#[cfg(feature = "sasl-oauthbearer")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
pub use super::sasl::oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider};

const SECURITY_PROTOCOL: &str = "security.protocol";
const SSL_TRUSTSTORE_TYPE: &str = "ssl.truststore.type";
const SSL_TRUSTSTORE_LOCATION: &str = "ssl.truststore.location";
const SSL_TRUSTSTORE_CERTIFICATES: &str = "ssl.truststore.certificates";
const SSL_CA_LOCATION: &str = "ssl.ca.location";
const SSL_KEYSTORE_TYPE: &str = "ssl.keystore.type";
const SSL_KEYSTORE_LOCATION: &str = "ssl.keystore.location";
const SSL_KEYSTORE_CERTIFICATE_CHAIN: &str = "ssl.keystore.certificate.chain";
const SSL_KEYSTORE_KEY: &str = "ssl.keystore.key";
const SSL_CERTIFICATE_LOCATION: &str = "ssl.certificate.location";
const SSL_KEY_LOCATION: &str = "ssl.key.location";
const SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: &str = "ssl.endpoint.identification.algorithm";
const SASL_MECHANISM: &str = "sasl.mechanism";
const SASL_MECHANISMS: &str = "sasl.mechanisms";
const SASL_JAAS_CONFIG: &str = "sasl.jaas.config";
const SASL_USERNAME: &str = "sasl.username";
const SASL_PASSWORD: &str = "sasl.password";

/// Every security property `SecurityConfig::set` accepts.
pub const SECURITY_PROPERTY_NAMES: [&str; 17] = [
    SECURITY_PROTOCOL,
    SSL_TRUSTSTORE_TYPE,
    SSL_TRUSTSTORE_LOCATION,
    SSL_TRUSTSTORE_CERTIFICATES,
    SSL_CA_LOCATION,
    SSL_KEYSTORE_TYPE,
    SSL_KEYSTORE_LOCATION,
    SSL_KEYSTORE_CERTIFICATE_CHAIN,
    SSL_KEYSTORE_KEY,
    SSL_CERTIFICATE_LOCATION,
    SSL_KEY_LOCATION,
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
    SASL_MECHANISM,
    SASL_MECHANISMS,
    SASL_JAAS_CONFIG,
    SASL_USERNAME,
    SASL_PASSWORD,
];

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
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            ca: None,
            client_certificate: None,
            client_key: None,
            verify_hostname: true,
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
}

impl SaslMechanism {
    /// The mechanism's name in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
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
            other => Err(config_error(
                SASL_MECHANISM,
                format!(
                    "{other:?} is not supported; expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 \
                     or OAUTHBEARER"
                ),
            )),
        }
    }
}

/// SASL settings (used when [`SecurityProtocol::uses_sasl`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SaslConfig {
    /// The mechanism; required with a SASL protocol (Java's default, GSSAPI, is not
    /// implemented).
    pub mechanism: Option<SaslMechanism>,
    /// The user (PLAIN, SCRAM): `sasl.username` or the JAAS `username` option.
    pub username: Option<String>,
    /// The password (PLAIN, SCRAM): `sasl.password` or the JAAS `password` option.
    pub password: Option<Secret>,
    /// Where OAUTHBEARER tokens come from.
    #[cfg(feature = "sasl-oauthbearer")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl-oauthbearer")))]
    pub token_provider: Option<OAuthBearerTokenProvider>,
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
    /// Sets a security property; `None` when `key` is not one.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Option<Result<(), Error>> {
        let value = value.trim();
        let file = || Some(Pem::File(PathBuf::from(value)));
        let inline = || Some(Pem::Inline(Secret::new(value)));
        match key {
            SECURITY_PROTOCOL => return Some(value.parse().map(|p| self.protocol = p)),
            SSL_TRUSTSTORE_TYPE | SSL_KEYSTORE_TYPE => {
                if !value.eq_ignore_ascii_case("PEM") {
                    return Some(Err(config_error(
                        key,
                        format!(
                            "{value:?} stores are not supported; use PEM (convert with \
                             `keytool -exportcert -rfc` or `openssl pkcs12`)"
                        ),
                    )));
                }
            }
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
                    return Some(Err(config_error(
                        key,
                        format!("expected https or an empty value, got {other:?}"),
                    )));
                }
            },
            SASL_MECHANISM | SASL_MECHANISMS => {
                return Some(value.parse().map(|m| self.sasl.mechanism = Some(m)));
            }
            SASL_USERNAME => self.sasl.username = Some(value.to_owned()),
            SASL_PASSWORD => self.sasl.password = Some(Secret::new(value)),
            SASL_JAAS_CONFIG => return Some(self.set_jaas(value)),
            // Java's password of an encrypted keystore key: encrypted keys are not read.
            "ssl.key.password" => {
                return Some(Err(config_error(
                    key,
                    "encrypted private keys are not supported; give an unencrypted PKCS#8 key \
                     (`openssl pkcs8 -topk8 -nocrypt`)",
                )));
            }
            _ => return None,
        }
        Some(Ok(()))
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
            // Tokens come from the application's provider; the module's options configure
            // Java's own login handlers, which have no equivalent here.
            "OAuthBearerLoginModule" => Ok(()),
            other => Err(config_error(
                SASL_JAAS_CONFIG,
                format!(
                    "login module {other} is not supported (PlainLoginModule, ScramLoginModule \
                     and OAuthBearerLoginModule are)"
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

    fn validate_sasl(&self) -> Result<(), Error> {
        let Some(mechanism) = self.sasl.mechanism else {
            return Err(config_error(
                SASL_MECHANISM,
                "is required with a SASL security.protocol (PLAIN, SCRAM-SHA-256, \
                 SCRAM-SHA-512 or OAUTHBEARER)",
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
            SaslMechanism::OAuthBearer => {
                #[cfg(feature = "sasl-oauthbearer")]
                let has_provider = self.sasl.token_provider.is_some();
                #[cfg(not(feature = "sasl-oauthbearer"))]
                let has_provider = false;
                if !has_provider {
                    return Err(config_error(
                        SASL_MECHANISM,
                        "OAUTHBEARER needs a token provider \
                         (ProducerBuilder::oauthbearer_token_provider, crate feature \
                         `sasl-oauthbearer`)",
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

    fn set(config: &mut SecurityConfig, key: &str, value: &str) -> Result<(), Error> {
        config.set(key, value).expect("a security property")
    }

    #[test]
    #[cfg(all(feature = "tls", feature = "sasl-scram"))]
    fn jaas_credentials_and_librdkafka_names_land_in_the_same_fields() {
        let mut from_jaas = SecurityConfig::default();
        set(&mut from_jaas, "security.protocol", "sasl_ssl").unwrap();
        set(&mut from_jaas, "sasl.mechanism", "SCRAM-SHA-512").unwrap();
        set(
            &mut from_jaas,
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#,
        )
        .unwrap();
        let mut from_names = SecurityConfig::default();
        set(&mut from_names, "security.protocol", "SASL_SSL").unwrap();
        set(&mut from_names, "sasl.mechanisms", "SCRAM-SHA-512").unwrap();
        set(&mut from_names, "sasl.username", "u").unwrap();
        set(&mut from_names, "sasl.password", "p").unwrap();
        assert_eq!(from_jaas, from_names);
        from_jaas.validate().unwrap();
    }

    #[test]
    fn debug_of_the_security_config_shows_no_secret() {
        let mut config = SecurityConfig::default();
        set(&mut config, "sasl.password", "hunter2").unwrap();
        set(
            &mut config,
            "ssl.keystore.key",
            "-----BEGIN PRIVATE KEY-----abc",
        )
        .unwrap();
        set(
            &mut config,
            "sasl.jaas.config",
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
        set(&mut config, "security.protocol", "SASL_PLAINTEXT").unwrap();
        assert!(
            matches!(config.validate(), Err(Error::Config { setting, .. }) if setting == SASL_MECHANISM)
        );
        set(&mut config, "sasl.mechanism", "PLAIN").unwrap();
        assert!(
            matches!(config.validate(), Err(Error::Config { setting, .. }) if setting == SASL_JAAS_CONFIG)
        );
        assert!(set(&mut config, "sasl.mechanism", "GSSAPI").is_err());
        assert!(set(&mut config, "ssl.truststore.type", "JKS").is_err());
        assert!(set(&mut config, "ssl.truststore.type", "pem").is_ok());
        assert!(set(&mut config, "security.protocol", "TLS").is_err());
        assert!(set(&mut config, "ssl.endpoint.identification.algorithm", "ldap").is_err());
        assert!(
            set(
                &mut config,
                "sasl.jaas.config",
                "com.sun.security.auth.module.Krb5LoginModule required;"
            )
            .is_err()
        );
        let mut tls = SecurityConfig::default();
        set(&mut tls, "security.protocol", "SSL").unwrap();
        set(&mut tls, "ssl.certificate.location", "/c.pem").unwrap();
        assert!(tls.validate().is_err());
        set(&mut tls, "ssl.key.location", "/k.pem").unwrap();
        tls.validate().unwrap();
    }

    #[test]
    fn hostname_verification_is_on_unless_emptied() {
        let mut config = SecurityConfig::default();
        assert!(config.tls.verify_hostname);
        set(&mut config, "ssl.endpoint.identification.algorithm", "").unwrap();
        assert!(!config.tls.verify_hostname);
        set(
            &mut config,
            "ssl.endpoint.identification.algorithm",
            "HTTPS",
        )
        .unwrap();
        assert!(config.tls.verify_hostname);
    }
}
