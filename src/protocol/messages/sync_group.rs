//! SyncGroupResponse (API key 14), versions 0–5: the second step of a classic-protocol
//! rebalance. The leader sends every member's assignment; every member receives its own. The
//! request is generated (`super::super::generated`).
//!
//! Schema: `SyncGroupRequest.json` / `SyncGroupResponse.json`. v1 adds the response's throttle
//! time, v3 the static member's `GroupInstanceId` (KIP-345), v4 is the first flexible version,
//! v5 carries `ProtocolType` / `ProtocolName` both ways so the coordinator can check them
//! (KIP-559).

use bytes::{BufMut, Bytes};

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

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
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 4;

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
        assert_robust(&response());
    }
}
