//! Assertions shared by the message modules' unit tests: golden byte vectors, and decoders'
//! robustness against truncated, random and corrupted input.

use std::fmt::Debug;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use bytes::BytesMut;
use kafka_protocol::protocol::Decodable;

use crate::protocol::{DecodeError, Decoder, Encode, Message};

/// Encodes `value` at `version` into a fresh buffer.
pub(crate) fn encode<M: Message>(value: &M, version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    value.encode(version, &mut out);
    out
}

/// Decodes `bytes` as a whole `M` at `version`; leftover bytes are an error.
pub(crate) fn decode<M: Message>(bytes: &[u8], version: i16) -> Result<M, DecodeError> {
    let mut d = Decoder::new(bytes);
    let value = M::decode(&mut d, version)?;
    d.finish("test message")?;
    Ok(value)
}

/// Encodes a generated `request` at `version` with our encoder and decodes it back with
/// `kafka-protocol`'s: what the broker reads, every byte consumed.
pub(crate) fn through_kafka_protocol<M: Encode + Decodable>(request: &M, version: i16) -> M {
    let mut out = BytesMut::new();
    request.write_body(version, &mut out).expect("encodes");
    let mut body = out.freeze();
    let read = M::decode(&mut body, version).expect("the encoding decodes");
    assert!(
        body.is_empty(),
        "v{version}: {} bytes left over",
        body.len()
    );
    read
}

/// Asserts that `value` encodes at `version` to exactly `golden`, and that `golden` decodes
/// back to `value`, consuming every byte.
pub(crate) fn assert_golden<M: Message + PartialEq + Debug>(
    value: &M,
    version: i16,
    golden: &[u8],
) {
    assert_eq!(
        encode(value, version),
        golden,
        "encoding of {value:?} at v{version}"
    );
    assert_eq!(
        &decode::<M>(golden, version).expect("golden bytes decode"),
        value,
        "decoding at v{version}"
    );
}

/// Asserts, at `version`, that the encoding of `value` decodes (consuming every byte) and
/// re-encodes to the same bytes, that every strict prefix of it is an error (not a panic, not
/// a short read), and that random bytes and randomly corrupted encodings never panic.
pub(crate) fn assert_robust_at<M: Message>(value: &M, version: i16) {
    let valid = encode(value, version);
    let round_trip = decode::<M>(&valid, version)
        .unwrap_or_else(|e| panic!("the v{version} encoding does not decode: {e}"));
    assert_eq!(
        encode(&round_trip, version),
        valid,
        "re-encoding at v{version}"
    );
    for len in 0..valid.len() {
        assert!(
            M::decode(&mut Decoder::new(&valid[..len]), version).is_err(),
            "a {len}-byte prefix of a {}-byte v{version} encoding decoded",
            valid.len()
        );
    }
    let seed = ((M::API_KEY as i16 as u64) << 16) ^ version as u64;
    let mut rng = SmallRng::seed_from_u64(0x5eed ^ seed);
    for _ in 0..300 {
        let len = rng.random_range(0..96);
        let noise: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let _ = decode::<M>(&noise, version);
        if !valid.is_empty() {
            let mut corrupted = valid.clone();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..corrupted.len());
                corrupted[at] = rng.random();
            }
            let _ = decode::<M>(&corrupted, version);
        }
    }
}

/// [`assert_robust_at`] for `sample` at every version of `M`; also checks that a version `M`
/// does not implement is refused.
pub(crate) fn assert_robust<M: Message>(sample: &M) {
    for version in M::MIN_VERSION..=M::MAX_VERSION {
        assert_robust_at(sample, version);
    }
    let valid = encode(sample, M::MAX_VERSION);
    assert!(decode::<M>(&valid, M::MAX_VERSION + 1).is_err());
    assert!(decode::<M>(&valid, M::MIN_VERSION - 1).is_err());
}
