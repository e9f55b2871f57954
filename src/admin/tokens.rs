//! Delegation tokens (KIP-48): create, renew, expire and describe. A token is a shared
//! secret (its HMAC) a client logs in with over SCRAM, so a job can authenticate without the
//! owner's keytab or password. The brokers need `delegation.token.secret.key`, and the
//! requests must come over an authenticated SASL or mTLS connection not itself made with a
//! token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED otherwise). Any broker answers.

use std::time::Duration;

use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, DescribeDelegationTokenRequest, ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse, RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use super::wire::{outcome, string};
use crate::error::{Error, Result};
use crate::protocol::Request;
use crate::protocol::generated::str_bytes;

/// A delegation token.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DelegationToken {
    /// Its id: the user name a client logs in with (SCRAM, with `tokenauth=true`).
    pub token_id: String,
    /// Its HMAC: base64-encoded, the password a client logs in with. Never printed.
    pub hmac: Vec<u8>,
    /// The principal it authenticates as (`User:<name>`).
    pub owner: String,
    /// The principal that asked for it.
    pub requester: String,
    /// The principals that may renew it, besides the owner.
    pub renewers: Vec<String>,
    /// When it was issued (milliseconds since the epoch).
    pub issue_timestamp_ms: i64,
    /// When it expires unless renewed.
    pub expiry_timestamp_ms: i64,
    /// The latest it can be renewed to.
    pub max_timestamp_ms: i64,
}

impl std::fmt::Debug for DelegationToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationToken")
            .field("token_id", &self.token_id)
            .field("owner", &self.owner)
            .field("requester", &self.requester)
            .field("renewers", &self.renewers)
            .field("issue_timestamp_ms", &self.issue_timestamp_ms)
            .field("expiry_timestamp_ms", &self.expiry_timestamp_ms)
            .field("max_timestamp_ms", &self.max_timestamp_ms)
            .finish_non_exhaustive()
    }
}

/// What [`Admin::create_delegation_token`] asks for; the default is a token of the caller's
/// own principal, renewable by it alone, living as long as the brokers allow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewDelegationToken {
    /// Principals (`User:<name>`) that may renew it besides its owner.
    pub renewers: Vec<String>,
    /// Its maximum lifetime (`None`: the brokers' `delegation.token.max.lifetime.ms`).
    pub max_lifetime: Option<Duration>,
    /// The principal it is for, if not the caller's own (KIP-373; brokers from Kafka 3.3,
    /// and the caller needs CREATE_TOKENS on that user).
    pub owner: Option<String>,
}

impl NewDelegationToken {
    /// Lets `principal` renew it too.
    pub fn renewer(mut self, principal: impl Into<String>) -> Self {
        self.renewers.push(principal.into());
        self
    }

    /// At most `lifetime` long.
    pub fn max_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_lifetime = Some(lifetime);
        self
    }

    /// For `principal` instead of the caller.
    pub fn owner(mut self, principal: impl Into<String>) -> Self {
        self.owner = Some(principal.into());
        self
    }
}

/// `User:alice` as its type and name; a principal without a type is refused.
fn principal_parts(principal: &str) -> Result<(StrBytes, StrBytes)> {
    let (kind, name) = principal.split_once(':').ok_or_else(|| Error::Config {
        setting: "principal".into(),
        reason: format!("{principal:?} is not of the form Type:name (e.g. User:alice)"),
    })?;
    Ok((str_bytes(kind), str_bytes(name)))
}

fn principal(kind: &StrBytes, name: &StrBytes) -> String {
    format!("{}:{}", kind.as_str(), name.as_str())
}

/// The answers that set a token's expiry: their error code and the new expiry time.
trait ExpiryAnswer {
    fn expiry(&self) -> (i16, i64);
}

impl ExpiryAnswer for RenewDelegationTokenResponse {
    fn expiry(&self) -> (i16, i64) {
        (self.error_code, self.expiry_timestamp_ms)
    }
}

impl ExpiryAnswer for ExpireDelegationTokenResponse {
    fn expiry(&self) -> (i16, i64) {
        (self.error_code, self.expiry_timestamp_ms)
    }
}

