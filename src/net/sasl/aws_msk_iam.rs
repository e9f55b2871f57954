//! SASL/AWS_MSK_IAM, Amazon MSK's IAM access control: one message, a JSON object holding a
//! SigV4-presigned `GET https://<broker host>/?Action=kafka-cluster:Connect` (service
//! `kafka-cluster`, the signature valid 15 minutes) with the payload's `version`, `host` and
//! `user-agent`, as AWS's `aws-msk-iam-auth` library describes and builds it; the broker answers
//! with a JSON object naming the same version and a request id. The signature comes from AWS's
//! own SigV4 crate (`aws-sigv4`); `tests/golden/msk_iam` holds payloads that library signed,
//! which this module must reproduce byte for byte.
//!
//! Each authentication signs anew (a new connection, a KIP-368 re-authentication), with the
//! credentials the provider gives then, so rotated credentials are picked up.

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use serde_json::{Map, Value};

use super::SaslClient;
use super::provider::{AsyncProvider, Provided};
use crate::net::secret::Secret;

/// The payload version of the `aws-msk-iam-auth` library (its `AuthenticationRequestParams`).
const PAYLOAD_VERSION: &str = "2020_10_22";
/// The action and the signing name the brokers check.
const ACTION: &str = "kafka-cluster:Connect";
const SERVICE: &str = "kafka-cluster";
/// How long a signature is valid: the library's 15 minutes.
const EXPIRES_IN: Duration = Duration::from_secs(15 * 60);

/// AWS credentials for AWS_MSK_IAM: an access key, and for temporary credentials (an assumed
/// role, SSO, an instance profile) the session token. Secrets are never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Secret,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    pub session_token: Option<Secret>,
}

impl AwsCredentials {
    /// Long-term credentials (an IAM user's access key).
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<Secret>) -> Self {
        AwsCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        }
    }

    /// Adds the session token of temporary credentials.
    pub fn session_token(mut self, token: impl Into<Secret>) -> Self {
        self.session_token = Some(token.into());
        self
    }

    /// From `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`, the first
    /// source of the AWS SDKs' default chain.
    pub fn from_environment() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (Some(id), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
        else {
            return Err(
                "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are \
                        not set (or give a credentials provider to sasl_aws_msk_iam)"
                    .into(),
            );
        };
        let credentials = AwsCredentials::new(id, secret);
        Ok(match var("AWS_SESSION_TOKEN") {
            Some(token) => credentials.session_token(token),
            None => credentials,
        })
    }

    /// From a profile of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
    /// `~/.aws/credentials`): `profile`, else `AWS_PROFILE`, else `default`. Only keys kept in
    /// the file (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`); a profile
    /// that assumes a role, uses SSO or a `credential_process` needs the AWS SDK's chain,
    /// through an [`AwsCredentialsProvider`].
    pub fn from_profile(profile: Option<&str>) -> Result<Self, String> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let path = var("AWS_SHARED_CREDENTIALS_FILE")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                var("HOME")
                    .or_else(|| var("USERPROFILE"))
                    .map(|home| std::path::Path::new(&home).join(".aws").join("credentials"))
            })
            .ok_or(
                "no AWS credentials file: neither AWS_SHARED_CREDENTIALS_FILE nor HOME is set",
            )?;
        let name = profile
            .map(str::to_owned)
            .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()))
            .unwrap_or_else(|| "default".to_owned());
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "the AWS credentials file {} could not be read: {e}",
                path.display()
            )
        })?;
        credentials_in_file(&text, &name)
            .map_err(|reason| format!("{reason} (in {})", path.display()))
    }
}

/// The keys of profile `name` in the text of a shared credentials file (INI: `[name]`
/// sections, `key = value`, `#` and `;` comments).
fn credentials_in_file(text: &str, name: &str) -> Result<AwsCredentials, String> {
    let mut in_profile = false;
    let mut found = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = section.trim() == name;
            found |= in_profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|_| in_profile) else {
            continue;
        };
        let value = value.trim().to_owned();
        match key.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => id = Some(value),
            "aws_secret_access_key" => secret = Some(value),
            "aws_session_token" => token = Some(value),
            _ => {}
        }
    }
    if !found {
        return Err(format!("no AWS profile {name:?}"));
    }
    let (Some(id), Some(secret)) = (id, secret) else {
        return Err(format!(
            "the AWS profile {name:?} holds no aws_access_key_id and aws_secret_access_key \
             (a role, SSO or credential_process needs an AwsCredentialsProvider)"
        ));
    };
    let credentials = AwsCredentials::new(id, secret);
    Ok(match token {
        Some(token) => credentials.session_token(token),
        None => credentials,
    })
}

/// Where AWS_MSK_IAM credentials come from: an async function called for every
/// authentication. Wrap the AWS SDK's default chain (`aws-config`: profiles, SSO, web identity,
/// instance and container roles) in one to use it; without a provider the credentials are
/// read from the environment ([`AwsCredentials::from_environment`]), then the shared
/// credentials file ([`AwsCredentials::from_profile`]). Two providers are equal when they are
/// the same function object.
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-msk-iam")))]
pub struct AwsCredentialsProvider(AsyncProvider<AwsCredentials>);

