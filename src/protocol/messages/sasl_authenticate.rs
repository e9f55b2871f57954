//! SaslAuthenticateResponse (API key 36), versions 0–2: the broker's side of one round of a SASL
//! exchange, framed as a Kafka response after a SaslHandshake v1 (KIP-152). The request is
//! generated (`super::super::generated`).
//!
//! Schema: `SaslAuthenticateRequest.json` / `SaslAuthenticateResponse.json`. v1 adds the
//! response's session lifetime (KIP-368, re-authentication), v2 is the first flexible version.

use bytes::{BufMut, Bytes};

use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// SaslAuthenticateResponse: the broker's token for this round, or why authentication failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    /// The error code, 0 for none (SASL_AUTHENTICATION_FAILED is 58).
    pub error_code: i16,
    /// The error message, or null if there was no error.
    pub error_message: Option<String>,
    /// The SASL authentication bytes from the broker, as the mechanism defines them.
    pub auth_bytes: Bytes,
    /// v1+: milliseconds after which the session must re-authenticate (KIP-368); 0 for never.
    pub session_lifetime_ms: i64,
}

impl Default for SaslAuthenticateResponse {
    /// The schema's defaults: `ErrorMessage` is nullable without a declared default, so it
    /// defaults to the empty string, as Kafka's generated code has it.
    fn default() -> Self {
        Self {
            error_code: 0,
            error_message: Some(String::new()),
            auth_bytes: Bytes::new(),
            session_lifetime_ms: 0,
        }
    }
}

impl Message for SaslAuthenticateResponse {
    const API_KEY: ApiKey = ApiKey::SaslAuthenticate;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 2;
    const FLEXIBLE_FROM: i16 = 2;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_i16(self.error_code);
        out.put_nullable_string(flexible, self.error_message.as_deref());
        out.put_bytes_field(flexible, &self.auth_bytes);
        if version >= 1 {
            out.put_i64(self.session_lifetime_ms);
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self {
            error_code: d.i16("SaslAuthenticateResponse.error_code")?,
            error_message: d.nullable_string(flexible, "SaslAuthenticateResponse.error_message")?,
            auth_bytes: d.bytes(flexible, "SaslAuthenticateResponse.auth_bytes")?,
            ..Self::default()
        };
        if version >= 1 {
            response.session_lifetime_ms = d.i64("SaslAuthenticateResponse.session_lifetime_ms")?;
        }
        if flexible {
            d.skip_tagged_fields("SaslAuthenticateResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn response() -> SaslAuthenticateResponse {
        SaslAuthenticateResponse {
            error_code: 0,
            error_message: None,
            auth_bytes: Bytes::from_static(b"ok"),
            session_lifetime_ms: 3_600_000,
        }
    }

    #[test]
    fn response_v1_classic_golden() {
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00,                                     // error_code
            0xff, 0xff,                                     // error_message: null (int16 -1)
            0x00, 0x00, 0x00, 0x02, b'o', b'k',             // auth_bytes
            0x00, 0x00, 0x00, 0x00, 0x00, 0x36, 0xee, 0x80, // session_lifetime_ms 3600000 (v1+)
        ];
        assert_golden(&response(), 1, &golden);
    }

    #[test]
    fn response_v2_flexible_golden() {
        let value = SaslAuthenticateResponse {
            error_code: 58, // SASL_AUTHENTICATION_FAILED
            error_message: Some("no".into()),
            auth_bytes: Bytes::new(),
            session_lifetime_ms: 0,
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x3a,                     // error_code 58
            0x03, b'n', b'o',               // error_message: compact length 2 + 1
            0x01,                           // auth_bytes: compact length 0 + 1
            0, 0, 0, 0, 0, 0, 0, 0,         // session_lifetime_ms
            0x00,                           // no tagged fields
        ];
        assert_golden(&value, 2, &golden);
    }

    #[test]
    fn response_v0_has_no_session_lifetime() {
        let mut value = response();
        value.session_lifetime_ms = 0;
        assert_golden(&value, 0, &[0, 0, 0xff, 0xff, 0, 0, 0, 2, b'o', b'k']);
    }

    #[test]
    fn decoding_is_robust() {
        assert_robust(&response());
    }
}
