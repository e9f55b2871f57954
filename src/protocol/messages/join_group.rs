//! JoinGroupResponse (API key 11), versions 0–9: the first step of a classic-protocol
//! rebalance. Every member sends the protocols it supports; the coordinator picks one, names a
//! leader and, to the leader only, lists every member's metadata. The request is generated
//! (`super::super::generated`).
//!
//! Schema: `JoinGroupRequest.json` / `JoinGroupResponse.json`. Request: v1 adds
//! `RebalanceTimeoutMs`, v4 makes a new member join twice (first to learn its member id,
//! KIP-394), v5 adds `GroupInstanceId` (KIP-345), v6 is the first flexible version, v8 adds
//! `Reason` (KIP-800). Response: v2 adds the throttle time, v5 each member's
//! `GroupInstanceId`, v7 `ProtocolType` and a nullable `ProtocolName` (KIP-559), v9
//! `SkipAssignment` (KIP-814).

use bytes::{BufMut, Bytes};

use super::fields::{put_string_nullable_if, read_string_nullable_if};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// JoinGroupResponse: the generation the member joined, its member id, the leader and the
/// selected protocol; for the leader, every member's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// v2+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for none (MEMBER_ID_REQUIRED asks a v4+ member to join again with
    /// the member id in this response).
    pub error_code: i16,
    /// The generation id of the group.
    pub generation_id: i32,
    /// v7+: the group's protocol type (KIP-559), or null.
    pub protocol_type: Option<String>,
    /// The protocol the coordinator selected; nullable from v7 (KIP-559), so `None` is
    /// written as the empty string before v7.
    pub protocol_name: Option<String>,
    /// The member id of the group's leader.
    pub leader: String,
    /// v9+: whether the leader must skip computing the assignment (KIP-814).
    pub skip_assignment: bool,
    /// The member id the coordinator assigned to this member.
    pub member_id: String,
    /// The group's members with their metadata; only the leader gets them.
    pub members: Vec<JoinGroupMember>,
}

impl Default for JoinGroupResponse {
    /// The schema's defaults (`GenerationId` -1; `ProtocolName` is nullable without a
    /// declared default, so the empty string, as Kafka's generated code has it).
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error_code: 0,
            generation_id: -1,
            protocol_type: None,
            protocol_name: Some(String::new()),
            leader: String::new(),
            skip_assignment: false,
            member_id: String::new(),
            members: Vec::new(),
        }
    }
}

/// One member of the group as the leader sees it in a [`JoinGroupResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupMember {
    /// The member id.
    pub member_id: String,
    /// v5+: the static member's `group.instance.id` (KIP-345), or null.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol (opaque here).
    pub metadata: Bytes,
}

impl JoinGroupMember {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = JoinGroupResponse::is_flexible(version);
        out.put_string(flexible, &self.member_id);
        if version >= 5 {
            out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        }
        out.put_bytes_field(flexible, &self.metadata);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = JoinGroupResponse::is_flexible(version);
        let mut member = Self {
            member_id: d.string(flexible, "JoinGroupResponse.members.member_id")?,
            ..Self::default()
        };
        if version >= 5 {
            member.group_instance_id =
                d.nullable_string(flexible, "JoinGroupResponse.members.group_instance_id")?;
        }
        member.metadata = d.bytes(flexible, "JoinGroupResponse.members.metadata")?;
        if flexible {
            d.skip_tagged_fields("JoinGroupResponse.members.tagged_fields")?;
        }
        Ok(member)
    }
}

impl Message for JoinGroupResponse {
    const API_KEY: ApiKey = ApiKey::JoinGroup;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 9;
    const FLEXIBLE_FROM: i16 = 6;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 2 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_i16(self.error_code);
        out.put_i32(self.generation_id);
        if version >= 7 {
            out.put_nullable_string(flexible, self.protocol_type.as_deref());
        }
        put_string_nullable_if(out, flexible, version >= 7, self.protocol_name.as_deref());
        out.put_string(flexible, &self.leader);
        if version >= 9 {
            out.put_bool(self.skip_assignment);
        }
        out.put_string(flexible, &self.member_id);
        out.put_array(flexible, &self.members, |out, m| m.encode(version, out));
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 2 {
            response.throttle_time_ms = d.i32("JoinGroupResponse.throttle_time_ms")?;
        }
        response.error_code = d.i16("JoinGroupResponse.error_code")?;
        response.generation_id = d.i32("JoinGroupResponse.generation_id")?;
        if version >= 7 {
            response.protocol_type =
                d.nullable_string(flexible, "JoinGroupResponse.protocol_type")?;
        }
        response.protocol_name =
            read_string_nullable_if(d, flexible, version >= 7, "JoinGroupResponse.protocol_name")?;
        response.leader = d.string(flexible, "JoinGroupResponse.leader")?;
        if version >= 9 {
            response.skip_assignment = d.bool("JoinGroupResponse.skip_assignment")?;
        }
        response.member_id = d.string(flexible, "JoinGroupResponse.member_id")?;
        response.members = d.array_of(flexible, "JoinGroupResponse.members", |d| {
            JoinGroupMember::decode(d, version)
        })?;
        if flexible {
            d.skip_tagged_fields("JoinGroupResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> JoinGroupResponse {
        JoinGroupResponse {
            throttle_time_ms: 0,
            error_code: 0,
            generation_id: 1,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: "m".into(),
            skip_assignment: true,
            member_id: "m".into(),
            members: vec![JoinGroupMember {
                member_id: "m".into(),
                group_instance_id: None,
                metadata: Bytes::from_static(&[7]),
            }],
        }
    }

    #[test]
    fn response_v5_classic_golden() {
        let mut value = response();
        value.protocol_type = None; // v7+
        value.skip_assignment = false; // v9+
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,                 // throttle_time_ms (v2+)
            0x00, 0x00,                             // error_code
            0x00, 0x00, 0x00, 0x01,                 // generation_id 1
            0x00, 0x05, b'r', b'a', b'n', b'g', b'e', // protocol_name (not nullable before v7)
            0x00, 0x01, b'm',                       // leader
            0x00, 0x01, b'm',                       // member_id
            0x00, 0x00, 0x00, 0x01,                 // members: count 1
            0x00, 0x01, b'm',                       //   member_id
            0xff, 0xff,                             //   group_instance_id: null (v5+)
            0x00, 0x00, 0x00, 0x01, 7,              //   metadata
        ];
        assert_golden(&value, 5, &golden);
    }

    #[test]
    fn response_v9_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,                 // throttle_time_ms
            0x00, 0x00,                             // error_code
            0x00, 0x00, 0x00, 0x01,                 // generation_id
            0x09, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type (v7+)
            0x06, b'r', b'a', b'n', b'g', b'e',     // protocol_name
            0x02, b'm',                             // leader
            0x01,                                   // skip_assignment (v9+)
            0x02, b'm',                             // member_id
            0x02,                                   // members: compact count 1 + 1
            0x02, b'm',                             //   member_id
            0x00,                                   //   group_instance_id: null
            0x02, 7,                                //   metadata
            0x00,                                   //   member tagged fields
            0x00,                                   // tagged fields
        ];
        assert_golden(&response(), 9, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&response());
    }
}
