//! Fuzz logic for the RecordBatch v2 decoder, in one file that both the cargo-fuzz target
//! (`fuzz/fuzz_targets/decode_record_batch.rs`) and the stable test (`tests/fuzz_decoders.rs`)
//! include with `#[path]`, so `cargo test` runs exactly what the fuzzer runs.
//!
//! The decoder must never panic, and whatever it accepts must survive a round trip through
//! our encoder with the same records. Compressed batches are decompressed (with the decoder's
//! bound): corrupt or hostile compressed records are typed errors, and what decompresses is
//! re-encoded with the same codec.

use exactly::__private::protocol::record_batch::{
    BatchBuilder, Codec, Compression, DecodedBatch, decode_batch, decode_batches,
};

/// BaseOffset and Length: the bytes before what Length counts.
const LOG_OVERHEAD: usize = 12;
/// Where the CRC is stored, and where the bytes it covers start.
const CRC_AT: usize = 17;
const CRC_FROM: usize = 21;

/// Decodes `data` as a Fetch response's records field, then again with the CRC of every
/// complete batch recomputed: the CRC-32C would otherwise turn away almost every mutated input
/// before the record parser sees it.
pub fn decode_record_batch(data: &[u8]) {
    check(data);
    let mut fixed = data.to_vec();
    if fix_crcs(&mut fixed) {
        check(&fixed);
    }
}

/// Rewrites the CRC of each complete batch frame in `data`; whether it found any.
fn fix_crcs(data: &mut [u8]) -> bool {
    let mut at = 0;
    let mut fixed = false;
    while let Some(length) = data.get(at + 8..at + LOG_OVERHEAD) {
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        let end = at + LOG_OVERHEAD + length;
        if length < CRC_FROM - LOG_OVERHEAD || end > data.len() {
            break;
        }
        let crc = crc32c::crc32c(&data[at + CRC_FROM..end]);
        data[at + CRC_AT..at + CRC_FROM].copy_from_slice(&crc.to_be_bytes());
        fixed = true;
        at = end;
    }
    fixed
}

fn check(data: &[u8]) {
    let Ok(batches) = decode_batches(data) else {
        return;
    };
    let mut consumed = 0;
    for batch in &batches {
        let len = LOG_OVERHEAD + usize::try_from(batch.batch_length).expect("Length >= 0");
        // decode_batch agrees on where each batch ends.
        let (first, first_len) = decode_batch(&data[consumed..])
            .expect("decodes alone")
            .expect("is complete");
        assert_eq!((&first, first_len), (batch, len));
        consumed += len;
        assert_eq!(batch.magic, 2);
        assert_eq!(batch.codec().id(), (batch.attributes & 0x07) as u8);
        re_encode(batch);
    }
    assert!(consumed <= data.len());
    // What follows the last batch is less than one whole batch.
    assert!(matches!(decode_batch(&data[consumed..]), Ok(None)));
}

/// The codec at the level Kafka uses by default.
pub fn default_compression(codec: Codec) -> Compression {
    match codec {
        Codec::None => Compression::None,
        Codec::Gzip => Compression::Gzip { level: 6 },
        Codec::Snappy => Compression::Snappy,
        Codec::Lz4 => Compression::Lz4,
        Codec::Zstd => Compression::Zstd { level: 3 },
        // The decoder only returns batches whose codec it knows, so this is a decoder bug.
        other => panic!("decoded a batch with a codec the crate does not know: {other:?}"),
    }
}

/// Our encoder given the decoded records, compressing with the batch's codec, yields a batch
/// that decodes to the same records.
fn re_encode(batch: &DecodedBatch) {
    let mut builder = BatchBuilder::new(batch.base_timestamp, 0);
    for record in &batch.records {
        let timestamp = batch.base_timestamp.wrapping_add(record.timestamp_delta);
        let (key, value) = (record.key.as_deref(), record.value.as_deref());
        let size = builder.record_size(timestamp, key, value, &record.headers);
        let before = builder.size_in_bytes();
        builder.append(timestamp, key, value, &record.headers);
        assert_eq!(
            builder.size_in_bytes() - before,
            size,
            "record_size is exact"
        );
    }
    let mut sealed =
        builder.seal_compressed(batch.is_transactional(), default_compression(batch.codec()));
    sealed.stamp(batch.producer_id, batch.producer_epoch, batch.base_sequence);
    let again = decode_batches(&sealed.to_bytes()).expect("a batch we encode decodes");
    assert_eq!(again.len(), 1);
    let again = &again[0];
    assert_eq!(again.records.len(), batch.records.len());
    assert_eq!(sealed.record_count() as usize, batch.records.len());
    assert_eq!(again.base_timestamp, batch.base_timestamp);
    assert_eq!(
        (again.producer_id, again.producer_epoch, again.base_sequence),
        (batch.producer_id, batch.producer_epoch, batch.base_sequence)
    );
    assert_eq!(again.is_transactional(), batch.is_transactional());
    for (i, (ours, original)) in again.records.iter().zip(&batch.records).enumerate() {
        assert_eq!(ours.offset_delta as usize, i);
        assert_eq!(ours.timestamp_delta, original.timestamp_delta);
        assert_eq!(ours.key, original.key);
        assert_eq!(ours.value, original.value);
        assert_eq!(ours.headers, original.headers);
    }
}
