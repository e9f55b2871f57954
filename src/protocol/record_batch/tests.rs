//! Unit tests of the RecordBatch v2 encoder and decoder.

use bytes::Bytes;
use crc32c::crc32c;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::protocol::error::DecodeErrorKind;

/// A record as the tests generate it.
#[derive(Debug, Clone)]
struct TestRecord {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
}

fn header(key: &str, value: Option<&[u8]>) -> Header {
    Header {
        key: key.to_owned(),
        value: value.map(Bytes::copy_from_slice),
    }
}

fn build(base_timestamp: i64, records: &[TestRecord]) -> BatchBuilder {
    let mut builder = BatchBuilder::new(base_timestamp, 0);
    for r in records {
        builder.append(
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
            &r.headers,
        );
    }
    builder
}

/// Rewrites the CRC of the batch at the start of `bytes` after a test edited it.
fn fix_crc(bytes: &mut [u8]) {
    let crc = crc32c(&bytes[CRC_FROM..]);
    bytes[CRC_AT..CRC_FROM].copy_from_slice(&crc.to_be_bytes());
}

fn decode_one(bytes: &[u8]) -> DecodedBatch {
    let mut batches = decode_batches(bytes).expect("decodes");
    assert_eq!(batches.len(), 1);
    batches.remove(0)
}

fn error_kind(bytes: &[u8]) -> DecodeErrorKind {
    decode_batches(bytes).expect_err("must not decode").kind
}

fn random_bytes(rng: &mut SmallRng, max_len: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max_len);
    (0..len).map(|_| rng.random()).collect()
}

fn random_record(rng: &mut SmallRng, base_timestamp: i64) -> TestRecord {
    let timestamp = match rng.random_range(0..4) {
        0 => base_timestamp,
        1 => base_timestamp - rng.random_range(0..100_000), // older than the base
        2 => base_timestamp + rng.random_range(0..100_000),
        _ => rng.random(), // anything, deltas wrap
    };
    let key = rng.random_bool(0.8).then(|| random_bytes(rng, 40));
    let value = rng.random_bool(0.9).then(|| random_bytes(rng, 300));
    let keys = ["", "a", "trace-id", "a"]; // empty and duplicate keys
    let headers = (0..rng.random_range(0..4))
        .map(|_| Header {
            key: keys[rng.random_range(0..keys.len())].to_owned(),
            value: rng
                .random_bool(0.7)
                .then(|| Bytes::from(random_bytes(rng, 20))),
        })
        .collect();
    TestRecord {
        timestamp,
        key,
        value,
        headers,
    }
}

fn assert_records_match(batch: &DecodedBatch, records: &[TestRecord]) {
    assert_eq!(batch.records.len(), records.len());
    for (i, (got, want)) in batch.records.iter().zip(records).enumerate() {
        assert_eq!(got.offset_delta, i as i32);
        assert_eq!(batch.record_timestamp(got), want.timestamp);
        assert_eq!(got.key.as_deref(), want.key.as_deref());
        assert_eq!(got.value.as_deref(), want.value.as_deref());
        assert_eq!(got.headers, want.headers);
    }
}

