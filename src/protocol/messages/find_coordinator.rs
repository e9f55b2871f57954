//! FindCoordinatorResponse (API key 10): which broker coordinates a consumer group or a
//! transactional id. The request is generated (`super::super::generated`).
//!
//! Schemas `FindCoordinatorRequest.json` / `FindCoordinatorResponse.json`: versions 0–6,
//! flexible from v3.
//!
//! Version history: v1 adds the key type (KIP-98) and, in the response, throttle time and an
//! error message; v2 is the same as v1; v3 is the first flexible version; v4 batches keys
//! (`CoordinatorKeys` / `Coordinators`, KIP-699) and drops the single-key fields; v5 may answer
//! TRANSACTION_ABORTABLE (KIP-890); v6 adds the share-group key type (KIP-932).
//!
//! Both shapes map onto one struct: a list of [`Coordinator`]s. Below v4 the list holds
//! exactly one entry.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// FindCoordinator response body, in one shape for every version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindCoordinatorResponse {
    /// v1+: how long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// One result per key. v4+ carry the list (`Coordinators`, KIP-699); v0–3 carry the
    /// fields of one result at the top level: they decode to a one-entry list whose `key` is
    /// empty (the caller knows which key it asked for), and only the first entry is encoded.
    pub coordinators: Vec<Coordinator>,
}

/// The coordinator of one key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Coordinator {
    /// v4+: the key this result is for; empty below v4.
    pub key: String,
    /// The coordinator's broker id.
    pub node_id: i32,
    /// The coordinator's host name.
    pub host: String,
    /// The coordinator's port.
    pub port: i32,
    /// The error code, 0 for success.
    pub error_code: i16,
    /// v1+: the error message, or null.
    pub error_message: Option<String>,
}

impl Coordinator {
    /// The v4+ list entry.
    fn encode_entry<B: BufMut>(&self, out: &mut B) {
        out.put_string(true, &self.key);
        out.put_i32(self.node_id);
        out.put_string(true, &self.host);
        out.put_i32(self.port);
        out.put_i16(self.error_code);
        out.put_nullable_string(true, self.error_message.as_deref());
        out.put_empty_tagged_fields();
    }

    fn decode_entry(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let coordinator = Self {
            key: d.string(true, "Coordinator.key")?,
            node_id: d.i32("Coordinator.node_id")?,
            host: d.string(true, "Coordinator.host")?,
            port: d.i32("Coordinator.port")?,
            error_code: d.i16("Coordinator.error_code")?,
            error_message: d.nullable_string(true, "Coordinator.error_message")?,
        };
        d.skip_tagged_fields("Coordinator.tagged_fields")?;
        Ok(coordinator)
    }

    /// The v0–3 top-level fields (after the throttle time).
    fn encode_single<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = FindCoordinatorResponse::is_flexible(version);
        out.put_i16(self.error_code);
        if version >= 1 {
            out.put_nullable_string(flexible, self.error_message.as_deref());
        }
        out.put_i32(self.node_id);
        out.put_string(flexible, &self.host);
        out.put_i32(self.port);
    }

    fn decode_single(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = FindCoordinatorResponse::is_flexible(version);
        let mut coordinator = Self {
            error_code: d.i16("FindCoordinatorResponse.error_code")?,
            ..Self::default()
        };
        if version >= 1 {
            coordinator.error_message =
                d.nullable_string(flexible, "FindCoordinatorResponse.error_message")?;
        }
        coordinator.node_id = d.i32("FindCoordinatorResponse.node_id")?;
        coordinator.host = d.string(flexible, "FindCoordinatorResponse.host")?;
        coordinator.port = d.i32("FindCoordinatorResponse.port")?;
        Ok(coordinator)
    }
}

impl Message for FindCoordinatorResponse {
    const API_KEY: ApiKey = ApiKey::FindCoordinator;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 6;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        debug_assert!(
            version >= 4 || self.coordinators.len() <= 1,
            "FindCoordinator v0-3 carry one result (none encodes as an empty one)"
        );
        let flexible = Self::is_flexible(version);
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        if version >= 4 {
            out.put_array(true, &self.coordinators, |out, c| c.encode_entry(out));
        } else {
            match self.coordinators.first() {
                Some(coordinator) => coordinator.encode_single(version, out),
                None => Coordinator::default().encode_single(version, out),
            }
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 1 {
            response.throttle_time_ms = d.i32("FindCoordinatorResponse.throttle_time_ms")?;
        }
        response.coordinators = if version >= 4 {
            d.array_of(true, "FindCoordinatorResponse.coordinators", |d| {
                Coordinator::decode_entry(d)
            })?
        } else {
            vec![Coordinator::decode_single(d, version)?]
        };
        if flexible {
            d.skip_tagged_fields("FindCoordinatorResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust_at};

    fn sample_response(version: i16) -> FindCoordinatorResponse {
        let coordinator = |key: &str| Coordinator {
            key: if version >= 4 {
                key.into()
            } else {
                String::new()
            },
            node_id: 2,
            host: "broker-2".into(),
            port: 9093,
            error_code: 0,
            error_message: (version >= 1).then(|| "none".into()),
        };
        FindCoordinatorResponse {
            throttle_time_ms: 0,
            coordinators: if version >= 4 {
                vec![coordinator("g1"), coordinator("g2")]
            } else {
                vec![coordinator("")]
            },
        }
    }

    #[test]
    fn golden_response_v1_classic_and_v4_batched() {
        let single = FindCoordinatorResponse {
            throttle_time_ms: 1,
            coordinators: vec![Coordinator {
                key: String::new(),
                node_id: 5,
                host: "h".into(),
                port: 9092,
                error_code: 0,
                error_message: None,
            }],
        };
        #[rustfmt::skip]
        let v1 = [
            0x00, 0x00, 0x00, 0x01,       // throttle_time_ms 1
            0x00, 0x00,                   // error_code 0
            0xff, 0xff,                   // error_message null
            0x00, 0x00, 0x00, 0x05,       // node_id 5
            0x00, 0x01, b'h',             // host "h"
            0x00, 0x00, 0x23, 0x84,       // port 9092
        ];
        assert_golden(&single, 1, &v1);

        let batched = FindCoordinatorResponse {
            throttle_time_ms: 0,
            coordinators: vec![Coordinator {
                key: "g".into(),
                node_id: 1,
                host: "h".into(),
                port: 1,
                error_code: 15,
                error_message: Some("e".into()),
            }],
        };
        #[rustfmt::skip]
        let v6 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x02,                         // coordinators: compact 1+1
            0x02, b'g',                   //   key "g"
            0x00, 0x00, 0x00, 0x01,       //   node_id 1
            0x02, b'h',                   //   host "h"
            0x00, 0x00, 0x00, 0x01,       //   port 1
            0x00, 0x0f,                   //   error_code 15 (COORDINATOR_NOT_AVAILABLE)
            0x02, b'e',                   //   error_message "e"
            0x00,                         //   entry tagged fields
            0x00,                         // tagged fields
        ];
        assert_golden(&batched, 6, &v6);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        for version in FindCoordinatorResponse::MIN_VERSION..=FindCoordinatorResponse::MAX_VERSION {
            assert_robust_at(&sample_response(version), version);
        }
    }
}
