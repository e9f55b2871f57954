//! GetTelemetrySubscriptionsResponse (API key 71) and PushTelemetryResponse (API key 72),
//! version 0: client telemetry (KIP-714). The client asks a broker which of its metrics the
//! cluster wants, and how often, then pushes them. Both requests are generated
//! (`super::super::generated`); the answers are read by long-running clients, so they are
//! decoded here, bounded.
//!
//! Schemas `GetTelemetrySubscriptionsResponse.json` / `PushTelemetryResponse.json` (Kafka
//! 3.7+): flexible in every version.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// GetTelemetrySubscriptions response body: the client's instance id (assigned by the broker
/// when the request carried the zero id) and the subscription it must push.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GetTelemetrySubscriptionsResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
    /// The client instance id the broker assigned (or the one the request carried).
    pub client_instance_id: [u8; 16],
    /// Identifies this subscription; every push carries it.
    pub subscription_id: i32,
    /// The compression types the broker accepts in a push, in its order of preference.
    pub accepted_compression_types: Vec<i8>,
    /// How often to push, in milliseconds.
    pub push_interval_ms: i32,
    /// The largest metrics payload the broker accepts, in bytes.
    pub telemetry_max_bytes: i32,
    /// Whether counters are pushed as deltas since the last push (else cumulative).
    pub delta_temporality: bool,
    /// Prefixes of the metric names wanted; one empty string means all, none means none.
    pub requested_metrics: Vec<String>,
}

impl Message for GetTelemetrySubscriptionsResponse {
    const API_KEY: ApiKey = ApiKey::GetTelemetrySubscriptions;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FLEXIBLE_FROM: i16 = 0;

    fn encode<B: BufMut>(&self, _version: i16, out: &mut B) {
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        out.put_uuid(&self.client_instance_id);
        out.put_i32(self.subscription_id);
        out.put_array(true, &self.accepted_compression_types, |out, c| {
            out.put_i8(*c)
        });
        out.put_i32(self.push_interval_ms);
        out.put_i32(self.telemetry_max_bytes);
        out.put_bool(self.delta_temporality);
        out.put_array(true, &self.requested_metrics, |out, m| {
            out.put_string(true, m)
        });
        out.put_empty_tagged_fields();
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        const CONTEXT: &str = "GetTelemetrySubscriptionsResponse";
        let response = Self {
            throttle_time_ms: d.i32(CONTEXT)?,
            error_code: d.i16(CONTEXT)?,
            client_instance_id: d.uuid(CONTEXT)?,
            subscription_id: d.i32(CONTEXT)?,
            accepted_compression_types: d.array_of(true, CONTEXT, |d| d.i8(CONTEXT))?,
            push_interval_ms: d.i32(CONTEXT)?,
            telemetry_max_bytes: d.i32(CONTEXT)?,
            delta_temporality: d.bool(CONTEXT)?,
            requested_metrics: d.array_of(true, CONTEXT, |d| d.string(true, CONTEXT))?,
        };
        d.skip_tagged_fields(CONTEXT)?;
        Ok(response)
    }
}

/// PushTelemetry response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PushTelemetryResponse {
    /// How long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, 0 for success (UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE,
    /// TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED, ...).
    pub error_code: i16,
}

impl Message for PushTelemetryResponse {
    const API_KEY: ApiKey = ApiKey::PushTelemetry;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FLEXIBLE_FROM: i16 = 0;

    fn encode<B: BufMut>(&self, _version: i16, out: &mut B) {
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        out.put_empty_tagged_fields();
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        const CONTEXT: &str = "PushTelemetryResponse";
        let response = Self {
            throttle_time_ms: d.i32(CONTEXT)?,
            error_code: d.i16(CONTEXT)?,
        };
        d.skip_tagged_fields(CONTEXT)?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_subscription() -> GetTelemetrySubscriptionsResponse {
        GetTelemetrySubscriptionsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            client_instance_id: [9; 16],
            subscription_id: 258,
            accepted_compression_types: vec![3, 0],
            push_interval_ms: 1000,
            telemetry_max_bytes: 1 << 20,
            delta_temporality: false,
            requested_metrics: vec!["org.apache.kafka.producer.".into()],
        }
    }

    #[test]
    fn subscription_golden() {
        let mut golden = vec![0, 0, 0, 0, 0, 0];
        golden.extend([9; 16]);
        golden.extend([0, 0, 1, 2]); // subscription id 258
        golden.extend([3, 3, 0]); // compact array of two: lz4, none
        golden.extend([0, 0, 3, 0xe8]); // 1000 ms
        golden.extend([0, 16, 0, 0]); // 1 MiB
        golden.push(0); // cumulative
        golden.extend([2, 27]); // one compact string of 26 bytes
        golden.extend(b"org.apache.kafka.producer.");
        golden.push(0); // no tagged fields
        assert_golden(&sample_subscription(), 0, &golden);
    }

    #[test]
    fn push_golden() {
        let value = PushTelemetryResponse {
            throttle_time_ms: 5,
            error_code: 117, // UNKNOWN_SUBSCRIPTION_ID
        };
        assert_golden(&value, 0, &[0, 0, 0, 5, 0, 117, 0]);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&sample_subscription());
        assert_robust(&PushTelemetryResponse {
            throttle_time_ms: 1,
            error_code: 76,
        });
    }
}