/// A batch written out field by field from the RecordBatch v2 layout (Kafka's
/// "Message format" documentation). The CRC was computed with an independent bitwise CRC-32C
/// (polynomial 0x82F63B78) over bytes 21.. of this vector.
const BASE_TIMESTAMP: i64 = 1_700_000_000_000; // 0x0000018BCFE56800
#[rustfmt::skip]
const GOLDEN: [u8; 105] = [
    0, 0, 0, 0, 0, 0, 0, 0,             // BaseOffset 0
    0, 0, 0, 93,                        // Length: 49 + 44 bytes of records
    0xff, 0xff, 0xff, 0xff,             // PartitionLeaderEpoch -1
    2,                                  // Magic
    0x24, 0x77, 0x69, 0x88,             // CRC-32C
    0, 0,                               // Attributes: no compression, CreateTime, not transactional
    0, 0, 0, 2,                         // LastOffsetDelta
    0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // BaseTimestamp
    0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x05, // MaxTimestamp = base + 5
    0, 0, 0, 0, 0, 0, 0x10, 0x92,       // ProducerId 4242
    0, 7,                               // ProducerEpoch 7
    0, 0, 0, 100,                       // BaseSequence 100
    0, 0, 0, 3,                         // RecordsCount
    // Record 0: 22 bytes after its length
    0x2c,                               // Length 22 (zig-zag 44)
    0,                                  // Attributes
    0x0a,                               // TimestampDelta +5
    0x00,                               // OffsetDelta 0
    0x04, b'k', b'1',                   // Key "k1"
    0x0a, b'h', b'e', b'l', b'l', b'o', // Value "hello"
    0x02,                               // 1 header
    0x0a, b't', b'r', b'a', b'c', b'e', // header key "trace"
    0x04, b'a', b'b',                   // header value "ab"
    // Record 1: 12 bytes
    0x18,                               // Length 12
    0,                                  // Attributes
    0x03,                               // TimestampDelta -2
    0x02,                               // OffsetDelta 1
    0x01,                               // Key null (-1)
    0x01,                               // Value null (-1)
    0x04,                               // 2 headers, same key
    0x02, b'h', 0x01,                   // "h" = null
    0x02, b'h', 0x00,                   // "h" = empty
    // Record 2: 7 bytes
    0x0e,                               // Length 7
    0,                                  // Attributes
    0x00,                               // TimestampDelta 0
    0x04,                               // OffsetDelta 2
    0x00,                               // Key empty
    0x02, b'v',                         // Value "v"
    0x00,                               // no headers
];

fn golden_records() -> Vec<TestRecord> {
    vec![
        TestRecord {
            timestamp: BASE_TIMESTAMP + 5,
            key: Some(b"k1".to_vec()),
            value: Some(b"hello".to_vec()),
            headers: vec![header("trace", Some(b"ab"))],
        },
        TestRecord {
            timestamp: BASE_TIMESTAMP - 2,
            key: None,
            value: None,
            headers: vec![header("h", None), header("h", Some(b""))],
        },
        TestRecord {
            timestamp: BASE_TIMESTAMP,
            key: Some(Vec::new()),
            value: Some(b"v".to_vec()),
            headers: Vec::new(),
        },
    ]
}

#[test]
fn encoder_writes_the_golden_bytes() {
    let mut sealed = build(BASE_TIMESTAMP, &golden_records()).seal(false);
    sealed.stamp(4242, 7, 100);
    assert_eq!(&sealed.to_bytes()[..], &GOLDEN[..]);
    assert_eq!(sealed.size_in_bytes(), GOLDEN.len());
    assert_eq!(sealed.header()[..], GOLDEN[..RECORD_BATCH_HEADER_LEN]);
    assert_eq!(sealed.body()[..], GOLDEN[RECORD_BATCH_HEADER_LEN..]);
    let debug = format!("{sealed:?}");
    assert!(
        debug.contains("record_count: 3") && debug.contains("producer_id: 4242"),
        "{debug}"
    );
}

#[test]
fn decoder_reads_the_golden_bytes() {
    let batch = decode_one(&GOLDEN);
    assert_eq!(batch.base_offset, 0);
    assert_eq!(batch.batch_length, 93);
    assert_eq!(batch.partition_leader_epoch, -1);
    assert_eq!(batch.magic, 2);
    assert_eq!(batch.crc, 0x2477_6988);
    assert_eq!(batch.attributes, 0);
    assert_eq!(batch.last_offset_delta, 2);
    assert_eq!(batch.last_offset(), 2);
    assert_eq!(batch.base_timestamp, BASE_TIMESTAMP);
    assert_eq!(batch.max_timestamp, BASE_TIMESTAMP + 5);
    assert_eq!(batch.producer_id, 4242);
    assert_eq!(batch.producer_epoch, 7);
    assert_eq!(batch.base_sequence, 100);
    assert_eq!(batch.last_sequence(), 102);
    assert_eq!(batch.record_sequence(&batch.records[1]), 101);
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
    assert!(!batch.is_transactional() && !batch.is_control());
    assert_eq!(batch.control(), None);
    assert_records_match(&batch, &golden_records());
    assert_eq!(batch.records[1].timestamp_delta, -2);
}

