//! The fuzz targets' logic (`fuzz/fuzz_logic/*.rs`) on stable Rust: each runs over a bounded
//! number of random inputs and mutations of valid ones, so `cargo test` checks what
//! `cargo fuzz` checks, in a few seconds. One module and one test per target; a new target
//! (e.g. `decode_response`) includes its logic file the same way and reuses [`Mutator`].

#[path = "../fuzz/fuzz_logic/record_batch.rs"]
mod record_batch;
#[path = "../fuzz/fuzz_logic/response.rs"]
mod response;

use bytes::Bytes;
use exactly::__private::protocol::record_batch::{
    BatchBuilder, Codec, ControlRecord, ControlRecordKind, Header, encode_control_batch,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Inputs per target.
const INPUTS: usize = 20_000;

/// Random inputs and byte-level mutations of valid ones, from a fixed seed so that a failure
/// replays.
struct Mutator {
    rng: SmallRng,
}

impl Mutator {
    fn new(seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = self.rng.random_range(0..=max_len);
        (0..len).map(|_| self.rng.random()).collect()
    }

    /// A byte that tends to hit edges: lengths of 0 and -1, sign bits, varint continuation.
    fn interesting_byte(&mut self) -> u8 {
        const EDGES: [u8; 8] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff, 0x03];
        if self.rng.random_bool(0.5) {
            EDGES[self.rng.random_range(0..EDGES.len())]
        } else {
            self.rng.random()
        }
    }

    /// Applies one to eight random edits to `input`.
    fn mutate(&mut self, input: &mut Vec<u8>) {
        for _ in 0..self.rng.random_range(1..=8) {
            let len = input.len();
            let at = self.rng.random_range(0..=len);
            match self.rng.random_range(0..7) {
                0 if at < len => input[at] ^= 1 << self.rng.random_range(0..8),
                1 if at < len => input[at] = self.interesting_byte(),
                2 => input.truncate(at),
                3 => {
                    let b = self.interesting_byte();
                    input.insert(at, b);
                }
                4 if at < len => {
                    input.remove(at);
                }
                5 if at + 4 <= len => {
                    // A whole big-endian i32 (a length or count field) set to an edge value.
                    let edges = [0, -1, 1, i32::MAX, i32::MIN, 61, 49];
                    let v: i32 = edges[self.rng.random_range(0..edges.len())];
                    input[at..at + 4].copy_from_slice(&v.to_be_bytes());
                }
                6 if at < len => {
                    // Duplicate a chunk (repeated records, repeated batches).
                    let end = self.rng.random_range(at..=len.min(at + 64));
                    let chunk = input[at..end].to_vec();
                    let to = self.rng.random_range(0..=len);
                    input.splice(to..to, chunk);
                }
                _ => {}
            }
        }
    }
}

/// One to three valid batches back to back, with varied records, stamps, codecs and a control
/// batch.
fn valid_record_batches(m: &mut Mutator) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..m.rng.random_range(1..=3) {
        if m.rng.random_bool(0.15) {
            let marker = ControlRecord {
                kind: if m.rng.random() {
                    ControlRecordKind::Commit
                } else {
                    ControlRecordKind::Abort
                },
                coordinator_epoch: m.rng.random_range(0..100),
            };
            out.extend_from_slice(&encode_control_batch(marker, 1_000, 7, 1).to_bytes());
            continue;
        }
        let base_timestamp = m.rng.random_range(0..2_000_000_000_000);
        let mut builder = BatchBuilder::new(base_timestamp, 256);
        // Compressed batches need records that shrink: repetitive values for those.
        let codec = [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ][m.rng.random_range(0..5)];
        for _ in 0..m.rng.random_range(0..6) {
            let timestamp = base_timestamp + m.rng.random_range(-1000..1000);
            let key = m.rng.random_bool(0.7).then(|| m.bytes(12));
            let value = m.rng.random_bool(0.8).then(|| {
                if codec == Codec::None {
                    m.bytes(40)
                } else {
                    b"{\"k\":\"v\",\"n\":1}".repeat(m.rng.random_range(1..6))
                }
            });
            let headers: Vec<Header> = (0..m.rng.random_range(0..3))
                .map(|_| Header {
                    key: ["", "h", "h", "ключ"][m.rng.random_range(0..4)].to_owned(),
                    value: m.rng.random_bool(0.7).then(|| Bytes::from(m.bytes(8))),
                })
                .collect();
            builder.append(timestamp, key.as_deref(), value.as_deref(), &headers);
        }
        let compression = record_batch::default_compression(codec);
        let mut sealed = builder.seal_compressed(m.rng.random(), compression);
        if m.rng.random() {
            sealed.stamp(m.rng.random_range(0..1000), 0, m.rng.random());
        }
        out.extend_from_slice(&sealed.to_bytes());
    }
    out
}

#[test]
fn valid_inputs_include_compressed_batches() {
    let mut m = Mutator::new(0xba7c4);
    let codecs: std::collections::HashSet<u8> = (0..500)
        .flat_map(|_| {
            let input = valid_record_batches(&mut m);
            exactly::__private::protocol::record_batch::decode_batches(&input)
                .expect("valid")
                .into_iter()
                .map(|b| b.codec().id())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(codecs.len(), 5, "every codec appears: {codecs:?}");
}

#[test]
fn decode_record_batch_survives_random_and_mutated_inputs() {
    let mut m = Mutator::new(0xba7c4);
    for _ in 0..INPUTS {
        let input = if m.rng.random_bool(0.2) {
            m.bytes(300)
        } else {
            let mut input = valid_record_batches(&mut m);
            if m.rng.random_bool(0.9) {
                m.mutate(&mut input);
            }
            input
        };
        record_batch::decode_record_batch(&input);
    }
}

#[test]
fn decode_response_survives_random_and_mutated_inputs() {
    let mut m = Mutator::new(0x5e5b0);
    for _ in 0..INPUTS {
        let kind = m.rng.random_range(0..response::RESPONSE_TYPES);
        let version = m.rng.random();
        let input = if m.rng.random_bool(0.2) {
            let mut input = vec![kind, version];
            input.extend(m.bytes(200));
            input
        } else {
            let mut input = response::valid_input(kind, version);
            // Keep the two selector bytes: mutate only the body.
            let mut body = input.split_off(2);
            m.mutate(&mut body);
            input.extend(body);
            input
        };
        response::decode_response(&input);
    }
}
