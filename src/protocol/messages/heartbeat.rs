//! HeartbeatResponse (API key 12), versions 0–4: whether the classic-protocol group the
//! member told it is alive is rebalancing. The request is generated (`super::super::generated`).
//!
//! Schema: `HeartbeatRequest.json` / `HeartbeatResponse.json`. v1 adds the response's throttle
//! time, v3 the static member's `GroupInstanceId` (KIP-345), v4 is the first flexible version.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

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
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 4;

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
        assert_robust(&HeartbeatResponse {
            throttle_time_ms: 100,
            error_code: 25,
        });
    }
}