/// The "uncompressed record" vector of IBM/sarama's `record_test.go` (`recordBatchTestCases`),
/// a batch as the sarama Go client encodes it: producer id/epoch/sequence 0, leader epoch 0,
/// MaxTimestamp 0 (below the base timestamp), one record with a 5 ms timestamp delta, key
/// 01 02 03 04, value 05 06 07 and one header 08 09 0a = 0b 0c.
#[rustfmt::skip]
const SARAMA_UNCOMPRESSED: [u8; 82] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 70, 0, 0, 0, 0, 2, 84, 121, 97, 253, 0, 0, 0, 0, 0, 0,
    0, 0, 1, 88, 141, 205, 89, 56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 1,
    40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12,
];

/// The "empty record" vector of the same sarama test: a batch with no records.
#[rustfmt::skip]
const SARAMA_EMPTY: [u8; 61] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 2, 89, 95, 183, 221, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0,
];

#[test]
fn decoder_reads_batches_another_client_wrote() {
    let batch = decode_one(&SARAMA_UNCOMPRESSED);
    assert_eq!(batch.base_timestamp, 1_479_847_795_000);
    assert_eq!(batch.max_timestamp, 0);
    assert_eq!(
        (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        (0, 0, 0)
    );
    assert_eq!(batch.records.len(), 1);
    let record = &batch.records[0];
    assert_eq!(batch.record_timestamp(record), 1_479_847_795_005);
    assert_eq!(record.key.as_deref(), Some(&[1u8, 2, 3, 4][..]));
    assert_eq!(record.value.as_deref(), Some(&[5u8, 6, 7][..]));
    assert_eq!(
        record.headers,
        vec![header("\u{8}\u{9}\u{a}", Some(&[11, 12]))]
    );

    let empty = decode_one(&SARAMA_EMPTY);
    assert!(empty.records.is_empty());
    assert_eq!(empty.crc, 0x595f_b7dd);

    // Our encoder gives the same bytes for the same fields, except those sarama sets
    // differently (leader epoch 0 instead of -1, MaxTimestamp 0 instead of the largest
    // record timestamp), which the CRC then covers.
    let mut builder = BatchBuilder::new(1_479_847_795_000, 0);
    builder.append(
        1_479_847_795_005,
        Some(&[1, 2, 3, 4]),
        Some(&[5, 6, 7]),
        &[header("\u{8}\u{9}\u{a}", Some(&[11, 12]))],
    );
    let mut sealed = builder.seal(false);
    sealed.stamp(0, 0, 0);
    assert_eq!(
        sealed.body()[..],
        SARAMA_UNCOMPRESSED[RECORD_BATCH_HEADER_LEN..]
    );
}

#[test]
fn random_batches_round_trip() {
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    for _ in 0..300 {
        let base_timestamp = rng.random_range(-1_000..2_000_000_000_000);
        let records: Vec<TestRecord> = (0..rng.random_range(0..40))
            .map(|_| random_record(&mut rng, base_timestamp))
            .collect();
        let mut builder = BatchBuilder::new(base_timestamp, rng.random_range(0..4096));
        for (i, r) in records.iter().enumerate() {
            let (key, value) = (r.key.as_deref(), r.value.as_deref());
            let size = builder.record_size(r.timestamp, key, value, &r.headers);
            let before = builder.size_in_bytes();
            assert_eq!(
                builder.append(r.timestamp, key, value, &r.headers),
                i as i32
            );
            assert_eq!(builder.size_in_bytes() - before, size);
        }
        assert_eq!(builder.record_count(), records.len() as i32);
        assert_eq!(builder.is_empty(), records.is_empty());
        let transactional = rng.random();
        let mut sealed = builder.seal(transactional);
        let (pid, epoch, seq) = (rng.random(), rng.random(), rng.random_range(0..i32::MAX));
        sealed.stamp(pid, epoch, seq);

        let batch = decode_one(&sealed.to_bytes());
        assert_records_match(&batch, &records);
        assert_eq!(batch.base_timestamp, base_timestamp);
        let max = records.iter().map(|r| r.timestamp).max();
        assert_eq!(batch.max_timestamp, max.unwrap_or(NO_TIMESTAMP));
        assert_eq!(sealed.max_timestamp(), batch.max_timestamp);
        assert_eq!((batch.producer_id, batch.producer_epoch), (pid, epoch));
        assert_eq!(batch.base_sequence, seq);
        assert_eq!(batch.last_offset_delta, records.len() as i32 - 1);
        assert_eq!(batch.is_transactional(), transactional);
        assert_eq!(sealed.is_transactional(), transactional);
        assert_eq!(batch.last_sequence(), sealed.last_sequence());
        assert_eq!(batch.batch_length as usize + 12, sealed.size_in_bytes());
    }
}

#[test]
fn record_size_is_exact_across_varint_boundaries() {
    // Offset deltas cross 1→2 bytes at 64 and 2→3 at 8192; lengths cross at 64 and 8192 too.
    let mut builder = BatchBuilder::new(0, 0);
    let lens = [0usize, 1, 63, 64, 65, 8191, 8192, 8193];
    let deltas = [0i64, 63, 64, -64, -65, i64::MAX, i64::MIN, 1 << 35];
    for i in 0..9000 {
        let key = vec![b'k'; lens[i % lens.len()]];
        let value = vec![b'v'; lens[(i / 8) % lens.len()]];
        let ts = deltas[i % deltas.len()];
        let headers = [header(&"h".repeat(i % 70), None)];
        let size = builder.record_size(ts, Some(&key), Some(&value), &headers);
        let before = builder.size_in_bytes();
        builder.append(ts, Some(&key), Some(&value), &headers);
        assert_eq!(builder.size_in_bytes() - before, size, "record {i}");
    }
    let batch = decode_one(&builder.seal(false).to_bytes());
    assert_eq!(batch.records.len(), 9000);
    assert_eq!(batch.records[8999].offset_delta, 8999);
}

#[test]
fn unstamped_batches_are_non_idempotent() {
    let sealed = build(5, &golden_records()[..1]).seal(false);
    assert_eq!(sealed.producer_id(), NO_PRODUCER_ID);
    assert_eq!(sealed.producer_epoch(), NO_PRODUCER_EPOCH);
    assert_eq!(sealed.base_sequence(), NO_SEQUENCE);
    assert_eq!(sealed.last_sequence(), NO_SEQUENCE);
    let batch = decode_one(&sealed.to_bytes());
    assert_eq!(batch.base_offset, 0);
    assert_eq!(batch.partition_leader_epoch, NO_PARTITION_LEADER_EPOCH);
    assert_eq!(
        (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        (-1, -1, -1)
    );
    assert_eq!(batch.last_sequence(), NO_SEQUENCE);
}

#[test]
fn restamping_gives_the_crc_of_a_full_recompute() {
    let mut sealed = build(BASE_TIMESTAMP, &golden_records()).seal(true);
    for (pid, epoch, seq) in [
        (1, 0, 0),
        (1, 1, 0),
        (77, i16::MAX, i32::MAX - 1),
        (-1, -1, -1),
    ] {
        sealed.stamp(pid, epoch, seq);
        let bytes = sealed.to_bytes();
        let stored = u32::from_be_bytes(bytes[CRC_AT..CRC_FROM].try_into().unwrap());
        assert_eq!(stored, crc32c(&bytes[CRC_FROM..]));
        let batch = decode_one(&bytes);
        assert_eq!(
            (batch.producer_id, batch.producer_epoch, batch.base_sequence),
            (pid, epoch, seq)
        );
        assert_eq!(sealed.producer_id(), pid);
        assert_eq!(sealed.producer_epoch(), epoch);
        assert_eq!(sealed.base_sequence(), seq);
        assert!(batch.is_transactional());
    }
    // An empty body combines too.
    let mut empty = BatchBuilder::new(0, 0).seal(false);
    empty.stamp(3, 4, 5);
    let bytes = empty.to_bytes();
    assert_eq!(
        u32::from_be_bytes(bytes[CRC_AT..CRC_FROM].try_into().unwrap()),
        crc32c(&bytes[CRC_FROM..])
    );
    let batch = decode_one(&bytes);
    assert!(batch.records.is_empty());
    assert_eq!(batch.max_timestamp, NO_TIMESTAMP);
    assert_eq!(batch.last_offset_delta, -1);
}

#[test]
fn sequences_wrap_from_i32_max_to_zero() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 2, 5), 2);
    assert_eq!(increment_sequence(0, -1), i32::MAX);
    assert_eq!(increment_sequence(10, 5), 15);

    let records: Vec<TestRecord> = (0..5).map(|_| golden_records()[2].clone()).collect();
    let mut sealed = build(0, &records).seal(false);
    sealed.stamp(9, 0, i32::MAX - 2);
    assert_eq!(sealed.last_sequence(), 1); // MAX-2, MAX-1, MAX, 0, 1
    let batch = decode_one(&sealed.to_bytes());
    assert_eq!(batch.last_sequence(), 1);
    let sequences: Vec<i32> = batch
        .records
        .iter()
        .map(|r| batch.record_sequence(r))
        .collect();
    assert_eq!(sequences, [i32::MAX - 2, i32::MAX - 1, i32::MAX, 0, 1]);

    sealed.stamp(9, 0, i32::MAX);
    assert_eq!(sealed.last_sequence(), 3);
    sealed.stamp(9, 0, i32::MAX - 4);
    assert_eq!(sealed.last_sequence(), i32::MAX);
}

