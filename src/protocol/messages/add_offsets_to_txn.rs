//! AddOffsetsToTxn (API key 25): adds a consumer group's offsets partition to the transaction,
//! before TxnOffsetCommit (KIP-98). Not sent under transactions v2, where TxnOffsetCommit v5
//! does it implicitly (KIP-890 part 2).
//!
//! Schemas `AddOffsetsToTxnRequest.json` / `AddOffsetsToTxnResponse.json`: versions 0–4,
//! flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 may answer PRODUCER_FENCED (KIP-588); v3 is the
//! first flexible version; v4 may answer TRANSACTION_ABORTABLE (KIP-890).

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// AddOffsetsToTxn request body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddOffsetsToTxnRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// The consumer group whose offsets will be committed in the transaction.
    pub group_id: String,
}

impl Message for AddOffsetsToTxnRequest {
    const API_KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_string(flexible, &self.transactional_id);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_string(flexible, &self.group_id);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let request = Self {
            transactional_id: d.string(flexible, "AddOffsetsToTxnRequest.transactional_id")?,
            producer_id: d.i64("AddOffsetsToTxnRequest.producer_id")?,
            producer_epoch: d.i16("AddOffsetsToTxnRequest.producer_epoch")?,
            group_id: d.string(flexible, "AddOffsetsToTxnRequest.group_id")?,
        };
        if flexible {
            d.skip_tagged_fields("AddOffsetsToTxnRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for AddOffsetsToTxnRequest {
    type Response = AddOffsetsToTxnResponse;
}

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

    fn sample_request() -> AddOffsetsToTxnRequest {
        AddOffsetsToTxnRequest {
            transactional_id: "t".into(),
            producer_id: 1,
            producer_epoch: 0,
            group_id: "g".into(),
        }
    }

    #[test]
    fn golden_request_v2_classic_and_v4_flexible() {
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x01, b't',             // transactional_id "t"
            0, 0, 0, 0, 0, 0, 0, 0x01,    // producer_id 1
            0x00, 0x00,                   // producer_epoch 0
            0x00, 0x01, b'g',             // group_id "g"
        ];
        assert_golden(&sample_request(), 2, &v2);
        #[rustfmt::skip]
        let v4 = [
            0x02, b't',                   // transactional_id "t" (compact)
            0, 0, 0, 0, 0, 0, 0, 0x01,    // producer_id 1
            0x00, 0x00,                   // producer_epoch 0
            0x02, b'g',                   // group_id "g" (compact)
            0x00,                         // tagged fields
        ];
        assert_golden(&sample_request(), 4, &v4);
    }

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
        assert_robust(&sample_request());
        assert_robust(&response);
    }
}
