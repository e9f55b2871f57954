//! AddOffsetsToTxnResponse (API key 25): whether a consumer group's offsets partition joined the
//! transaction, before TxnOffsetCommit (KIP-98). The request is generated
//! (`super::super::generated`). Not sent under transactions v2, where TxnOffsetCommit v5
//! does it implicitly (KIP-890 part 2).
//!
//! Schemas `AddOffsetsToTxnRequest.json` / `AddOffsetsToTxnResponse.json`: versions 0–4,
//! flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 may answer PRODUCER_FENCED (KIP-588); v3 is the
//! first flexible version; v4 may answer TRANSACTION_ABORTABLE (KIP-890).

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// AddOffsetsToTxn response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddOffsetsToTxnResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
}

impl Message for AddOffsetsToTxnResponse {
    const API_KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        if Self::is_flexible(version) {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let response = Self {
            throttle_time_ms: d.i32("AddOffsetsToTxnResponse.throttle_time_ms")?,
            error_code: d.i16("AddOffsetsToTxnResponse.error_code")?,
        };
        if Self::is_flexible(version) {
            d.skip_tagged_fields("AddOffsetsToTxnResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    #[test]
    fn golden_response_v0_classic_and_v3_flexible() {
        let response = AddOffsetsToTxnResponse {
            throttle_time_ms: 2,
            error_code: 49, // INVALID_PRODUCER_ID_MAPPING
        };
        #[rustfmt::skip]
        let v0 = [
            0x00, 0x00, 0x00, 0x02,       // throttle_time_ms 2
            0x00, 0x31,                   // error_code 49
        ];
        assert_golden(&response, 0, &v0);
        #[rustfmt::skip]
        let v3 = [
            0x00, 0x00, 0x00, 0x02,       // throttle_time_ms 2
            0x00, 0x31,                   // error_code 49
            0x00,                         // tagged fields
        ];
        assert_golden(&response, 3, &v3);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        let response = AddOffsetsToTxnResponse {
            throttle_time_ms: 9,
            error_code: 51,
        };
        assert_robust(&response);
    }
}