#[test]
fn control_batches_decode_to_their_marker() {
    for (kind, coordinator_epoch) in [
        (ControlRecordKind::Commit, 7),
        (ControlRecordKind::Abort, 0),
    ] {
        let marker = ControlRecord {
            kind,
            coordinator_epoch,
        };
        let sealed = encode_control_batch(marker, 1_000, 55, 3);
        let batch = decode_one(&sealed.to_bytes());
        assert!(batch.is_control() && batch.is_transactional());
        assert_eq!(batch.base_sequence, NO_SEQUENCE);
        assert_eq!((batch.producer_id, batch.producer_epoch), (55, 3));
        assert_eq!(batch.control(), Some(marker));
        // Key: version 0, type; value: version 0, coordinator epoch.
        let type_id = if kind == ControlRecordKind::Commit {
            1
        } else {
            0
        };
        assert_eq!(
            batch.records[0].key.as_deref(),
            Some(&[0, 0, 0, type_id][..])
        );
        let mut value = vec![0, 0];
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        assert_eq!(batch.records[0].value.as_deref(), Some(&value[..]));
    }
}

#[test]
fn control_records_that_are_not_markers_read_as_none() {
    let with_key = |key: &[u8], value: &[u8]| {
        let mut builder = BatchBuilder::new(0, 0);
        builder.append(0, Some(key), Some(value), &[]);
        let sealed = builder.seal_with_attributes(TRANSACTIONAL | CONTROL, Compression::None);
        decode_one(&sealed.to_bytes())
    };
    let value = [0, 0, 0, 0, 0, 9];
    assert_eq!(
        with_key(&[0, 0, 0, 1], &value)
            .control()
            .map(|c| c.coordinator_epoch),
        Some(9)
    );
    assert_eq!(with_key(&[0, 0, 0, 2], &value).control(), None); // KRaft LEADER_CHANGE
    assert_eq!(with_key(&[0xff, 0xff, 0, 1], &value).control(), None); // negative version
    assert_eq!(with_key(&[0, 0, 0], &value).control(), None); // short key
    assert_eq!(with_key(&[0, 0, 0, 1], &[0, 0, 1]).control(), None); // short value
    let empty =
        BatchBuilder::new(0, 0).seal_with_attributes(TRANSACTIONAL | CONTROL, Compression::None);
    assert_eq!(decode_one(&empty.to_bytes()).control(), None);
}

