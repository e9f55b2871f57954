//! LeaveGroupResponse (API key 13), versions 0–5: members leaving a classic-protocol group, so
//! the coordinator rebalances at once instead of waiting for their sessions to time out. The
//! request is generated (`super::super::generated`).
//!
//! Schema: `LeaveGroupRequest.json` / `LeaveGroupResponse.json`. v1 adds the response's
//! throttle time; v3 batches members with their `GroupInstanceId` (KIP-345) in place of the
//! single `MemberId`; v4 is the first flexible version; v5 adds each member's `Reason` (KIP-800).

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// LeaveGroupResponse: the group-level outcome and, v3+, each member's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroupResponse {
    /// v1+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The group-level error code, 0 for none.
    pub error_code: i16,
    /// v3+: the outcome per leaving member.
    pub members: Vec<LeavingMemberResponse>,
}

/// The outcome for one leaving member (`MemberResponse` in the schema), v3+.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMemberResponse {
    /// The member id.
    pub member_id: String,
    /// The static member's `group.instance.id`, or null.
    pub group_instance_id: Option<String>,
    /// The member's error code, 0 for none.
    pub error_code: i16,
}

impl Default for LeavingMemberResponse {
    /// The schema's defaults: `GroupInstanceId` is nullable without a declared default, so it
    /// defaults to the empty string, as Kafka's generated code has it.
    fn default() -> Self {
        Self {
            member_id: String::new(),
            group_instance_id: Some(String::new()),
            error_code: 0,
        }
    }
}

impl LeavingMemberResponse {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_string(flexible, &self.member_id);
        out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        out.put_i16(self.error_code);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let member = Self {
            member_id: d.string(flexible, "LeaveGroupResponse.members.member_id")?,
            group_instance_id: d
                .nullable_string(flexible, "LeaveGroupResponse.members.group_instance_id")?,
            error_code: d.i16("LeaveGroupResponse.members.error_code")?,
        };
        if flexible {
            d.skip_tagged_fields("LeaveGroupResponse.members.tagged_fields")?;
        }
        Ok(member)
    }
}

impl Message for LeaveGroupResponse {
    const API_KEY: ApiKey = ApiKey::LeaveGroup;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 4;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_i16(self.error_code);
        if version >= 3 {
            out.put_array(flexible, &self.members, |out, m| m.encode(flexible, out));
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 1 {
            response.throttle_time_ms = d.i32("LeaveGroupResponse.throttle_time_ms")?;
        }
        response.error_code = d.i16("LeaveGroupResponse.error_code")?;
        if version >= 3 {
            response.members = d.array_of(flexible, "LeaveGroupResponse.members", |d| {
                LeavingMemberResponse::decode(d, flexible)
            })?;
        }
        if flexible {
            d.skip_tagged_fields("LeaveGroupResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> LeaveGroupResponse {
        LeaveGroupResponse {
            throttle_time_ms: 1,
            error_code: 0,
            members: vec![LeavingMemberResponse {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                error_code: 25, // UNKNOWN_MEMBER_ID
            }],
        }
    }

    #[test]
    fn response_v3_classic_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x01,     // throttle_time_ms
            0x00, 0x00,                 // error_code
            0x00, 0x00, 0x00, 0x01,     // members: count 1
            0x00, 0x01, b'm',           //   member_id
            0x00, 0x01, b'i',           //   group_instance_id
            0x00, 0x19,                 //   error_code 25
        ];
        assert_golden(&response(), 3, &golden);
    }

    #[test]
    fn response_v4_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x01,     // throttle_time_ms
            0x00, 0x00,                 // error_code
            0x02,                       // members: compact count 1 + 1
            0x02, b'm',                 //   member_id
            0x02, b'i',                 //   group_instance_id
            0x00, 0x19,                 //   error_code 25
            0x00,                       //   member tagged fields
            0x00,                       // tagged fields
        ];
        assert_golden(&response(), 4, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&response());
    }
}