impl AwsCredentialsProvider {
    /// A provider from an async function.
    pub fn new<F, Fut>(provide: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<AwsCredentials, String>> + Send + 'static,
    {
        AwsCredentialsProvider(AsyncProvider::new(provide))
    }

    /// Always the same credentials.
    pub fn fixed(credentials: AwsCredentials) -> Self {
        AwsCredentialsProvider::new(move || {
            let credentials = credentials.clone();
            async move { Ok(credentials) }
        })
    }

    pub(crate) fn credentials(&self) -> Provided<AwsCredentials> {
        self.0.provide()
    }
}

impl fmt::Debug for AwsCredentialsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsCredentialsProvider")
    }
}

/// The credentials of one authentication: the application's provider; else a profile named
/// in the configuration (JAAS `awsProfileName`, as aws-msk-iam-auth reads it); else the first
/// two sources of the AWS SDKs' default chain, the environment and then the shared credentials
/// file's profile (`AWS_PROFILE` or `default`).
pub(crate) async fn credentials_of(
    provider: Option<&AwsCredentialsProvider>,
    profile: Option<&str>,
) -> Result<AwsCredentials, String> {
    match (provider, profile) {
        (Some(provider), _) => provider
            .credentials()
            .await
            .map_err(|e| format!("the AWS credentials provider failed: {e}")),
        (None, Some(profile)) => AwsCredentials::from_profile(Some(profile)),
        (None, None) => AwsCredentials::from_environment().or_else(|from_environment| {
            AwsCredentials::from_profile(None)
                .map_err(|from_file| format!("{from_environment}; {from_file}"))
        }),
    }
}

/// The client side of one AWS_MSK_IAM exchange.
pub(crate) struct AwsMskIamClient {
    payload: Vec<u8>,
}

impl AwsMskIamClient {
    /// Signs for `broker` (`host:port`, the address connected to, whose host the brokers
    /// expect in the payload).
    pub fn new(broker: &str, credentials: &AwsCredentials) -> Result<Self, String> {
        let host = crate::net::properties::host_of(broker);
        let region = region_of(host)?;
        let user_agent = concat!("exactly/", env!("CARGO_PKG_VERSION"));
        let payload = signed_payload(
            host,
            &region,
            credentials,
            SystemTime::now(),
            EXPIRES_IN,
            user_agent,
        )?;
        Ok(AwsMskIamClient { payload })
    }
}

impl SaslClient for AwsMskIamClient {
    fn initial(&mut self) -> Result<Vec<u8>, String> {
        Ok(std::mem::take(&mut self.payload))
    }

    /// The broker's `{"version": ..., "request-id": ...}`.
    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let answer: Value = serde_json::from_slice(challenge)
            .map_err(|_| "the broker's AWS_MSK_IAM answer is not JSON".to_owned())?;
        match answer.get("version").and_then(Value::as_str) {
            Some(PAYLOAD_VERSION) => Ok(None),
            other => Err(format!(
                "the broker's AWS_MSK_IAM answer has version {other:?}, not {PAYLOAD_VERSION}"
            )),
        }
    }
}

/// The region a broker is in: the label after `kafka` / `kafka-serverless` in an MSK host name
/// (`b-1.name.id.c2.kafka.us-east-1.amazonaws.com`), else `AWS_REGION` or `AWS_DEFAULT_REGION`
/// (a VPC endpoint or a private DNS name says nothing of its region).
fn region_of(host: &str) -> Result<String, String> {
    let labels: Vec<&str> = host.split('.').collect();
    let from_host = labels
        .windows(2)
        .find(|pair| matches!(pair[0], "kafka" | "kafka-serverless"))
        .map(|pair| pair[1])
        .filter(|region| region.contains('-') && host.contains(".amazonaws.com"));
    if let Some(region) = from_host {
        return Ok(region.to_owned());
    }
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .ok_or_else(|| format!("the AWS region of {host} is not in its name: set AWS_REGION"))
}

