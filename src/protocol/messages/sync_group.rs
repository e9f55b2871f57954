//! SyncGroup (API key 14), versions 0–5: the second step of a classic-protocol rebalance. The
//! leader sends every member's assignment; every member receives its own.
//!
//! Schema: `SyncGroupRequest.json` / `SyncGroupResponse.json`. v1 adds the response's throttle
//! time, v3 the static member's `GroupInstanceId` (KIP-345), v4 is the first flexible version,
//! v5 carries `ProtocolType` / `ProtocolName` both ways so the coordinator can check them
//! (KIP-559).

use bytes::{BufMut, Bytes};

use super::fields::{put_string_bytes_entry, read_string_bytes_entry};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// SyncGroupRequest: a member of a generation asking for its assignment (and, from the leader,
/// handing out everyone's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupRequest {
    /// The group id.
    pub group_id: String,
    /// The generation the assignments are for.
    pub generation_id: i32,
    /// The member id the coordinator assigned.
    pub member_id: String,
    /// v3+: the static member's `group.instance.id` (KIP-345), or null.
    pub group_instance_id: Option<String>,
    /// v5+: the protocol type the member joined with, e.g. `consumer` (KIP-559), or null.
    pub protocol_type: Option<String>,
    /// v5+: the protocol the coordinator selected, e.g. `range` (KIP-559), or null.
    pub protocol_name: Option<String>,
    /// The assignments the leader computed; empty from followers.
    pub assignments: Vec<SyncGroupAssignment>,
}

/// One member's assignment in a [`SyncGroupRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupAssignment {
    /// The member it is for.
    pub member_id: String,
    /// The assignment, in the format of the group's protocol type (opaque here).
    pub assignment: Bytes,
}

impl SyncGroupAssignment {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        put_string_bytes_entry(out, flexible, &self.member_id, &self.assignment);
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let (member_id, assignment) =
            read_string_bytes_entry(d, flexible, "SyncGroupRequest.assignments")?;
        Ok(Self {
            member_id,
            assignment,
        })
    }
}

