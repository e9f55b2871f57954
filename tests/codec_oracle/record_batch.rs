//! RecordBatch v2 against `kafka-protocol`'s `RecordBatchEncoder` / `RecordBatchDecoder`:
//! batches we encode decode with theirs to the same records and header fields, and batches
//! they encode decode with ours.
//!
//! Their limits, worked around explicitly:
//! - Their `Record.headers` is an `IndexMap`: a repeated header key collapses into one entry,
//!   so generated headers here have distinct keys (duplicates are covered by our unit tests).
//! - Their decoder gives each record `sequence = base_sequence.wrapping_add(offset_delta)`,
//!   wrapping from `i32::MAX` to `i32::MIN` where Kafka wraps to 0, and their encoder groups
//!   records into a batch by `offset - sequence`: base sequences are drawn so that a batch does
//!   not cross `i32::MAX` (the wrap is covered by our unit tests).
//! - Their encoder takes the smallest record timestamp as BaseTimestamp, so batches they write
//!   never have negative timestamp deltas (ours may; their decoder reads those fine).
//! - Their encoder computes deltas without wrapping: timestamps stay in a realistic range.
//! - Their decode of a cut-off last batch is an error where ours stops before it, so no
//!   truncated input is compared.

use bytes::{Bytes, BytesMut};
use exactly::__private::protocol::record_batch::{
    BatchBuilder, ControlRecord, ControlRecordKind, DecodedBatch, Header, TimestampType,
    decode_batches, encode_control_batch,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as TheirTimestampType,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A record as both sides see it.
#[derive(Debug, Clone)]
struct Sample {
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<Header>,
}

fn random_bytes(rng: &mut SmallRng, max_len: usize) -> Bytes {
    let len = rng.random_range(0..=max_len);
    (0..len).map(|_| rng.random()).collect::<Vec<u8>>().into()
}

fn random_sample(rng: &mut SmallRng, base_timestamp: i64) -> Sample {
    let header_count = rng.random_range(0..4);
    Sample {
        timestamp: base_timestamp + rng.random_range(-50_000..50_000),
        key: rng.random_bool(0.8).then(|| random_bytes(rng, 30)),
        value: rng.random_bool(0.9).then(|| random_bytes(rng, 200)),
        // Distinct keys (their headers are a map), including the empty key.
        headers: (0..header_count)
            .map(|i| Header {
                key: ["", "trace", "ü-key"][i].to_owned(),
                value: rng.random_bool(0.7).then(|| random_bytes(rng, 20)),
            })
            .collect(),
    }
}

fn their_headers(record: &Record) -> Vec<Header> {
    record
        .headers
        .iter()
        .map(|(key, value)| Header {
            key: key.to_string(),
            value: value.clone(),
        })
        .collect()
}

fn decode_with_theirs(bytes: Bytes) -> Vec<Record> {
    let mut buf = bytes;
    let sets = RecordBatchDecoder::decode_all(&mut buf).expect("kafka-protocol decodes our batch");
    sets.into_iter().flat_map(|set| set.records).collect()
}

/// A base sequence (or -1) whose batch of `count` records does not wrap (see the module doc).
fn random_base_sequence(rng: &mut SmallRng, count: i32) -> i32 {
    if rng.random_bool(0.2) {
        -1
    } else {
        rng.random_range(0..=i32::MAX - count)
    }
}

#[test]
fn batches_we_encode_decode_with_theirs() {
    let mut rng = SmallRng::seed_from_u64(0x0ac1e);
    for _ in 0..200 {
        let base_timestamp = rng.random_range(0..2_000_000_000_000);
        let samples: Vec<Sample> = (0..rng.random_range(1..30))
            .map(|_| random_sample(&mut rng, base_timestamp))
            .collect();
        let mut builder = BatchBuilder::new(base_timestamp, 1024);
        for s in &samples {
            builder.append(
                s.timestamp,
                s.key.as_deref(),
                s.value.as_deref(),
                &s.headers,
            );
        }
        let transactional = rng.random();
        let mut sealed = builder.seal(transactional);
        let (producer_id, producer_epoch) = (rng.random_range(-1..1 << 40), rng.random());
        let base_sequence = random_base_sequence(&mut rng, samples.len() as i32);
        sealed.stamp(producer_id, producer_epoch, base_sequence);

        let records = decode_with_theirs(sealed.to_bytes());
        assert_eq!(records.len(), samples.len());
        for (i, (theirs, ours)) in records.iter().zip(&samples).enumerate() {
            assert_eq!(theirs.offset, i as i64);
            assert_eq!(theirs.sequence, base_sequence.wrapping_add(i as i32));
            assert_eq!(theirs.producer_id, producer_id);
            assert_eq!(theirs.producer_epoch, producer_epoch);
            assert_eq!(theirs.partition_leader_epoch, -1);
            assert_eq!(theirs.transactional, transactional);
            assert!(!theirs.control);
            assert_eq!(theirs.timestamp_type, TheirTimestampType::Creation);
            assert_eq!(theirs.timestamp, ours.timestamp);
            assert_eq!(theirs.key, ours.key);
            assert_eq!(theirs.value, ours.value);
            assert_eq!(their_headers(theirs), ours.headers);
        }
    }
}

/// Their records for one batch: offsets from 0, sequences from `base_sequence`.
fn their_batch(
    rng: &mut SmallRng,
    samples: &[Sample],
    producer_id: i64,
    transactional: bool,
) -> Vec<Record> {
    let producer_epoch = rng.random_range(0..i16::MAX);
    let base_sequence = random_base_sequence(rng, samples.len() as i32);
    samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut record = Record {
                transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TheirTimestampType::Creation,
                offset: i as i64,
                sequence: base_sequence.wrapping_add(i as i32),
                timestamp: s.timestamp,
                key: s.key.clone(),
                value: s.value.clone(),
                headers: Default::default(),
            };
            for h in &s.headers {
                record
                    .headers
                    .insert(StrBytes::from_string(h.key.clone()), h.value.clone());
            }
            record
        })
        .collect()
}

