//! The requests the consumer sends, each bounded by a deadline: the one place a request meets
//! a [`BrokerLink`].

use std::sync::Arc;
use std::time::Duration;

use super::membership::{MembershipRequest, MembershipResponse};
use crate::error::{Error, Result};
use crate::net::connection::BrokerLink;
use crate::net::coordinator::find_coordinator_request;
use crate::protocol::Request;
use crate::protocol::error_code::ErrorCode;
use crate::types::CoordinatorKey;

/// The error of a request that got no answer in time.
pub fn timed_out(what: &str) -> Error {
    Error::Timeout(format!("no answer to {what} within request.timeout.ms"))
}

/// One request with a deadline.
pub async fn call<R>(
    link: &BrokerLink,
    request: R,
    cap: Option<i16>,
    client_id: Arc<str>,
    timeout: Duration,
) -> Result<R::Response>
where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
{
    call_built(link, move |_| Ok(request), cap, client_id, timeout).await
}

/// One request built for the version negotiated (see [`BrokerLink::call_built`]), with a
/// deadline.
pub async fn call_built<R, B>(
    link: &BrokerLink,
    build: B,
    cap: Option<i16>,
    client_id: Arc<str>,
    timeout: Duration,
) -> Result<R::Response>
where
    R: Request,
    R::Response: Send + 'static,
    B: FnOnce(i16) -> Result<R> + Send + 'static,
{
    match tokio::time::timeout(timeout, link.call_built(build, cap, client_id)).await {
        Ok(result) => result.map(|(response, _)| response),
        Err(_) => Err(timed_out("a consumer request")),
    }
}

/// FindCoordinator for the group: the coordinator's address and node id.
pub async fn find_coordinator(
    link: &BrokerLink,
    group: String,
    client_id: Arc<str>,
    timeout: Duration,
) -> Result<(String, i32)> {
    let key = CoordinatorKey::Group(group);
    let request = move |version| find_coordinator_request(key, version);
    let response = call_built(link, request, None, client_id, timeout).await?;
    let c = response
        .coordinators
        .into_iter()
        .next()
        .ok_or_else(|| Error::broker(ErrorCode::COORDINATOR_NOT_AVAILABLE))?;
    if c.error_code != 0 {
        return Err(Error::Broker {
            code: ErrorCode(c.error_code),
            message: c.error_message,
        });
    }
    Ok((format!("{}:{}", c.host, c.port), c.node_id))
}

/// A membership request to the coordinator; JoinGroup and SyncGroup wait up to `join_timeout`
/// (the coordinator holds them for the whole rebalance).
pub async fn membership_call(
    link: &BrokerLink,
    request: MembershipRequest,
    client_id: Arc<str>,
    timeout: Duration,
    join_timeout: Duration,
) -> Result<MembershipResponse> {
    Ok(match request {
        MembershipRequest::ConsumerHeartbeat(r) => {
            MembershipResponse::ConsumerHeartbeat(call(link, r, None, client_id, timeout).await?)
        }
        MembershipRequest::Join(r) => {
            MembershipResponse::Join(call(link, r, None, client_id, join_timeout).await?)
        }
        MembershipRequest::Sync(r) => {
            MembershipResponse::Sync(call(link, r, None, client_id, join_timeout).await?)
        }
        MembershipRequest::Heartbeat(r) => {
            MembershipResponse::Heartbeat(call(link, r, None, client_id, timeout).await?)
        }
        MembershipRequest::Leave(r) => {
            call(link, r, None, client_id, timeout).await?;
            // Nothing to hand the state machine: the member is gone.
            MembershipResponse::Heartbeat(Default::default())
        }
    })
}
