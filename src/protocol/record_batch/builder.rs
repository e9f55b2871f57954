//! The encoder: [`BatchBuilder`] appends records into an open batch's body; [`SealedBatch`] is
//! the closed batch, stamped with the producer's identity when it is dispatched.

use std::fmt;

use bytes::Bytes;
use crc32c::crc32c;

use super::compression::{self, Codec, Compression};
use super::crc;
use super::decode::{DecodedRecord, decode_batch_bounded};
use super::{
    BASE_SEQUENCE_AT, BASE_TIMESTAMP_AT, COMPRESSION_MASK, CRC_AT, CRC_FROM, Header,
    LAST_OFFSET_DELTA_AT, LOG_OVERHEAD, MAGIC, MAGIC_AT, MAX_TIMESTAMP_AT,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_AT, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORD_BATCH_HEADER_LEN,
    RECORDS_COUNT_AT, TRANSACTIONAL, sequence_at,
};
use crate::protocol::encoder::WireWrite;

/// Bytes the unsigned LEB128 encoding of `v` takes (1..=10): seven significant bits per byte,
/// looked up by the count of leading zeros (an append takes eight of these; computing each
/// with a division by 7 was 3.5% of the send path's instructions).
#[inline]
fn uvarint_len(v: u64) -> usize {
    /// Bytes by leading zeros of a non-zero `u64` (index 64 is never used: `v | 1` is not 0).
    const BY_LEADING_ZEROS: [u8; 65] = {
        let mut table = [1u8; 65];
        let mut zeros = 0;
        while zeros < 64 {
            let significant_bits = 64 - zeros;
            table[zeros] = significant_bits.div_ceil(7) as u8;
            zeros += 1;
        }
        table
    };
    usize::from(BY_LEADING_ZEROS[(v | 1).leading_zeros() as usize])
}

/// Bytes a VARINT (zig-zag) of `v` takes, as [`WireWrite::put_varint`] writes it.
#[inline]
fn varint_len(v: i32) -> usize {
    uvarint_len(u64::from(((v << 1) ^ (v >> 31)) as u32))
}

/// Bytes a VARLONG (zig-zag) of `v` takes, as [`WireWrite::put_varlong`] writes it.
#[inline]
fn varlong_len(v: i64) -> usize {
    uvarint_len(((v << 1) ^ (v >> 63)) as u64)
}

/// Bytes the VARINT of a length takes, for a length the caller keeps below `i32::MAX`.
#[inline]
fn len_varint_len(len: usize) -> usize {
    varint_len(len as i32)
}

/// Bytes a nullable key, value or header value takes: its length varint (-1 for null, one
/// byte) and its bytes.
#[inline]
fn nullable_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => len_varint_len(b.len()) + b.len(),
    }
}

