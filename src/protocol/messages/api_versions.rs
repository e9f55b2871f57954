//! ApiVersionsResponse (API key 18): which versions of which APIs a broker speaks, and its
//! features. The request is generated (`super::super::generated`).
//!
//! Schemas `ApiVersionsRequest.json` / `ApiVersionsResponse.json`: versions 0–4, flexible from
//! v3 (KIP-511). The response header is always v0 so that a client can read it before it knows
//! what the broker supports (see [`crate::protocol::header`]).
//!
//! Version history: v1 adds ThrottleTimeMs to the response; v2 is the same as v1; v3 is the
//! first flexible version, adds ClientSoftwareName/Version to the request (KIP-511) and the
//! feature tagged fields to the response (KIP-584); v4 lists supported features whose minimum
//! version is 0 too (KAFKA-17011: in v0–v3 such features are omitted).

use bytes::BufMut;

use super::tagged::TaggedFields;
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// ApiVersions response body.
///
/// **Unsupported request version (KIP-511).** A broker that does not support the version of
/// an ApiVersions request does not answer in that version: it answers a **v0-encoded** body
/// with error 35 (UNSUPPORTED_VERSION) whose `api_keys` holds at least the ApiVersions entry,
/// so the client can retry with the highest version the broker has. Decoding such a body at
/// the version that was sent fails or misreads; [`ApiVersionsResponse::decode_with_v0_fallback`]
/// retries it as v0, as the Java client does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    /// The top-level error code (35 = UNSUPPORTED_VERSION, see the type's docs).
    pub error_code: i16,
    /// The APIs the broker supports.
    pub api_keys: Vec<ApiVersion>,
    /// v1+: how long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// v3+, tag 0: the features the broker supports (KIP-584).
    pub supported_features: Vec<SupportedFeatureKey>,
    /// v3+, tag 1: the epoch of the finalized features; -1 (the default) means unknown, and the
    /// finalized features are only meaningful when it is >= 0 (KIP-584).
    pub finalized_features_epoch: i64,
    /// v3+, tag 2: the cluster-wide finalized feature levels (KIP-584), e.g.
    /// `transaction.version` (KIP-890).
    pub finalized_features: Vec<FinalizedFeatureKey>,
    /// v3+, tag 3: set by a KRaft controller ready for ZooKeeper migration (KIP-866).
    pub zk_migration_ready: bool,
}

impl Default for ApiVersionsResponse {
    fn default() -> Self {
        Self {
            error_code: 0,
            api_keys: Vec::new(),
            throttle_time_ms: 0,
            supported_features: Vec::new(),
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
            zk_migration_ready: false,
        }
    }
}

/// One API the broker supports, with its version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApiVersion {
    /// The API key.
    pub api_key: i16,
    /// The lowest version supported, inclusive.
    pub min_version: i16,
    /// The highest version supported, inclusive.
    pub max_version: i16,
}

/// A feature the broker supports, with its version range (KIP-584).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SupportedFeatureKey {
    /// The feature name, e.g. `transaction.version`.
    pub name: String,
    /// The lowest version supported.
    pub min_version: i16,
    /// The highest version supported.
    pub max_version: i16,
}

/// A feature's cluster-wide finalized level range (KIP-584).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FinalizedFeatureKey {
    /// The feature name, e.g. `transaction.version`.
    pub name: String,
    /// The finalized maximum version level: the level the cluster runs at.
    pub max_version_level: i16,
    /// The finalized minimum version level.
    pub min_version_level: i16,
}

impl ApiVersion {
    fn encode<B: BufMut>(&self, flexible: bool, out: &mut B) {
        out.put_i16(self.api_key);
        out.put_i16(self.min_version);
        out.put_i16(self.max_version);
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, flexible: bool) -> Result<Self, DecodeError> {
        let api = Self {
            api_key: d.i16("ApiVersion.api_key")?,
            min_version: d.i16("ApiVersion.min_version")?,
            max_version: d.i16("ApiVersion.max_version")?,
        };
        if flexible {
            d.skip_tagged_fields("ApiVersion.tagged_fields")?;
        }
        Ok(api)
    }
}

// Both feature entries exist only in the (always flexible) tagged fields of v3+ and are a name
// and two levels, in different orders (min, max vs max, min): these helpers write and read that
// shape with the levels in wire order.
fn encode_feature<B: BufMut>(name: &str, first: i16, second: i16, out: &mut B) {
    out.put_string(true, name);
    out.put_i16(first);
    out.put_i16(second);
    out.put_empty_tagged_fields();
}

fn decode_feature(
    d: &mut Decoder<'_>,
    context: &'static str,
) -> Result<(String, i16, i16), DecodeError> {
    let name = d.string(true, context)?;
    let first = d.i16(context)?;
    let second = d.i16(context)?;
    d.skip_tagged_fields(context)?;
    Ok((name, first, second))
}

