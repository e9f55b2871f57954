//! Request and response headers, and framing a whole request.
//!
//! Flexible requests use request header v2 (v1 plus tagged fields), others v1; `client_id`
//! keeps the classic int16-length string even in v2. Flexible responses use response header
//! v1 (correlation id plus tagged fields) except ApiVersions, whose response header is always
//! v0 so that a client can read it before it knows what the broker supports (KIP-511).

use bytes::{BufMut, BytesMut};

use super::decoder::Decoder;
use super::encoder::WireWrite;
use super::error::{DecodeError, DecodeErrorKind};
use super::{ApiKey, EncodeError, Request, Versioned};

/// The header every request starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// Which API.
    pub api_key: i16,
    /// Which version of it.
    pub api_version: i16,
    /// Echoed by the broker in the response header.
    pub correlation_id: i32,
    /// The client id (classic nullable string in every header version).
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Writes the header; `flexible` selects v2 (with an empty tagged-field section).
    pub fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_i16(self.api_key);
        out.put_i16(self.api_version);
        out.put_i32(self.correlation_id);
        out.put_nullable_string(false, self.client_id.as_deref());
        if flexible {
            out.put_empty_tagged_fields();
        }
    }
}

/// The header every response starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The correlation id of the request this answers.
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// Whether the response to `api_key` at `version` uses header v1 (with tagged fields).
    pub fn is_v1(api_key: i16, flexible: bool) -> bool {
        flexible && api_key != ApiKey::ApiVersions as i16
    }

    /// Writes the header (v1 when `v1`).
    #[cfg(feature = "internals")]
    pub fn encode<B: BufMut>(&self, v1: bool, out: &mut B) {
        out.put_i32(self.correlation_id);
        if v1 {
            out.put_empty_tagged_fields();
        }
    }

    /// Reads the header (v1 when `v1`).
    pub fn decode(d: &mut Decoder<'_>, v1: bool) -> Result<Self, DecodeError> {
        let correlation_id = d.i32("ResponseHeader.correlation_id")?;
        if v1 {
            d.skip_tagged_fields("ResponseHeader.tagged_fields")?;
        }
        Ok(Self { correlation_id })
    }
}

/// Encodes `request` at `version` as one size-prefixed frame ready for the socket.
pub fn encode_request_frame<R: Request>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<BytesMut, EncodeError> {
    let mut out = BytesMut::with_capacity(64);
    out.put_i32(0); // size, patched below
    let header = RequestHeader {
        api_key: R::API_KEY as i16,
        api_version: version,
        correlation_id,
        client_id: client_id.map(str::to_owned),
    };
    header.encode(R::is_flexible(version), &mut out);
    request.write_body(version, &mut out)?;
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}

/// Fails with [`DecodeErrorKind::UnsupportedVersion`] unless `M` implements `version`.
pub fn check_version<M: Versioned>(d: &Decoder<'_>, version: i16) -> Result<(), DecodeError> {
    if (M::MIN_VERSION..=M::MAX_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(d.error(
            "message version",
            DecodeErrorKind::UnsupportedVersion {
                api_key: M::API_KEY as i16,
                version,
            },
        ))
    }
}