fn encode_with_theirs(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).expect("kafka-protocol encodes");
    buf.freeze()
}

fn assert_batch_matches(ours: &DecodedBatch, theirs: &[Record]) {
    let first = &theirs[0];
    assert_eq!(ours.records.len(), theirs.len());
    assert_eq!(ours.base_offset, 0);
    assert_eq!(ours.last_offset(), theirs.len() as i64 - 1);
    assert_eq!(ours.producer_id, first.producer_id);
    assert_eq!(ours.producer_epoch, first.producer_epoch);
    assert_eq!(ours.base_sequence, first.sequence);
    assert_eq!(ours.partition_leader_epoch, first.partition_leader_epoch);
    assert_eq!(ours.is_transactional(), first.transactional);
    assert_eq!(ours.is_control(), first.control);
    assert_eq!(ours.timestamp_type(), TimestampType::CreateTime);
    let timestamps = theirs.iter().map(|r| r.timestamp);
    assert_eq!(ours.base_timestamp, timestamps.clone().min().unwrap());
    assert_eq!(ours.max_timestamp, timestamps.max().unwrap());
    for (record, their) in ours.records.iter().zip(theirs) {
        assert_eq!(ours.record_offset(record), their.offset);
        // A batch without sequence (-1) has none per record in Kafka; theirs counts on from -1.
        if ours.base_sequence != -1 {
            assert_eq!(ours.record_sequence(record), their.sequence);
        }
        assert_eq!(ours.record_timestamp(record), their.timestamp);
        assert_eq!(record.key, their.key);
        assert_eq!(record.value, their.value);
        assert_eq!(record.headers, their_headers(their));
    }
}

#[test]
fn batches_they_encode_decode_with_ours() {
    let mut rng = SmallRng::seed_from_u64(0x7e1e);
    for _ in 0..200 {
        // Several batches back to back, as in a Fetch response: their encoder starts a new
        // batch when the producer id changes.
        let batches: Vec<Vec<Record>> = (0..rng.random_range(1..4))
            .map(|producer_id| {
                let base_timestamp = rng.random_range(0..2_000_000_000_000);
                let samples: Vec<Sample> = (0..rng.random_range(1..20))
                    .map(|_| random_sample(&mut rng, base_timestamp))
                    .collect();
                let transactional = rng.random();
                their_batch(&mut rng, &samples, 1000 + producer_id, transactional)
            })
            .collect();
        let all: Vec<Record> = batches.iter().flatten().cloned().collect();
        let ours = decode_batches(&encode_with_theirs(&all)).expect("we decode their batches");
        assert_eq!(ours.len(), batches.len());
        for (ours, theirs) in ours.iter().zip(&batches) {
            assert_batch_matches(ours, theirs);
        }
    }
}

#[test]
fn control_batches_agree_both_ways() {
    // Theirs → ours: a commit marker with coordinator epoch 5.
    let marker = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: 42,
        producer_epoch: 3,
        timestamp_type: TheirTimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_000,
        key: Some(Bytes::from_static(&[0, 0, 0, 1])),
        value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 5])),
        headers: Default::default(),
    };
    let ours = decode_batches(&encode_with_theirs(std::slice::from_ref(&marker))).unwrap();
    assert_eq!(
        ours[0].control(),
        Some(ControlRecord {
            kind: ControlRecordKind::Commit,
            coordinator_epoch: 5
        })
    );
    assert_batch_matches(&ours[0], std::slice::from_ref(&marker));

    // Ours → theirs: an abort marker.
    let abort = ControlRecord {
        kind: ControlRecordKind::Abort,
        coordinator_epoch: 9,
    };
    let records = decode_with_theirs(encode_control_batch(abort, 2_000, 42, 4).to_bytes());
    assert_eq!(records.len(), 1);
    let theirs = &records[0];
    assert!(theirs.control && theirs.transactional);
    assert_eq!((theirs.producer_id, theirs.producer_epoch), (42, 4));
    assert_eq!(theirs.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
    assert_eq!(theirs.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 9][..]));
    assert_eq!(theirs.timestamp, 2_000);
}