#[test]
fn log_append_time_batches_give_the_broker_timestamp() {
    let mut bytes = build(100, &golden_records())
        .seal(false)
        .to_bytes()
        .to_vec();
    bytes[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&5_000i64.to_be_bytes());
    bytes[CRC_FROM + 1] |= TIMESTAMP_TYPE_LOG_APPEND as u8;
    fix_crc(&mut bytes);
    let batch = decode_one(&bytes);
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert!(
        batch
            .records
            .iter()
            .all(|r| batch.record_timestamp(r) == 5_000)
    );
}

fn two_batches() -> (Vec<u8>, usize) {
    let first = build(1, &golden_records()).seal(false).to_bytes();
    let second = build(2, &golden_records()[..2]).seal(true).to_bytes();
    let mut bytes = first.to_vec();
    bytes.extend_from_slice(&second);
    (bytes, first.len())
}

#[test]
fn a_truncated_last_batch_is_left_out_without_error() {
    let (bytes, first_len) = two_batches();
    assert_eq!(decode_batches(&bytes).unwrap().len(), 2);
    for cut in 0..bytes.len() {
        let batches = decode_batches(&bytes[..cut]).expect("a prefix is never an error");
        let expected = if cut >= first_len { 1 } else { 0 };
        assert_eq!(batches.len(), expected, "cut at {cut}");
    }
    assert_eq!(
        decode_batch(&bytes[..first_len + 20]).unwrap().unwrap().1,
        first_len
    );
    assert!(
        decode_batch(&bytes[first_len..first_len + 20])
            .unwrap()
            .is_none()
    );
}

