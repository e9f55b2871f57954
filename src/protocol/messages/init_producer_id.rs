//! InitProducerId (API key 22): obtains a producer id and epoch, fencing older instances of a
//! transactional id (KIP-98).
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
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, WireWrite};

/// InitProducerId request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// The transactional id, or null for an idempotent-only producer.
    pub transactional_id: Option<String>,
    /// How long the coordinator waits before aborting an idle transaction, in milliseconds
    /// (only meaningful with a transactional id).
    pub transaction_timeout_ms: i32,
    /// v3+: the producer id the client has, or -1 (the default) for none (KIP-360).
    pub producer_id: i64,
    /// v3+: the epoch the client has, or -1 (the default) for none (KIP-360).
    pub producer_epoch: i16,
}

impl Default for InitProducerIdRequest {
    fn default() -> Self {
        Self {
            transactional_id: None,
            transaction_timeout_ms: 0,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

impl Message for InitProducerIdRequest {
    const API_KEY: ApiKey = ApiKey::InitProducerId;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 5;
    const FLEXIBLE_FROM: i16 = 2;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_nullable_string(flexible, self.transactional_id.as_deref());
        out.put_i32(self.transaction_timeout_ms);
        if version >= 3 {
            out.put_i64(self.producer_id);
            out.put_i16(self.producer_epoch);
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut request = Self {
            transactional_id: d
                .nullable_string(flexible, "InitProducerIdRequest.transactional_id")?,
            transaction_timeout_ms: d.i32("InitProducerIdRequest.transaction_timeout_ms")?,
            ..Self::default()
        };
        if version >= 3 {
            request.producer_id = d.i64("InitProducerIdRequest.producer_id")?;
            request.producer_epoch = d.i16("InitProducerIdRequest.producer_epoch")?;
        }
        if flexible {
            d.skip_tagged_fields("InitProducerIdRequest.tagged_fields")?;
        }
        Ok(request)
    }
}

impl Request for InitProducerIdRequest {
    type Response = InitProducerIdResponse;
}

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
    fn golden_request_v1_classic_and_v3_flexible() {
        let v1_request = InitProducerIdRequest {
            transactional_id: Some("t".into()),
            transaction_timeout_ms: 60_000,
            ..Default::default()
        };
        #[rustfmt::skip]
        let v1 = [
            0x00, 0x01, b't',             // transactional_id "t"
            0x00, 0x00, 0xea, 0x60,       // transaction_timeout_ms 60000
        ];
        assert_golden(&v1_request, 1, &v1);

        let v3_request = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 1,
            producer_id: 1000,
            producer_epoch: 3,
        };
        #[rustfmt::skip]
        let v3 = [
            0x00,                         // transactional_id: compact null
            0x00, 0x00, 0x00, 0x01,       // transaction_timeout_ms 1
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // producer_id 1000
            0x00, 0x03,                   // producer_epoch 3
            0x00,                         // tagged fields
        ];
        assert_golden(&v3_request, 3, &v3);
    }

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
        let request = InitProducerIdRequest {
            transactional_id: Some("txn-1".into()),
            transaction_timeout_ms: 60_000,
            producer_id: 42,
            producer_epoch: 2,
        };
        let response = InitProducerIdResponse {
            throttle_time_ms: 3,
            error_code: 90,
            producer_id: 42,
            producer_epoch: 3,
        };
        assert_robust(&request);
        assert_robust(&response);
    }
}