impl ApiVersionsResponse {
    /// The error code of the v0 answer to an unsupported ApiVersions version (KIP-511).
    pub const UNSUPPORTED_VERSION: i16 = 35;

    /// Decodes a whole ApiVersions response body (everything after the v0 response header)
    /// answering a request sent at `version`. If it is not a valid body at `version`, it is
    /// decoded as v0: the broker's KIP-511 answer to a version it does not support is a v0
    /// body with error [`Self::UNSUPPORTED_VERSION`]. When both fail, the error is the one at
    /// `version`.
    pub fn decode_with_v0_fallback(body: &[u8], version: i16) -> Result<Self, DecodeError> {
        let decode_whole = |v: i16| {
            let mut d = Decoder::new(body);
            let response = Self::decode(&mut d, v)?;
            d.finish("ApiVersionsResponse")?;
            Ok(response)
        };
        match decode_whole(version) {
            Err(error) if version > 0 => decode_whole(0).map_err(|_| error),
            result => result,
        }
    }

    /// The highest ApiVersions version the broker lists for itself, to retry with after a
    /// KIP-511 UNSUPPORTED_VERSION answer.
    pub fn api_versions_max_version(&self) -> Option<i16> {
        self.api_keys
            .iter()
            .find(|api| api.api_key == ApiKey::ApiVersions as i16)
            .map(|api| api.max_version)
    }
}