/// Appends a nullable key, value or header value with its zig-zag length (-1 for null). The
/// caller has reserved the room, so each write is a capacity check that always passes.
#[inline]
fn put_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.put_varint(-1),
        Some(b) => {
            out.put_varint(b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Writes `bytes` into `header` at `at` (a constant offset of a header field).
#[inline]
fn put_field<const N: usize>(
    header: &mut [u8; RECORD_BATCH_HEADER_LEN],
    at: usize,
    bytes: [u8; N],
) {
    header[at..at + N].copy_from_slice(&bytes);
}

/// An open batch: records are encoded straight into its body buffer as they are appended (no
/// per-record allocation once the buffer has its capacity). It holds no producer id, epoch or
/// sequence: those are given when the sealed batch is dispatched (rule P1).
///
/// Every record's offset delta is its position in the batch, and its timestamp is stored
/// relative to the base timestamp given at [`BatchBuilder::new`] (a record may be older than
/// the base: deltas are signed).
#[derive(Clone)]
pub struct BatchBuilder {
    body: Vec<u8>,
    base_timestamp: i64,
    /// The largest record timestamp so far; `i64::MIN` while the batch is empty.
    max_timestamp: i64,
    record_count: i32,
}

impl BatchBuilder {
    /// An empty batch whose records' timestamps are stored relative to `base_timestamp`, with
    /// room for `body_capacity` bytes of records before the buffer has to grow.
    pub fn new(base_timestamp: i64, body_capacity: usize) -> Self {
        Self {
            body: Vec::with_capacity(body_capacity),
            base_timestamp,
            max_timestamp: i64::MIN,
            record_count: 0,
        }
    }

    /// The bytes of a record that do not depend on where it goes in a batch: its attributes,
    /// key, value and headers. The per-record path computes this once and derives from it
    /// the record's size alone in a batch, its size in the open batch and the append
    /// ([`BatchBuilder::record_size_with`], [`BatchBuilder::append_with`]): the headers' loop
    /// and the varint lengths were 7.7% of the send path's instructions when computed three
    /// times per record.
    #[inline]
    pub fn record_fixed_len(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
        let mut len = 1 // Attributes
            + nullable_len(key)
            + nullable_len(value)
            + len_varint_len(headers.len());
        for header in headers {
            len += len_varint_len(header.key.len())
                + header.key.len()
                + nullable_len(header.value.as_deref());
        }
        len
    }

    /// The record's bytes after its length varint, for the record appended next, from its
    /// [`BatchBuilder::record_fixed_len`].
    #[inline]
    fn record_body_len(&self, timestamp: i64, fixed_len: usize) -> usize {
        fixed_len
            + varlong_len(timestamp.wrapping_sub(self.base_timestamp))
            + varint_len(self.record_count)
    }

    /// Exact bytes a record of [`BatchBuilder::record_fixed_len`] `fixed_len` takes in a
    /// batch of its own (offset and timestamp deltas 0, one byte each; length varint
    /// included).
    #[inline]
    pub fn record_size_alone(fixed_len: usize) -> usize {
        let body_len = fixed_len + 2;
        len_varint_len(body_len) + body_len
    }

    /// Exact bytes [`BatchBuilder::append`] would add for this record at this position (length
    /// varint included). The offset delta is the position, so the answer depends on how many
    /// records the batch already holds.
    #[cfg(any(test, feature = "internals"))]
    #[inline]
    pub fn record_size(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        self.record_size_with(timestamp, Self::record_fixed_len(key, value, headers))
    }

    /// [`BatchBuilder::record_size`] from the record's [`BatchBuilder::record_fixed_len`].
    #[inline]
    pub fn record_size_with(&self, timestamp: i64, fixed_len: usize) -> usize {
        let body_len = self.record_body_len(timestamp, fixed_len);
        len_varint_len(body_len) + body_len
    }

    /// Appends one record and returns its offset delta. The caller has checked sizes (a record
    /// fits in an `i32` length, the batch stays under the broker's limits).
    #[inline]
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> i32 {
        let fixed_len = Self::record_fixed_len(key, value, headers);
        self.append_with(timestamp, fixed_len, key, value, headers)
    }

    /// [`BatchBuilder::append`] of a record whose [`BatchBuilder::record_fixed_len`] the caller
    /// computed already.
    #[inline]
    pub fn append_with(
        &mut self,
        timestamp: i64,
        fixed_len: usize,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> i32 {
        let body_len = self.record_body_len(timestamp, fixed_len);
        debug_assert_eq!(
            fixed_len,
            Self::record_fixed_len(key, value, headers),
            "fixed length of another record"
        );
        debug_assert!(body_len < i32::MAX as usize, "record of {body_len} bytes");
        debug_assert!(self.record_count < i32::MAX, "batch full");
        let offset_delta = self.record_count;
        let out = &mut self.body;
        out.reserve(len_varint_len(body_len) + body_len);
        out.put_varint(body_len as i32);
        out.push(0); // Attributes: unused in v2, always 0.
        out.put_varlong(timestamp.wrapping_sub(self.base_timestamp));
        out.put_varint(offset_delta);
        put_nullable(out, key);
        put_nullable(out, value);
        out.put_varint(headers.len() as i32);
        for header in headers {
            put_nullable(out, Some(header.key.as_bytes()));
            put_nullable(out, header.value.as_deref());
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.record_count += 1;
        offset_delta
    }

    /// Batch size on the wire so far (61-byte header + body).
    pub fn size_in_bytes(&self) -> usize {
        RECORD_BATCH_HEADER_LEN + self.body.len()
    }

    /// Records appended so far.
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// Whether no record has been appended.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    /// Bytes of records appended so far (the body before any compression).
    pub fn records_len(&self) -> usize {
        self.body.len()
    }

    /// Closes the batch uncompressed: see [`BatchBuilder::seal_compressed`].
    #[cfg(any(test, feature = "internals"))]
    pub fn seal(self, transactional: bool) -> SealedBatch {
        self.seal_compressed(transactional, Compression::None)
    }

    /// Closes the batch: compresses the records, freezes the body and computes the body's CRC
    /// once. The batch is unstamped (producer id, epoch and base sequence -1) until
    /// [`SealedBatch::stamp`], so compression happens before any sequence is given (P1) and
    /// stamping still only rewrites the header. `transactional` sets attribute bit 4 (KIP-98);
    /// the timestamp type is CreateTime.
    ///
    /// Records that do not get smaller (random bytes, tiny batches) are stored uncompressed,
    /// with codec 0 in Attributes: every reader accepts that, the broker keeps it as it is, and
    /// a batch is then never larger on the wire than its records.
    pub fn seal_compressed(self, transactional: bool, compression: Compression) -> SealedBatch {
        let attributes = if transactional { TRANSACTIONAL } else { 0 };
        self.seal_with_attributes(attributes, compression)
    }

    /// Closes the batch with the given Attributes (control batches, tests); the codec bits are
    /// set from what the body ends up as.
    pub(super) fn seal_with_attributes(
        self,
        attributes: i16,
        compression: Compression,
    ) -> SealedBatch {
        let records_len = self.body.len();
        let (body, codec) = match compression {
            Compression::None => (self.body, Codec::None),
            _ => match compression::compress(compression, &self.body) {
                Ok(compressed) if compressed.len() < records_len => {
                    (compressed, compression.codec())
                }
                _ => (self.body, Codec::None),
            },
        };
        let attributes = (attributes & !COMPRESSION_MASK) | i16::from(codec.id());
        debug_assert!(
            body.len() <= i32::MAX as usize - (RECORD_BATCH_HEADER_LEN - LOG_OVERHEAD),
            "batch body of {} bytes",
            body.len()
        );
        let length = (RECORD_BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32;
        let max_timestamp = if self.record_count == 0 {
            NO_TIMESTAMP
        } else {
            self.max_timestamp
        };
        // BaseOffset (bytes 0..8) stays 0: the broker assigns offsets.
        let mut header = [0u8; RECORD_BATCH_HEADER_LEN];
        put_field(&mut header, LOG_OVERHEAD - 4, length.to_be_bytes());
        put_field(
            &mut header,
            PARTITION_LEADER_EPOCH_AT,
            NO_PARTITION_LEADER_EPOCH.to_be_bytes(),
        );
        put_field(&mut header, MAGIC_AT, MAGIC.to_be_bytes());
        put_field(&mut header, CRC_FROM, attributes.to_be_bytes());
        put_field(
            &mut header,
            LAST_OFFSET_DELTA_AT,
            (self.record_count - 1).to_be_bytes(),
        );
        put_field(
            &mut header,
            BASE_TIMESTAMP_AT,
            self.base_timestamp.to_be_bytes(),
        );
        put_field(&mut header, MAX_TIMESTAMP_AT, max_timestamp.to_be_bytes());
        put_field(
            &mut header,
            RECORDS_COUNT_AT,
            self.record_count.to_be_bytes(),
        );
        let mut sealed = SealedBatch {
            header,
            body_crc: crc32c(&body),
            body_shift: crc::shift_operator(body.len()),
            body: Bytes::from(body),
            records_len,
            compression,
        };
        sealed.stamp(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE);
        sealed
    }
}

/// A closed batch: a 61-byte header plus an immutable body, so it can be written to the socket
/// as two slices without copying, and re-stamped after an epoch bump (rule P2) by
/// rewriting only the header.
#[derive(Clone)]
pub struct SealedBatch {
    header: [u8; RECORD_BATCH_HEADER_LEN],
    body: Bytes,
    /// CRC-32C of `body`, computed once at seal.
    body_crc: u32,
    /// The operator that shifts a CRC past `body` (see [`crc::shift_operator`]).
    body_shift: u32,
    /// Bytes of the records before compression (`body.len()` when uncompressed).
    records_len: usize,
    /// The compression asked for at seal (the body may be stored uncompressed anyway, see
    /// [`BatchBuilder::seal_compressed`]); parts of a split batch are sealed with it again.
    compression: Compression,
}

impl SealedBatch {
    /// Writes producer id, epoch and base sequence into the header and recomputes the CRC: the
    /// CRC of the header's covered part (Attributes to RecordsCount, 40 bytes) combined with
    /// the body CRC computed at seal, so the body is not rescanned (a CRC combine as
    /// `crc32c_combine` computes it, see the `crc` module for why it is our own).
    pub fn stamp(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        put_field(&mut self.header, PRODUCER_ID_AT, producer_id.to_be_bytes());
        put_field(
            &mut self.header,
            PRODUCER_EPOCH_AT,
            producer_epoch.to_be_bytes(),
        );
        put_field(
            &mut self.header,
            BASE_SEQUENCE_AT,
            base_sequence.to_be_bytes(),
        );
        let header_crc = crc32c(&self.header[CRC_FROM..]);
        let crc = crc::combine(header_crc, self.body_crc, self.body_shift);
        put_field(&mut self.header, CRC_AT, crc.to_be_bytes());
    }

    /// The 61-byte batch header, to be written before [`SealedBatch::body`].
    pub fn header(&self) -> &[u8; RECORD_BATCH_HEADER_LEN] {
        &self.header
    }

    /// The encoded records.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Batch size on the wire (header + body).
    pub fn size_in_bytes(&self) -> usize {
        RECORD_BATCH_HEADER_LEN + self.body.len()
    }

    /// Batch size as it would be uncompressed (header + records): what the batch held in the
    /// accumulator, and so what it accounts for in `buffer.memory`.
    pub fn uncompressed_size_in_bytes(&self) -> usize {
        RECORD_BATCH_HEADER_LEN + self.records_len
    }

    /// The codec of the body (Attributes bits 0–2).
    pub fn codec(&self) -> Codec {
        let id = i16::from_be_bytes(self.field(CRC_FROM)) & COMPRESSION_MASK;
        Codec::from_id(id as u8).unwrap_or(Codec::None)
    }

    /// The batch's records in two unstamped batches, the first half and the rest, sealed with
    /// the same compression and transactional bit; `None` for a batch of fewer than two
    /// records. For a batch the broker rejected as too large (MESSAGE_TOO_LARGE,
    /// RECORD_LIST_TOO_LARGE), as Java's `ProducerBatch.split` does; halving (rather than
    /// Java's re-batching at `batch.size`) ends after log2(records) rounds whatever the
    /// topic's limit. Records keep their order, timestamps, keys, values and headers; their
    /// offset deltas restart in each part.
    pub fn split_in_two(&self) -> Option<(SealedBatch, SealedBatch)> {
        if self.record_count() < 2 {
            return None;
        }
        // Our own batch: it decodes, and decompresses to exactly `records_len`.
        let (decoded, _) = decode_batch_bounded(&self.to_bytes(), self.records_len)
            .ok()
            .flatten()?;
        let (first, second) = decoded.records.split_at(decoded.records.len() / 2);
        let base_timestamp = self.base_timestamp();
        let reseal = |records: &[DecodedRecord]| {
            let mut builder = BatchBuilder::new(base_timestamp, self.records_len / 2 + 64);
            for record in records {
                builder.append(
                    base_timestamp.wrapping_add(record.timestamp_delta),
                    record.key.as_deref(),
                    record.value.as_deref(),
                    &record.headers,
                );
            }
            builder.seal_compressed(self.is_transactional(), self.compression)
        };
        Some((reseal(first), reseal(second)))
    }

    fn field<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.header[at..at + N]);
        out
    }

    /// Records in the batch.
    pub fn record_count(&self) -> i32 {
        i32::from_be_bytes(self.field(RECORDS_COUNT_AT))
    }

    /// The timestamp record deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.field(BASE_TIMESTAMP_AT))
    }

    /// The largest record timestamp ([`super::NO_TIMESTAMP`] for an empty batch).
    pub fn max_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.field(MAX_TIMESTAMP_AT))
    }

    /// The producer id stamped, or [`NO_PRODUCER_ID`].
    pub fn producer_id(&self) -> i64 {
        i64::from_be_bytes(self.field(PRODUCER_ID_AT))
    }

    /// The producer epoch stamped, or [`NO_PRODUCER_EPOCH`].
    pub fn producer_epoch(&self) -> i16 {
        i16::from_be_bytes(self.field(PRODUCER_EPOCH_AT))
    }

    /// The sequence of the first record, or [`NO_SEQUENCE`].
    pub fn base_sequence(&self) -> i32 {
        i32::from_be_bytes(self.field(BASE_SEQUENCE_AT))
    }

    /// The sequence of the last record: `base_sequence + record_count - 1`, wrapping from
    /// `i32::MAX` to 0 as the broker does (rule P3); [`NO_SEQUENCE`] if unstamped.
    pub fn last_sequence(&self) -> i32 {
        sequence_at(self.base_sequence(), self.record_count() - 1)
    }

    /// Whether attribute bit 4 (transactional, KIP-98) is set.
    pub fn is_transactional(&self) -> bool {
        i16::from_be_bytes(self.field(CRC_FROM)) & TRANSACTIONAL != 0
    }

    /// Header and body in one buffer (tests, simple paths); the socket path writes
    /// [`SealedBatch::header`] and [`SealedBatch::body`] without this copy.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.size_in_bytes());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.body);
        Bytes::from(out)
    }
}

// Debug shows the fields, not the (up to megabytes of) record bytes.
impl fmt::Debug for BatchBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchBuilder")
            .field("record_count", &self.record_count)
            .field("size_in_bytes", &self.size_in_bytes())
            .field("base_timestamp", &self.base_timestamp)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for SealedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedBatch")
            .field("record_count", &self.record_count())
            .field("size_in_bytes", &self.size_in_bytes())
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("transactional", &self.is_transactional())
            .field("base_timestamp", &self.base_timestamp())
            .field("max_timestamp", &self.max_timestamp())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table agrees with the encoder at every length boundary (2^(7k) - 1 and 2^(7k)),
    /// for 0 and for `u64::MAX`.
    #[test]
    fn uvarint_len_is_the_encoded_length() {
        let mut values = vec![0, 1, u64::MAX];
        for k in 1..10 {
            values.extend([(1u64 << (7 * k)) - 1, 1u64 << (7 * k)]);
        }
        for v in values {
            let mut out = Vec::new();
            out.put_uvarlong(v);
            assert_eq!(uvarint_len(v), out.len(), "{v:#x}");
        }
    }
}
