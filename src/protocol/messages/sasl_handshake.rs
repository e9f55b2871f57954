//! SaslHandshakeResponse (API key 17), versions 0–1: whether the broker takes the SASL mechanism
//! the client named, and which ones it enables. The request is generated
//! (`super::super::generated`).
//!
//! Schema: `SaslHandshakeRequest.json` / `SaslHandshakeResponse.json`. Never flexible (the
//! version cannot be bumped, KAFKA-9577). v0 is followed by raw SASL tokens on the socket; v1
//! (KIP-152) by SaslAuthenticate requests, which is what this crate uses.

use bytes::BufMut;

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// SaslHandshakeResponse: NONE, or UNSUPPORTED_SASL_MECHANISM with the mechanisms enabled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaslHandshakeResponse {
    /// The error code, 0 for none.
    pub error_code: i16,
    /// The mechanisms enabled in the broker.
    pub mechanisms: Vec<String>,
}

impl Message for SaslHandshakeResponse {
    const API_KEY: ApiKey = ApiKey::SaslHandshake;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 1;
    const FLEXIBLE_FROM: i16 = i16::MAX;

    fn encode<B: BufMut>(&self, _version: i16, out: &mut B) {
        out.put_i16(self.error_code);
        out.put_array(false, &self.mechanisms, |out, m| out.put_string(false, m));
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        Ok(Self {
            error_code: d.i16("SaslHandshakeResponse.error_code")?,
            mechanisms: d.array_of(false, "SaslHandshakeResponse.mechanisms", |d| {
                d.string(false, "SaslHandshakeResponse.mechanisms")
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> SaslHandshakeResponse {
        SaslHandshakeResponse {
            error_code: 33, // UNSUPPORTED_SASL_MECHANISM
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-256".into()],
        }
    }

    #[test]
    fn response_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x21,                         // error_code 33
            0x00, 0x00, 0x00, 0x02,             // mechanisms: int32 count 2
            0x00, 0x05, b'P', b'L', b'A', b'I', b'N',
            0x00, 0x0d, b'S', b'C', b'R', b'A', b'M', b'-', b'S', b'H', b'A', b'-', b'2', b'5', b'6',
        ];
        assert_golden(&response(), 0, &golden);
        assert_golden(&response(), 1, &golden);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&response());
    }
}
