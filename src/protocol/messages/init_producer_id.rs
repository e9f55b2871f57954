//! InitProducerIdResponse (API key 22): the producer id and epoch a producer obtains, fencing
//! older instances of a transactional id (KIP-98). The request is generated
//! (`super::super::generated`).
//!
//! Schemas `InitProducerIdRequest.json` / `InitProducerIdResponse.json`: versions 0–5, flexible
//! from v2.
//!
//! Version history: v1 is the same as v0; v2 is the first flexible version; v3 adds the current
//! ProducerId/ProducerEpoch to the request so a producer can bump its epoch instead of being
//! fenced (KIP-360); v4 may answer PRODUCER_FENCED (KIP-588); v5 may answer
//! TRANSACTION_ABORTABLE (KIP-890).
//!
//! v6 (Kafka 4.1, KIP-939 two-phase commit: `Enable2Pc`, `KeepPreparedTxn` and the ongoing
//! transaction's id/epoch in the response) is not implemented: brokers mark it unstable and do
//! not accept it unless unstable API versions are enabled.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// InitProducerId response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
    /// The producer id; -1 (the default) on error.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
}

impl Default for InitProducerIdResponse {
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: -1,
            producer_epoch: 0,
        }
    }
}

impl Message for InitProducerIdResponse {
    const API_KEY: ApiKey = ApiKey::InitProducerId;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 2;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        if Self::is_flexible(version) {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let response = Self {
            throttle_time_ms: d.i32("InitProducerIdResponse.throttle_time_ms")?,
            error_code: d.i16("InitProducerIdResponse.error_code")?,
            producer_id: d.i64("InitProducerIdResponse.producer_id")?,
            producer_epoch: d.i16("InitProducerIdResponse.producer_epoch")?,
        };
        if Self::is_flexible(version) {
            d.skip_tagged_fields("InitProducerIdResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    #[test]
    fn golden_response_v0_classic_and_v4_flexible() {
        let response = InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: 7,
            producer_epoch: 1,
        };
        #[rustfmt::skip]
        let v0 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x00, 0x00,                   // error_code 0
            0, 0, 0, 0, 0, 0, 0, 0x07,    // producer_id 7
            0x00, 0x01,                   // producer_epoch 1
        ];
        assert_golden(&response, 0, &v0);
        let mut v4 = v0.to_vec();
        v4.push(0x00); // tagged fields
        assert_golden(&response, 4, &v4);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        let response = InitProducerIdResponse {
            throttle_time_ms: 3,
            error_code: 90,
            producer_id: 42,
            producer_epoch: 3,
        };
        assert_robust(&response);
    }
}