#[test]
fn single_bit_flips_are_caught_or_harmless() {
    let (bytes, first_len) = two_batches();
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = decode_batches(&flipped);
        // BaseOffset and PartitionLeaderEpoch are outside the CRC (the broker rewrites them);
        // a flipped Length reads as a truncated tail or a bad frame; anything the CRC covers
        // is caught by it.
        let at = if bit / 8 < first_len {
            bit / 8
        } else {
            bit / 8 - first_len
        };
        let in_crc_region = !(0..CRC_FROM).contains(&at) || (MAGIC_AT..CRC_FROM).contains(&at);
        if in_crc_region {
            assert!(result.is_err(), "flip of bit {bit} went unnoticed");
        }
    }
}

#[test]
fn corrupt_record_fields_are_errors_not_panics() {
    // Every value of every byte of the golden batch, with the CRC fixed up so the record
    // parser sees it.
    for at in RECORD_BATCH_HEADER_LEN - 4..GOLDEN.len() {
        for v in 0..=255u8 {
            let mut bytes = GOLDEN.to_vec();
            bytes[at] = v;
            fix_crc(&mut bytes);
            if let Ok(batches) = decode_batches(&bytes) {
                for batch in batches {
                    assert_eq!(batch.records.len(), 3);
                }
            }
        }
    }
}

#[test]
fn record_length_must_match_the_bytes_the_record_took() {
    // Record 2 claims 8 bytes but takes 7: the extra byte is read as part of it.
    let mut longer = GOLDEN.to_vec();
    let record2 = GOLDEN.len() - 8;
    longer[record2] = 0x10;
    longer.push(0);
    longer[11] += 1; // batch Length
    fix_crc(&mut longer);
    assert_eq!(error_kind(&longer), DecodeErrorKind::TrailingBytes(1));

    // Record 2 claims 6 bytes but needs 7.
    let mut shorter = GOLDEN.to_vec();
    shorter[record2] = 0x0c;
    fix_crc(&mut shorter);
    assert!(matches!(
        error_kind(&shorter),
        DecodeErrorKind::UnexpectedEof { .. }
    ));

    // A record length past the end of the batch, and a negative one.
    for length in [0x7e, 0x03] {
        let mut bad = GOLDEN.to_vec();
        bad[record2] = length;
        fix_crc(&mut bad);
        assert!(matches!(
            error_kind(&bad),
            DecodeErrorKind::InvalidLength(_)
        ));
    }
}

#[test]
fn hostile_counts_are_rejected_before_allocating() {
    for count in [i32::MAX, 4, -1, i32::MIN] {
        let mut bytes = GOLDEN.to_vec();
        bytes[RECORDS_COUNT_AT..RECORD_BATCH_HEADER_LEN].copy_from_slice(&count.to_be_bytes());
        fix_crc(&mut bytes);
        assert!(decode_batches(&bytes).is_err(), "count {count}");
    }
    // Fewer records than the bytes hold: trailing bytes.
    let mut bytes = GOLDEN.to_vec();
    bytes[RECORDS_COUNT_AT..RECORD_BATCH_HEADER_LEN].copy_from_slice(&2i32.to_be_bytes());
    fix_crc(&mut bytes);
    assert!(matches!(
        error_kind(&bytes),
        DecodeErrorKind::TrailingBytes(8)
    ));

    // A header count of a billion in a 12-byte record.
    let mut builder = BatchBuilder::new(0, 0);
    builder.append(0, None, None, &[header("h", None)]);
    let mut bytes = builder.seal(false).to_bytes().to_vec();
    let count_at = bytes.len() - 4;
    bytes.truncate(count_at);
    bytes.extend_from_slice(&[0x80, 0xa8, 0xd6, 0xb9, 0x07]); // zig-zag 1e9
    let len = bytes.len() as i32 - 12;
    bytes[8..12].copy_from_slice(&len.to_be_bytes());
    bytes[RECORD_BATCH_HEADER_LEN] = 2 * (bytes.len() - RECORD_BATCH_HEADER_LEN - 1) as u8;
    fix_crc(&mut bytes);
    assert_eq!(
        error_kind(&bytes),
        DecodeErrorKind::InvalidLength(1_000_000_000)
    );
}