/// The signed payload: the presigned request's query parameters under lower-case names, the
/// `host` header it signs, and the payload's version, action and user agent.
fn signed_payload(
    host: &str,
    region: &str,
    credentials: &AwsCredentials,
    time: SystemTime,
    expires_in: Duration,
    user_agent: &str,
) -> Result<Vec<u8>, String> {
    let identity: Identity = aws_credential_types::Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.expose().to_owned(),
        credentials
            .session_token
            .as_ref()
            .map(|token| token.expose().to_owned()),
        None,
        "exactly",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(expires_in);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("AWS signing parameters: {e}"))?
        .into();
    let url = format!("https://{host}/?Action=kafka-cluster%3AConnect");
    let request = SignableRequest::new(
        "GET",
        &url,
        [("host", host)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| format!("the request to sign: {e}"))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| format!("SigV4 signing failed: {e}"))?
        .into_parts();
    let mut payload = Map::new();
    for (name, value) in instructions.params() {
        payload.insert(name.to_ascii_lowercase(), Value::from(value.as_ref()));
    }
    payload.insert("version".into(), PAYLOAD_VERSION.into());
    payload.insert("host".into(), host.into());
    payload.insert("user-agent".into(), user_agent.into());
    payload.insert("action".into(), ACTION.into());
    serde_json::to_vec(&payload).map_err(|e| format!("the payload: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payloads AWS's aws-msk-iam-auth 2.4.0 signed (tests/golden/msk_iam/Generate.java,
    /// regenerated by tests/golden/msk_iam/generate), signed again here at the time each names,
    /// with the same made-up credentials: every field equal, the signature included.
    #[test]
    fn payload_matches_aws_msk_iam_auth() {
        let golden = include_str!("../../../tests/golden/msk_iam/payloads.jsonl");
        let basic = AwsCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        let session = AwsCredentials::new("ASIAEXAMPLE", "c2VjcmV0L2tleStleGFtcGxl")
            .session_token("IQoJb3JpZ2luX2VjEXAMPLE//session+token/with=odd&characters");
        let mut checked = 0;
        for line in golden.lines().filter(|line| !line.trim().is_empty()) {
            let reference: Map<String, Value> = serde_json::from_str(line).unwrap();
            let field = |name: &str| reference[name].as_str().unwrap().to_owned();
            let credentials = if reference.contains_key("x-amz-security-token") {
                &session
            } else {
                &basic
            };
            let time = time_of(&field("x-amz-date"));
            let expires = Duration::from_secs(field("x-amz-expires").parse().unwrap());
            let host = field("host");
            let ours = signed_payload(
                &host,
                &region_of(&host).unwrap(),
                credentials,
                time,
                expires,
                &field("user-agent"),
            )
            .unwrap();
            let ours: Map<String, Value> = serde_json::from_slice(&ours).unwrap();
            assert_eq!(ours, reference, "{host}");
            checked += 1;
        }
        assert_eq!(checked, 3, "every golden payload is checked");
    }

    /// `yyyyMMdd'T'HHmmss'Z'` as a time.
    fn time_of(amz_date: &str) -> SystemTime {
        let number = |range: std::ops::Range<usize>| amz_date[range].parse::<i64>().unwrap();
        let (year, month, day) = (number(0..4), number(4..6), number(6..8));
        let seconds = number(9..11) * 3600 + number(11..13) * 60 + number(13..15);
        // Days from the civil date (Howard Hinnant's algorithm).
        let (y, m) = if month <= 2 {
            (year - 1, month + 9)
        } else {
            (year, month - 3)
        };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        SystemTime::UNIX_EPOCH + Duration::from_secs((days * 86_400 + seconds) as u64)
    }

    #[test]
    fn the_region_comes_from_the_host_or_the_environment() {
        assert_eq!(
            region_of("b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com").unwrap(),
            "us-east-1"
        );
        assert_eq!(
            region_of("boot-x.c1.kafka-serverless.ap-southeast-2.amazonaws.com").unwrap(),
            "ap-southeast-2"
        );
    }

    #[test]
    fn the_answer_must_name_the_payload_version() {
        let mut client = AwsMskIamClient {
            payload: b"{}".to_vec(),
        };
        assert_eq!(client.initial().unwrap(), b"{}");
        assert_eq!(
            client
                .step(br#"{"version":"2020_10_22","request-id":"r-1"}"#)
                .unwrap(),
            None
        );
        assert!(client.step(br#"{"version":"1999"}"#).is_err());
        assert!(client.step(b"not json").is_err());
    }

    #[test]
    fn a_profile_of_the_shared_credentials_file_is_read() {
        let file = "# made-up keys\n[default]\naws_access_key_id = AKIDDEFAULT\n\
                    aws_secret_access_key=secret-default\n\n[dev]\n; temporary\n\
                    aws_access_key_id=ASIADEV\naws_secret_access_key = secret-dev\n\
                    aws_session_token = token-dev\n[role]\nrole_arn = arn:aws:iam::1:role/r\n";
        let dev = credentials_in_file(file, "dev").unwrap();
        assert_eq!(
            dev,
            AwsCredentials::new("ASIADEV", "secret-dev").session_token("token-dev")
        );
        let default = credentials_in_file(file, "default").unwrap();
        assert_eq!(
            default,
            AwsCredentials::new("AKIDDEFAULT", "secret-default")
        );
        let missing = credentials_in_file(file, "prod").unwrap_err();
        assert!(missing.contains("no AWS profile \"prod\""), "{missing}");
        let role = credentials_in_file(file, "role").unwrap_err();
        assert!(role.contains("AwsCredentialsProvider"), "{role}");
    }

    #[test]
    fn debug_shows_no_secret() {
        let credentials = AwsCredentials::new("AKID", "s3cret").session_token("t0ken");
        let text = format!("{credentials:?}");
        assert!(
            !text.contains("s3cret") && !text.contains("t0ken"),
            "{text}"
        );
    }
}
