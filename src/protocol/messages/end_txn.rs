//! EndTxnResponse (API key 26): the outcome of committing or aborting the producer's ongoing
//! transaction (KIP-98). The request is generated (`super::super::generated`).
//!
//! Schemas `EndTxnRequest.json` / `EndTxnResponse.json`: versions 0–5, flexible from v3.
//!
//! Version history: v1 is the same as v0; v2 may answer PRODUCER_FENCED (KIP-588); v3 is the
//! first flexible version; v4 may answer TRANSACTION_ABORTABLE (KIP-890 part 1); v5 bumps the
//! epoch at every transaction end and returns the new ProducerId/ProducerEpoch (KIP-890 part 2,
//! transactions v2).

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// EndTxn response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
    /// v5+: the producer id to use from now on (KIP-890 part 2: a new one when the epoch
    /// overflowed); -1 (the default) below v5.
    pub producer_id: i64,
    /// v5+: the producer epoch to use from now on, bumped by the coordinator at every
    /// transaction end (KIP-890 part 2); -1 (the default) below v5.
    pub producer_epoch: i16,
}

impl Default for EndTxnResponse {
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

impl Message for EndTxnResponse {
    const API_KEY: ApiKey = ApiKey::EndTxn;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        if version >= 5 {
            out.put_i64(self.producer_id);
            out.put_i16(self.producer_epoch);
        }
        if Self::is_flexible(version) {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let mut response = Self {
            throttle_time_ms: d.i32("EndTxnResponse.throttle_time_ms")?,
            error_code: d.i16("EndTxnResponse.error_code")?,
            ..Self::default()
        };
        if version >= 5 {
            response.producer_id = d.i64("EndTxnResponse.producer_id")?;
            response.producer_epoch = d.i16("EndTxnResponse.producer_epoch")?;
        }
        if Self::is_flexible(version) {
            d.skip_tagged_fields("EndTxnResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    #[test]
    fn golden_response_v2_classic_and_v5_with_the_new_epoch() {
        let v2_response = EndTxnResponse {
            throttle_time_ms: 0,
            error_code: 51, // CONCURRENT_TRANSACTIONS
            ..Default::default()
        };
        #[rustfmt::skip]
        let v2 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x33,                   // error_code 51
        ];
        assert_golden(&v2_response, 2, &v2);

        let v5_response = EndTxnResponse {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: 9,
            producer_epoch: 3,
        };
        #[rustfmt::skip]
        let v5 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x00,                   // error_code 0
            0, 0, 0, 0, 0, 0, 0, 0x09,    // producer_id 9
            0x00, 0x03,                   // producer_epoch 3 (bumped)
            0x00,                         // tagged fields
        ];
        assert_golden(&v5_response, 5, &v5);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        let response = EndTxnResponse {
            throttle_time_ms: 1,
            error_code: 0,
            producer_id: 77,
            producer_epoch: 5,
        };
        assert_robust(&response);
    }
}