impl Message for SyncGroupRequest {
    const API_KEY: ApiKey = ApiKey::SyncGroup;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 4;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_string(flexible, &self.group_id);
        out.put_i32(self.generation_id);
        out.put_string(flexible, &self.member_id);
        if version >= 3 {
            out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        }
        if version >= 5 {
            out.put_nullable_string(flexible, self.protocol_type.as_deref());
            out.put_nullable_string(flexible, self.protocol_name.as_deref());
        }
        out.put_array(flexible, &self.assignments, |out, a| {
            a.encode(flexible, out)
        });
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut request = Self {
            group_id: d.string(flexible, "SyncGroupRequest.group_id")?,
            generation_id: d.i32("SyncGroupRequest.generation_id")?,
            member_id: d.string(flexible, "SyncGroupRequest.member_id")?,
            ..Self::default()
        };
        if version >= 3 {
            request.group_instance_id =
                d.nullable_string(flexible, "SyncGroupRequest.group_instance_id")?;
        }
        if version >= 5 {
            request.protocol_type =
                d.nullable_string(flexible, "SyncGroupRequest.protocol_type")?;
            request.protocol_name =
                d.nullable_string(flexible, "SyncGroupRequest.protocol_name")?;
        }
        request.assignments = d.array_of(flexible, "SyncGroupRequest.assignments", |d| {
            SyncGroupAssignment::decode(d, flexible)
        })?;
        if flexible {
            d.skip_tagged_fields("SyncGroupRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for SyncGroupRequest {
    type Response = SyncGroupResponse;
}

/// SyncGroupResponse: this member's assignment, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupResponse {
    /// v1+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for none.
    pub error_code: i16,
    /// v5+: the group's protocol type (KIP-559), or null.
    pub protocol_type: Option<String>,
    /// v5+: the group's selected protocol (KIP-559), or null.
    pub protocol_name: Option<String>,
    /// This member's assignment (opaque here).
    pub assignment: Bytes,
}

impl Message for SyncGroupResponse {
    const API_KEY: ApiKey = ApiKey::SyncGroup;
    const MIN_VERSION: i16 = SyncGroupRequest::MIN_VERSION;
    const MAX_VERSION: i16 = SyncGroupRequest::MAX_VERSION;
    const FLEXIBLE_FROM: i16 = SyncGroupRequest::FLEXIBLE_FROM;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_i16(self.error_code);
        if version >= 5 {
            out.put_nullable_string(flexible, self.protocol_type.as_deref());
            out.put_nullable_string(flexible, self.protocol_name.as_deref());
        }
        out.put_bytes_field(flexible, &self.assignment);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 1 {
            response.throttle_time_ms = d.i32("SyncGroupResponse.throttle_time_ms")?;
        }
        response.error_code = d.i16("SyncGroupResponse.error_code")?;
        if version >= 5 {
            response.protocol_type =
                d.nullable_string(flexible, "SyncGroupResponse.protocol_type")?;
            response.protocol_name =
                d.nullable_string(flexible, "SyncGroupResponse.protocol_name")?;
        }
        response.assignment = d.bytes(flexible, "SyncGroupResponse.assignment")?;
        if flexible {
            d.skip_tagged_fields("SyncGroupResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn request() -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 2,
            member_id: "m".into(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments: vec![SyncGroupAssignment {
                member_id: "m".into(),
                assignment: Bytes::from_static(&[0, 3]),
            }],
        }
    }

    fn response() -> SyncGroupResponse {
        SyncGroupResponse {
            throttle_time_ms: 0,
            error_code: 0,
            protocol_type: Some("consumer".into()),
            protocol_name: None,
            assignment: Bytes::from_static(&[0, 3]),
        }
    }

    #[test]
    fn request_v3_classic_golden() {
        let mut value = request();
        value.protocol_type = None; // v5+ only
        value.protocol_name = None;
        #[rustfmt::skip]
        let golden = [
            0x00, 0x01, b'g',               // group_id
            0x00, 0x00, 0x00, 0x02,         // generation_id 2
            0x00, 0x01, b'm',               // member_id
            0xff, 0xff,                     // group_instance_id: null (v3+)
            0x00, 0x00, 0x00, 0x01,         // assignments: count 1
            0x00, 0x01, b'm',               //   member_id
            0x00, 0x00, 0x00, 0x02, 0, 3,   //   assignment: int32 length 2
        ];
        assert_golden(&value, 3, &golden);
    }

    #[test]
    fn request_v5_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x02, b'g',                     // group_id
            0x00, 0x00, 0x00, 0x02,         // generation_id 2
            0x02, b'm',                     // member_id
            0x00,                           // group_instance_id: null
            0x09, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type (v5+)
            0x06, b'r', b'a', b'n', b'g', b'e',                   // protocol_name (v5+)
            0x02,                           // assignments: compact count 1 + 1
            0x02, b'm',                     //   member_id
            0x03, 0, 3,                     //   assignment: compact length 2 + 1
            0x00,                           //   assignment tagged fields
            0x00,                           // tagged fields
        ];
        assert_golden(&request(), 5, &golden);
    }

    #[test]
    fn response_v1_classic_golden() {
        let mut value = response();
        value.protocol_type = None;
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,         // throttle_time_ms (v1+)
            0x00, 0x00,                     // error_code
            0x00, 0x00, 0x00, 0x02, 0, 3,   // assignment
        ];
        assert_golden(&value, 1, &golden);
    }

    #[test]
    fn response_v5_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00,         // throttle_time_ms
            0x00, 0x00,                     // error_code
            0x09, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type
            0x00,                           // protocol_name: null
            0x03, 0, 3,                     // assignment
            0x00,                           // tagged fields
        ];
        assert_golden(&response(), 5, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        let mut sample = request();
        sample.group_instance_id = Some("i".into());
        assert_robust(&sample);
        assert_robust(&response());
    }
}