fn millis(d: Option<Duration>) -> i64 {
    d.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Admin {
    /// Creates a delegation token (CreateDelegationToken).
    pub async fn create_delegation_token(
        &self,
        new: &NewDelegationToken,
    ) -> Result<DelegationToken> {
        let renewers = new
            .renewers
            .iter()
            .map(|r| {
                let (kind, name) = principal_parts(r)?;
                Ok(CreatableRenewers::default()
                    .with_principal_type(kind)
                    .with_principal_name(name))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut request = CreateDelegationTokenRequest::default()
            .with_renewers(renewers)
            .with_max_lifetime_ms(millis(new.max_lifetime));
        // Left at their default (empty: the caller is the owner), which every version can
        // carry; an owner needs v3.
        if let Some(owner) = &new.owner {
            let (kind, name) = principal_parts(owner)?;
            request = request
                .with_owner_principal_type(Some(kind))
                .with_owner_principal_name(Some(name));
        }
        let response = self
            .within("CreateDelegationToken", self.call_any(request))
            .await?;
        outcome(response.error_code, None)?;
        Ok(DelegationToken {
            token_id: string(&response.token_id),
            hmac: response.hmac.to_vec(),
            owner: principal(&response.principal_type, &response.principal_name),
            requester: principal(
                &response.token_requester_principal_type,
                &response.token_requester_principal_name,
            ),
            renewers: new.renewers.clone(),
            issue_timestamp_ms: response.issue_timestamp_ms,
            expiry_timestamp_ms: response.expiry_timestamp_ms,
            max_timestamp_ms: response.max_timestamp_ms,
        })
    }

    /// Renews the token whose HMAC is `hmac` for `period` (`None`: the brokers'
    /// `delegation.token.expiry.time.ms`), never past its maximum: the new expiry time
    /// (milliseconds since the epoch).
    pub async fn renew_delegation_token(
        &self,
        hmac: &[u8],
        period: Option<Duration>,
    ) -> Result<i64> {
        let request = RenewDelegationTokenRequest::default()
            .with_hmac(hmac.to_vec().into())
            .with_renew_period_ms(millis(period));
        self.new_expiry("RenewDelegationToken", request).await
    }

    /// Moves the token's expiry to `period` from now (`None` or zero: expires it at once,
    /// and the brokers forget it): the new expiry time.
    pub async fn expire_delegation_token(
        &self,
        hmac: &[u8],
        period: Option<Duration>,
    ) -> Result<i64> {
        let request = ExpireDelegationTokenRequest::default()
            .with_hmac(hmac.to_vec().into())
            .with_expiry_time_period_ms(millis(period));
        self.new_expiry("ExpireDelegationToken", request).await
    }

    /// The expiry time a Renew or Expire answer sets, or its error.
    async fn new_expiry<R>(&self, what: &str, request: R) -> Result<i64>
    where
        R: Request + Clone + Send + 'static,
        R::Response: ExpiryAnswer + Send + 'static,
    {
        let response = self.within(what, self.call_any(request)).await?;
        let (code, expiry) = response.expiry();
        outcome(code, None)?;
        Ok(expiry)
    }

    /// The tokens of `owners` (`None`: every token the caller may describe).
    pub async fn describe_delegation_tokens(
        &self,
        owners: Option<Vec<String>>,
    ) -> Result<Vec<DelegationToken>> {
        let owners = owners
            .map(|owners| {
                owners
                    .iter()
                    .map(|o| {
                        let (kind, name) = principal_parts(o)?;
                        Ok(DescribeDelegationTokenOwner::default()
                            .with_principal_type(kind)
                            .with_principal_name(name))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;
        let request = DescribeDelegationTokenRequest::default().with_owners(owners);
        let response = self
            .within("DescribeDelegationToken", self.call_any(request))
            .await?;
        outcome(response.error_code, None)?;
        Ok(response
            .tokens
            .iter()
            .map(|t| DelegationToken {
                token_id: string(&t.token_id),
                hmac: t.hmac.to_vec(),
                owner: principal(&t.principal_type, &t.principal_name),
                requester: principal(
                    &t.token_requester_principal_type,
                    &t.token_requester_principal_name,
                ),
                renewers: t
                    .renewers
                    .iter()
                    .map(|r| principal(&r.principal_type, &r.principal_name))
                    .collect(),
                issue_timestamp_ms: t.issue_timestamp,
                expiry_timestamp_ms: t.expiry_timestamp,
                max_timestamp_ms: t.max_timestamp,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_need_a_type_and_tokens_hide_their_hmac() {
        assert!(principal_parts("alice").is_err());
        let (kind, name) = principal_parts("User:alice").unwrap();
        assert_eq!((kind.as_str(), name.as_str()), ("User", "alice"));
        let token = DelegationToken {
            token_id: "id".into(),
            hmac: b"very-secret".to_vec(),
            owner: "User:alice".into(),
            requester: "User:alice".into(),
            renewers: Vec::new(),
            issue_timestamp_ms: 0,
            expiry_timestamp_ms: 0,
            max_timestamp_ms: 0,
        };
        let printed = format!("{token:?}");
        assert!(
            !printed.contains("hmac") && !printed.contains("118, 101"),
            "{printed}"
        );
        assert_eq!(millis(None), -1);
    }
}
