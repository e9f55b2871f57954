//! Requests whose shape changes between the versions spoken. The consumer builds them in the
//! newest shape, without knowing the version the connection negotiates; here an older
//! version gets the same request in its own shape (as Java's request builders do at
//! `build(version)`), and a request the version cannot say is refused, never cut down.

use std::borrow::Cow;

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{LeaveGroupRequest, OffsetFetchRequest};

/// A request with one shape in every version it is spoken at.
pub(crate) fn as_is<R: Clone>(request: &R, _version: i16) -> Result<Cow<'_, R>, String> {
    Ok(Cow::Borrowed(request))
}

/// LeaveGroup v0–2 names the one member leaving in `MemberId`; v3 (KIP-345) lists `Members`,
/// which is how it is built. A v0–2 request can carry one dynamic member.
pub(crate) fn leave_group(
    request: &LeaveGroupRequest,
    version: i16,
) -> Result<Cow<'_, LeaveGroupRequest>, String> {
    if version >= 3 || request.members.is_empty() {
        return Ok(Cow::Borrowed(request));
    }
    match request.members.as_slice() {
        [member] if member.group_instance_id.is_none() => Ok(Cow::Owned(
            LeaveGroupRequest::default()
                .with_group_id(request.group_id.clone())
                .with_member_id(member.member_id.clone()),
        )),
        _ => Err(format!(
            "LeaveGroup v{version} names one dynamic member (KIP-345 needs v3)"
        )),
    }
}

/// OffsetFetch v8 (KIP-709) lists `Groups`, which is how it is built; v1–7 ask for one group
/// in `GroupId` and `Topics`, and before v2 cannot ask for every topic (a null list).
pub(crate) fn offset_fetch(
    request: &OffsetFetchRequest,
    version: i16,
) -> Result<Cow<'_, OffsetFetchRequest>, String> {
    if version >= 8 || request.groups.is_empty() {
        return Ok(Cow::Borrowed(request));
    }
    let [group] = request.groups.as_slice() else {
        return Err(format!(
            "OffsetFetch v{version} asks for one group (KIP-709 needs v8)"
        ));
    };
    let topics = match &group.topics {
        None if version < 2 => {
            return Err(format!("OffsetFetch v{version} cannot ask for every topic"));
        }
        None => None,
        Some(topics) => Some(
            topics
                .iter()
                .map(|t| {
                    OffsetFetchRequestTopic::default()
                        .with_name(t.name.clone())
                        .with_partition_indexes(t.partition_indexes.clone())
                })
                .collect(),
        ),
    };
    Ok(Cow::Owned(
        OffsetFetchRequest::default()
            .with_group_id(group.group_id.clone())
            .with_topics(topics)
            .with_require_stable(request.require_stable),
    ))
}
