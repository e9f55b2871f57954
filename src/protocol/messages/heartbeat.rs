//! Heartbeat (API key 12), versions 0–4: a classic-protocol group member telling the group
//! coordinator it is alive, and learning from the answer whether the group is rebalancing.
//!
//! Schema: `HeartbeatRequest.json` / `HeartbeatResponse.json`. v1 adds the response's throttle
//! time, v3 the static member's `GroupInstanceId` (KIP-345), v4 is the first flexible version.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// HeartbeatRequest: the member's identity in its current generation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    /// The group id.
    pub group_id: String,
    /// The generation of the group the member believes it is in.
    pub generation_id: i32,
    /// The member id the coordinator assigned.
    pub member_id: String,
    /// v3+: the static member's `group.instance.id` (KIP-345), or null for a dynamic member.
    pub group_instance_id: Option<String>,
}

impl Message for HeartbeatRequest {
    const API_KEY: ApiKey = ApiKey::Heartbeat;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 4;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_string(flexible, &self.group_id);
        out.put_i32(self.generation_id);
        out.put_string(flexible, &self.member_id);
        if version >= 3 {
            out.put_nullable_string(flexible, self.group_instance_id.as_deref());
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut request = Self {
            group_id: d.string(flexible, "HeartbeatRequest.group_id")?,
            generation_id: d.i32("HeartbeatRequest.generation_id")?,
            member_id: d.string(flexible, "HeartbeatRequest.member_id")?,
            ..Self::default()
        };
        if version >= 3 {
            request.group_instance_id =
                d.nullable_string(flexible, "HeartbeatRequest.group_instance_id")?;
        }
        if flexible {
            d.skip_tagged_fields("HeartbeatRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for HeartbeatRequest {
    type Response = HeartbeatResponse;
}

/// HeartbeatResponse: NONE, or why the member must rejoin (REBALANCE_IN_PROGRESS,
/// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatResponse {
    /// v1+: how long the broker throttled the request (quota), in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for none.
    pub error_code: i16,
}

impl Message for HeartbeatResponse {
    const API_KEY: ApiKey = ApiKey::Heartbeat;
    const MIN_VERSION: i16 = HeartbeatRequest::MIN_VERSION;
    const MAX_VERSION: i16 = HeartbeatRequest::MAX_VERSION;
    const FLEXIBLE_FROM: i16 = HeartbeatRequest::FLEXIBLE_FROM;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_i16(self.error_code);
        if Self::is_flexible(version) {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let mut response = Self::default();
        if version >= 1 {
            response.throttle_time_ms = d.i32("HeartbeatResponse.throttle_time_ms")?;
        }
        response.error_code = d.i16("HeartbeatResponse.error_code")?;
        if Self::is_flexible(version) {
            d.skip_tagged_fields("HeartbeatResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn request() -> HeartbeatRequest {
        HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 7,
            member_id: "m-1".into(),
            group_instance_id: Some("i".into()),
        }
    }

    #[test]
    fn request_v3_classic_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x01, b'g',               // group_id: int16 length 1
            0x00, 0x00, 0x00, 0x07,         // generation_id 7
            0x00, 0x03, b'm', b'-', b'1',   // member_id
            0x00, 0x01, b'i',               // group_instance_id (v3+)
        ];
        assert_golden(&request(), 3, &golden);
    }

    #[test]
    fn request_v4_flexible_golden() {
        #[rustfmt::skip]
        let golden = [
            0x02, b'g',                     // group_id: compact length 1 + 1
            0x00, 0x00, 0x00, 0x07,         // generation_id 7
            0x04, b'm', b'-', b'1',         // member_id
            0x02, b'i',                     // group_instance_id
            0x00,                           // no tagged fields
        ];
        assert_golden(&request(), 4, &golden);
    }

    #[test]
    fn request_v0_leaves_out_the_instance_id() {
        let mut value = request();
        value.group_instance_id = None;
        #[rustfmt::skip]
        let golden = [
            0x00, 0x01, b'g',
            0x00, 0x00, 0x00, 0x07,
            0x00, 0x03, b'm', b'-', b'1',
        ];
        assert_golden(&value, 0, &golden);
    }

    #[test]
    fn response_golden() {
        let value = HeartbeatResponse {
            throttle_time_ms: 5,
            error_code: 27, // REBALANCE_IN_PROGRESS
        };
        // v1 classic: throttle_time_ms, error_code.
        assert_golden(&value, 1, &[0, 0, 0, 5, 0, 27]);
        // v4 flexible: the same plus an empty tagged-field section.
        assert_golden(&value, 4, &[0, 0, 0, 5, 0, 27, 0]);
        // v0 has no throttle time.
        let v0 = HeartbeatResponse {
            throttle_time_ms: 0,
            error_code: 27,
        };
        assert_golden(&v0, 0, &[0, 27]);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&request());
        assert_robust(&HeartbeatResponse {
            throttle_time_ms: 100,
            error_code: 25,
        });
    }
}