impl Message for ApiVersionsResponse {
    const API_KEY: ApiKey = ApiKey::ApiVersions;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FLEXIBLE_FROM: i16 = 3;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        out.put_i16(self.error_code);
        out.put_array(flexible, &self.api_keys, |out, api| {
            api.encode(flexible, out)
        });
        if version >= 1 {
            out.put_i32(self.throttle_time_ms);
        }
        if flexible {
            let mut tagged = TaggedFields::default();
            if !self.supported_features.is_empty() {
                tagged.add(0, |b| {
                    b.put_array(true, &self.supported_features, |b, f| {
                        encode_feature(&f.name, f.min_version, f.max_version, b)
                    })
                });
            }
            if self.finalized_features_epoch != -1 {
                tagged.add(1, |b| b.put_i64(self.finalized_features_epoch));
            }
            if !self.finalized_features.is_empty() {
                tagged.add(2, |b| {
                    b.put_array(true, &self.finalized_features, |b, f| {
                        encode_feature(&f.name, f.max_version_level, f.min_version_level, b)
                    })
                });
            }
            if self.zk_migration_ready {
                tagged.add(3, |b| b.put_bool(true));
            }
            tagged.write(out);
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self {
            error_code: d.i16("ApiVersionsResponse.error_code")?,
            api_keys: d.array_of(flexible, "ApiVersionsResponse.api_keys", |d| {
                ApiVersion::decode(d, flexible)
            })?,
            ..Self::default()
        };
        if version >= 1 {
            response.throttle_time_ms = d.i32("ApiVersionsResponse.throttle_time_ms")?;
        }
        if flexible {
            d.tagged_fields("ApiVersionsResponse.tagged_fields", |tag, f| {
                match tag {
                    0 => {
                        const CONTEXT: &str = "ApiVersionsResponse.supported_features";
                        response.supported_features = f.array_of(true, CONTEXT, |d| {
                            let (name, min_version, max_version) = decode_feature(d, CONTEXT)?;
                            Ok(SupportedFeatureKey {
                                name,
                                min_version,
                                max_version,
                            })
                        })?;
                    }
                    1 => {
                        response.finalized_features_epoch =
                            f.i64("ApiVersionsResponse.finalized_features_epoch")?;
                    }
                    2 => {
                        const CONTEXT: &str = "ApiVersionsResponse.finalized_features";
                        response.finalized_features = f.array_of(true, CONTEXT, |d| {
                            let (name, max_version_level, min_version_level) =
                                decode_feature(d, CONTEXT)?;
                            Ok(FinalizedFeatureKey {
                                name,
                                max_version_level,
                                min_version_level,
                            })
                        })?;
                    }
                    3 => {
                        response.zk_migration_ready =
                            f.bool("ApiVersionsResponse.zk_migration_ready")?;
                    }
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_response() -> ApiVersionsResponse {
        ApiVersionsResponse {
            error_code: 0,
            api_keys: vec![
                ApiVersion {
                    api_key: 0,
                    min_version: 3,
                    max_version: 12,
                },
                ApiVersion {
                    api_key: 18,
                    min_version: 0,
                    max_version: 4,
                },
            ],
            throttle_time_ms: 7,
            supported_features: vec![SupportedFeatureKey {
                name: "transaction.version".into(),
                min_version: 0,
                max_version: 2,
            }],
            finalized_features_epoch: 42,
            finalized_features: vec![FinalizedFeatureKey {
                name: "transaction.version".into(),
                max_version_level: 2,
                min_version_level: 2,
            }],
            zk_migration_ready: true,
        }
    }

    #[test]
    fn golden_response_v1_classic() {
        let response = ApiVersionsResponse {
            error_code: 0,
            api_keys: vec![ApiVersion {
                api_key: 18,
                min_version: 0,
                max_version: 4,
            }],
            throttle_time_ms: 5,
            ..Default::default()
        };
        #[rustfmt::skip]
        let v1 = [
            0x00, 0x00,                   // error_code 0
            0x00, 0x00, 0x00, 0x01,       // api_keys: int32 count 1
            0x00, 0x12,                   //   api_key 18
            0x00, 0x00,                   //   min_version 0
            0x00, 0x04,                   //   max_version 4
            0x00, 0x00, 0x00, 0x05,       // throttle_time_ms 5
        ];
        assert_golden(&response, 1, &v1);
    }

    #[test]
    fn golden_response_v3_flexible_with_every_tagged_field() {
        let response = ApiVersionsResponse {
            error_code: 0,
            api_keys: vec![ApiVersion {
                api_key: 18,
                min_version: 0,
                max_version: 4,
            }],
            throttle_time_ms: 0,
            supported_features: vec![SupportedFeatureKey {
                name: "tv".into(),
                min_version: 0,
                max_version: 2,
            }],
            finalized_features_epoch: 9,
            finalized_features: vec![FinalizedFeatureKey {
                name: "tv".into(),
                max_version_level: 2,
                min_version_level: 1,
            }],
            zk_migration_ready: true,
        };
        #[rustfmt::skip]
        let v3 = [
            0x00, 0x00,                   // error_code 0
            0x02,                         // api_keys: compact count 1+1
            0x00, 0x12, 0x00, 0x00, 0x00, 0x04, // key 18, min 0, max 4
            0x00,                         //   entry tagged fields: none
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x04,                         // tagged fields: 4
            0x00, 0x09,                   // tag 0 (SupportedFeatures), 9 bytes:
            0x02,                         //   compact count 1+1
            0x03, b't', b'v',             //   name "tv"
            0x00, 0x00, 0x00, 0x02,       //   min_version 0, max_version 2
            0x00,                         //   entry tagged fields: none
            0x01, 0x08,                   // tag 1 (FinalizedFeaturesEpoch), 8 bytes:
            0, 0, 0, 0, 0, 0, 0, 0x09,    //   epoch 9
            0x02, 0x09,                   // tag 2 (FinalizedFeatures), 9 bytes:
            0x02,                         //   compact count 1+1
            0x03, b't', b'v',             //   name "tv"
            0x00, 0x02, 0x00, 0x01,       //   max_version_level 2, min_version_level 1
            0x00,                         //   entry tagged fields: none
            0x03, 0x01, 0x01,             // tag 3 (ZkMigrationReady), 1 byte: true
        ];
        assert_golden(&response, 3, &v3);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        #[rustfmt::skip]
        let v3 = [
            0x00, 0x00, 0x01,             // error_code 0, api_keys empty
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x02,                         // tagged fields: 2
            0x63, 0x02, 0xab, 0xcd,       // tag 99, 2 bytes: unknown, skipped
            0x03, 0x01, 0x01,             // tag 3: zk_migration_ready true
        ];
        let response = ApiVersionsResponse::decode(&mut Decoder::new(&v3), 3).unwrap();
        assert!(response.zk_migration_ready);
        assert_eq!(response.finalized_features_epoch, -1);
    }

    #[test]
    fn unsupported_version_answer_decodes_through_the_v0_fallback() {
        #[rustfmt::skip]
        let v0_answer = [
            0x00, 0x23,                   // error_code 35 UNSUPPORTED_VERSION
            0x00, 0x00, 0x00, 0x01,       // api_keys: 1
            0x00, 0x12, 0x00, 0x00, 0x00, 0x02, // ApiVersions 0..=2
        ];
        assert!(ApiVersionsResponse::decode(&mut Decoder::new(&v0_answer), 4).is_err());
        let response = ApiVersionsResponse::decode_with_v0_fallback(&v0_answer, 4).unwrap();
        assert_eq!(
            response.error_code,
            ApiVersionsResponse::UNSUPPORTED_VERSION
        );
        assert_eq!(response.api_versions_max_version(), Some(2));
        // A well-formed answer at the version asked for is taken as it is.
        let mut v3 = Vec::new();
        sample_response().encode(3, &mut v3);
        assert_eq!(
            ApiVersionsResponse::decode_with_v0_fallback(&v3, 3).unwrap(),
            sample_response()
        );
        assert!(ApiVersionsResponse::decode_with_v0_fallback(&[0x00], 3).is_err());
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        assert_robust(&sample_response());
    }
}