#[test]
fn bad_frames_are_typed_errors() {
    let mut crc = GOLDEN.to_vec();
    crc[CRC_AT] ^= 1;
    assert!(matches!(
        error_kind(&crc),
        DecodeErrorKind::CrcMismatch { .. }
    ));

    for codec in [5u8, 6, 7] {
        let mut compressed = GOLDEN.to_vec();
        compressed[CRC_FROM + 1] |= codec;
        fix_crc(&mut compressed);
        assert_eq!(
            error_kind(&compressed),
            DecodeErrorKind::UnsupportedCompression(codec),
        );
    }
    // Uncompressed records under a codec's bit are corrupt data of that codec (or a codec
    // this build does not have).
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let mut compressed = GOLDEN.to_vec();
        compressed[CRC_FROM + 1] |= codec.id();
        fix_crc(&mut compressed);
        let kind = error_kind(&compressed);
        if codec.is_available() {
            assert!(
                matches!(kind, DecodeErrorKind::CorruptCompressed { codec: c, .. } if c == codec),
                "{codec}"
            );
        } else {
            assert_eq!(kind, DecodeErrorKind::UnsupportedCompression(codec.id()));
        }
    }

    for magic in [0i8, 1, 3, -1] {
        let mut old = GOLDEN.to_vec();
        old[MAGIC_AT] = magic as u8;
        assert_eq!(error_kind(&old), DecodeErrorKind::UnsupportedMagic(magic));
    }

    // Negative Length, and one too short for the v2 header.
    let mut negative = GOLDEN.to_vec();
    negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(error_kind(&negative), DecodeErrorKind::InvalidLength(-5));
    let mut short = GOLDEN.to_vec();
    short[8..12].copy_from_slice(&20i32.to_be_bytes());
    assert_eq!(error_kind(&short), DecodeErrorKind::InvalidLength(20));
    let mut tiny = GOLDEN.to_vec();
    tiny[8..12].copy_from_slice(&2i32.to_be_bytes());
    assert!(decode_batches(&tiny).is_err());

    // A header key that is not UTF-8.
    let mut utf8 = GOLDEN.to_vec();
    let trace = GOLDEN.iter().position(|&b| b == b't').unwrap();
    utf8[trace] = 0xff;
    fix_crc(&mut utf8);
    assert_eq!(error_kind(&utf8), DecodeErrorKind::InvalidUtf8);

    // Errors in a later batch point into that batch.
    let (mut bytes, first_len) = two_batches();
    bytes[first_len + CRC_AT] ^= 1;
    let err = decode_batches(&bytes).unwrap_err();
    assert_eq!(err.offset, first_len + CRC_FROM);
}

/// Records with JSON-like values: compressible as real payloads are.
fn compressible_records(rng: &mut SmallRng, base_timestamp: i64, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            let mut r = random_record(rng, base_timestamp);
            r.key = Some(format!("key-{}", i % 13).into_bytes());
            r.value =
                Some(format!(r#"{{"id":{i},"user":"user-{}","ok":true}}"#, i % 7).into_bytes());
            r
        })
        .collect()
}

#[test]
fn compressed_batches_round_trip_and_restamp() {
    let mut rng = SmallRng::seed_from_u64(0xc0de);
    for compression in Compression::every_available() {
        for n in [1usize, 2, 50, 700] {
            let base_timestamp = rng.random_range(0..2_000_000_000_000);
            let records = compressible_records(&mut rng, base_timestamp, n);
            let builder = build(base_timestamp, &records);
            let uncompressed = builder.size_in_bytes();
            let transactional = rng.random();
            let mut sealed = builder.seal_compressed(transactional, compression);
            assert_eq!(sealed.uncompressed_size_in_bytes(), uncompressed);
            assert!(sealed.size_in_bytes() <= uncompressed);
            if n >= 50 {
                assert_eq!(sealed.codec(), compression.codec(), "{compression:?} n {n}");
                assert!(
                    sealed.size_in_bytes() < uncompressed * 3 / 4,
                    "{compression:?} n {n}"
                );
            }
            // Stamped twice (an epoch bump): the CRC combine covers the compressed body.
            for (pid, epoch, seq) in [(7, 0, 0), (7, 1, 41)] {
                sealed.stamp(pid, epoch, seq);
                let batch = decode_one(&sealed.to_bytes());
                assert_records_match(&batch, &records);
                assert_eq!(batch.codec(), sealed.codec());
                assert_eq!((batch.producer_id, batch.producer_epoch), (pid, epoch));
                assert_eq!(batch.base_sequence, seq);
                assert_eq!(batch.is_transactional(), transactional);
            }
        }
    }
}

#[test]
fn records_that_do_not_shrink_are_stored_uncompressed() {
    let mut rng = SmallRng::seed_from_u64(5);
    let noise: Vec<u8> = (0..2000).map(|_| rng.random()).collect();
    for compression in Compression::every_available() {
        let mut builder = BatchBuilder::new(0, 0);
        builder.append(0, None, Some(&noise), &[]);
        let sealed = builder.seal_compressed(false, compression);
        assert_eq!(sealed.codec(), Codec::None, "{compression:?}");
        assert_eq!(sealed.size_in_bytes(), sealed.uncompressed_size_in_bytes());
        assert_eq!(
            decode_one(&sealed.to_bytes()).records[0].value.as_deref(),
            Some(&noise[..])
        );
    }
}

#[test]
fn a_split_batch_keeps_every_record_in_order() {
    let mut rng = SmallRng::seed_from_u64(6);
    for compression in [Compression::None]
        .into_iter()
        .chain(Compression::every_available())
    {
        let records = compressible_records(&mut rng, 1_000, 101);
        let mut sealed = build(1_000, &records).seal_compressed(true, compression);
        sealed.stamp(3, 4, 500);
        let (first, second) = sealed.split_in_two().expect("two records or more");
        assert_eq!((first.record_count(), second.record_count()), (50, 51));
        for (part, want) in [(&first, &records[..50]), (&second, &records[50..])] {
            // Unstamped, same codec and transactional bit.
            assert_eq!(part.base_sequence(), NO_SEQUENCE);
            assert_eq!(part.codec(), sealed.codec());
            assert!(part.is_transactional());
            assert_records_match(&decode_one(&part.to_bytes()), want);
        }
        let one = build(0, &records[..1]).seal_compressed(false, compression);
        assert!(one.split_in_two().is_none());
    }
}

/// A batch whose few compressed bytes claim (and expand to) far more than the decoder's
/// limit: a typed error, not an allocation of the claimed size.
#[test]
fn decompression_bomb_is_rejected() {
    let limit = 1 << 20;
    for compression in Compression::every_available() {
        // One record of 8 MiB of zeros compresses to a few KiB.
        let mut builder = BatchBuilder::new(0, 0);
        builder.append(0, None, Some(&vec![0u8; 8 << 20]), &[]);
        let bomb = builder.seal_compressed(false, compression).to_bytes();
        assert!(bomb.len() < 512 * 1024, "{compression:?}: {}", bomb.len());
        let err = decode_batch_bounded(&bomb, limit).expect_err("a bomb");
        assert_eq!(
            err.kind,
            DecodeErrorKind::DecompressedTooLarge { limit },
            "{compression:?}"
        );
        assert_eq!(err.offset, RECORD_BATCH_HEADER_LEN);
        // With the default limit (64 MiB) the same batch is fine.
        assert_eq!(decode_one(&bomb).records.len(), 1);
    }
    // A snappy batch whose raw block claims 4 GiB - 1 bytes and holds nothing: refused from the
    // claim, before anything is allocated.
    if Codec::Snappy.is_available() {
        let mut builder = BatchBuilder::new(0, 0);
        builder.append(0, None, Some(b"v"), &[]);
        let mut bytes = builder.seal(false).to_bytes().to_vec();
        bytes.truncate(RECORD_BATCH_HEADER_LEN);
        bytes.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
        let length = (bytes.len() - 12) as i32;
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes[CRC_FROM + 1] |= Codec::Snappy.id();
        fix_crc(&mut bytes);
        assert_eq!(
            error_kind(&bytes),
            DecodeErrorKind::DecompressedTooLarge {
                limit: DEFAULT_MAX_DECOMPRESSED_LEN
            }
        );
    }
}
