//! The decoder: batches as a Fetch response's `Records` field carries them.

use bytes::Bytes;
use crc32c::crc32c;

use super::compression::{self, Codec, DecompressError};
#[cfg(any(test, feature = "internals"))]
use super::sequence_at;
use super::{
    COMPRESSION_MASK, CONTROL, Header, LOG_OVERHEAD, MAGIC, RECORD_BATCH_HEADER_LEN,
    TIMESTAMP_TYPE_LOG_APPEND, TRANSACTIONAL,
};
use crate::protocol::decoder::Decoder;
use crate::protocol::error::{DecodeError, DecodeErrorKind};

/// The fewest bytes a record can take: length, attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each. Bounds a hostile RecordsCount.
const MIN_RECORD_LEN: usize = 7;
/// The fewest bytes a record header can take: key length and value length.
const MIN_HEADER_LEN: usize = 2;

/// What a record's timestamp means (Attributes bit 3, KIP-32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer; each record has its own.
    CreateTime,
    /// Set by the broker when it appended the batch: every record's timestamp is the batch's
    /// MaxTimestamp.
    LogAppendTime,
}

/// One record of a decoded batch. Offset and timestamp are relative to the batch's; see
/// [`DecodedBatch::record_offset`] and [`DecodedBatch::record_timestamp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    /// Offset relative to the batch's BaseOffset.
    pub offset_delta: i32,
    /// Timestamp relative to the batch's BaseTimestamp (may be negative).
    pub timestamp_delta: i64,
    /// The key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// The headers, in order; keys may repeat.
    pub headers: Vec<Header>,
}

/// The two transaction markers a control batch can carry (KIP-98 control record types 0 and 1;
/// KRaft's own control types never appear in a topic a producer writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecordKind {
    /// The transaction was aborted: consumers reading committed skip its records.
    Abort,
    /// The transaction was committed.
    Commit,
}

/// A transaction marker: the record of a control batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    /// Commit or abort.
    pub kind: ControlRecordKind,
    /// The epoch of the transaction coordinator that wrote the marker.
    pub coordinator_epoch: i32,
}

/// The most bytes the records of one compressed batch may decompress to in
/// [`decode_batches`] and [`decode_batch`]: a decompression bomb (a few KiB that expand to
/// gigabytes) is a [`DecodeErrorKind::DecompressedTooLarge`], not an out-of-memory abort.
/// 64 MiB is 64 times the broker's default `message.max.bytes`; use
/// [`decode_batch_bounded`] for another limit.
pub const DEFAULT_MAX_DECOMPRESSED_LEN: usize = 64 << 20;

/// A decoded RecordBatch v2: every header field, and the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBatch {
    /// The offset of the first record (assigned by the broker).
    pub base_offset: i64,
    /// The Length field: bytes from PartitionLeaderEpoch to the end of the batch.
    pub batch_length: i32,
    /// The epoch of the leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// The format version; always [`MAGIC`] (anything else is an error).
    pub magic: i8,
    /// The CRC-32C stored in the header (verified).
    pub crc: u32,
    /// The raw Attributes.
    pub attributes: i16,
    /// Offset of the last record relative to `base_offset` (compaction may leave it past the
    /// last record that remains).
    pub last_offset_delta: i32,
    /// The timestamp record deltas are relative to.
    pub base_timestamp: i64,
    /// The largest record timestamp (under LogAppendTime, the broker's append time).
    pub max_timestamp: i64,
    /// The producer id, or -1.
    pub producer_id: i64,
    /// The producer epoch, or -1.
    pub producer_epoch: i16,
    /// The sequence of the first record, or -1.
    pub base_sequence: i32,
    /// The records; as many as the header's RecordsCount (verified).
    pub records: Vec<DecodedRecord>,
}

impl DecodedBatch {
    /// Whether attribute bit 4 (transactional, KIP-98) is set.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL != 0
    }

    /// Whether attribute bit 5 (control, KIP-98) is set: the batch holds a transaction marker,
    /// not user records.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL != 0
    }

    /// The codec the records were compressed with (attribute bits 0–2).
    #[cfg(any(test, feature = "internals"))]
    pub fn codec(&self) -> Codec {
        // The decoder only returns batches whose codec it knows.
        Codec::from_id((self.attributes & COMPRESSION_MASK) as u8).unwrap_or(Codec::None)
    }

    /// What the record timestamps mean (attribute bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// The offset of the batch's last record, `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// The sequence of the last record, wrapping from `i32::MAX` to 0 as the broker does;
    /// -1 for a batch without sequence.
    #[cfg(any(test, feature = "internals"))]
    pub fn last_sequence(&self) -> i32 {
        sequence_at(self.base_sequence, self.last_offset_delta)
    }

    /// The sequence of `record`, a record of this batch (wrapping as the broker does); -1
    /// for a batch without sequence.
    #[cfg(any(test, feature = "internals"))]
    pub fn record_sequence(&self, record: &DecodedRecord) -> i32 {
        sequence_at(self.base_sequence, record.offset_delta)
    }

    /// The absolute offset of `record`, a record of this batch.
    pub fn record_offset(&self, record: &DecodedRecord) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(record.offset_delta))
    }

    /// The absolute timestamp of `record`, a record of this batch: the batch's MaxTimestamp
    /// under LogAppendTime (the broker does not rewrite the records), else base + delta.
    pub fn record_timestamp(&self, record: &DecodedRecord) -> i64 {
        match self.timestamp_type() {
            TimestampType::LogAppendTime => self.max_timestamp,
            TimestampType::CreateTime => self.base_timestamp.wrapping_add(record.timestamp_delta),
        }
    }

    /// The transaction marker of a control batch; `None` for a data batch, and for a control
    /// record that is not a well-formed commit or abort marker (as Java's consumer, which
    /// ignores control types it does not know).
    pub fn control(&self) -> Option<ControlRecord> {
        if !self.is_control() {
            return None;
        }
        let record = self.records.first()?;
        // Key: i16 version (negative is corrupt), i16 type.
        let &[v0, v1, t0, t1, ..] = record.key.as_deref()? else {
            return None;
        };
        if i16::from_be_bytes([v0, v1]) < 0 {
            return None;
        }
        let kind = match i16::from_be_bytes([t0, t1]) {
            0 => ControlRecordKind::Abort,
            1 => ControlRecordKind::Commit,
            _ => return None,
        };
        // Value: i16 version, i32 coordinator epoch.
        let &[v0, v1, e0, e1, e2, e3, ..] = record.value.as_deref()? else {
            return None;
        };
        if i16::from_be_bytes([v0, v1]) < 0 {
            return None;
        }
        Some(ControlRecord {
            kind,
            coordinator_epoch: i32::from_be_bytes([e0, e1, e2, e3]),
        })
    }
}

/// Decodes a concatenation of batches, as found in a Fetch response's `Records` field.
///
/// The last batch may be cut short: the broker fills a fetch up to the partition's byte limit
/// by copying log bytes as they are (with `sendfile`), without trimming to a batch boundary, so
/// an incomplete batch at the end is normal and not an error. Decoding stops before it; the
/// consumer fetches it again from the next offset. (Java's `ByteBufferLogInputStream` does the
/// same.) A caller that gets no batch from a non-empty input is looking at a batch larger than
/// its fetch limit.
///
/// Compressed batches are decompressed, to at most [`DEFAULT_MAX_DECOMPRESSED_LEN`] bytes each.
///
/// Errors: a bad Length, a magic other than 2 ([`DecodeErrorKind::UnsupportedMagic`]), a CRC
/// that does not match ([`DecodeErrorKind::CrcMismatch`]), an unknown codec
/// ([`DecodeErrorKind::UnsupportedCompression`]), compressed records that are corrupt or too
/// large, or records that do not fill the batch exactly. Error offsets are relative to
/// `bytes`, except inside compressed records, where they are relative to the decompressed
/// records.
#[cfg(any(test, feature = "internals"))]
pub fn decode_batches(bytes: &[u8]) -> Result<Vec<DecodedBatch>, DecodeError> {
    let mut batches = Vec::new();
    let mut at = 0;
    while let Some(rest) = bytes.get(at..) {
        let decoded = decode_batch(rest).map_err(|mut e| {
            e.offset += at;
            e
        })?;
        let Some((batch, len)) = decoded else { break };
        batches.push(batch);
        at += len;
    }
    Ok(batches)
}

/// Decodes the batch at the start of `bytes`, returning it with the bytes it took; `None`
/// when `bytes` holds less than one whole batch (empty, or a tail the broker cut; see
/// [`decode_batches`]).
#[cfg(any(test, feature = "internals"))]
pub fn decode_batch(bytes: &[u8]) -> Result<Option<(DecodedBatch, usize)>, DecodeError> {
    decode_batch_bounded(bytes, DEFAULT_MAX_DECOMPRESSED_LEN)
}

/// [`decode_batch`], with compressed records allowed to decompress to at most
/// `max_decompressed` bytes.
pub fn decode_batch_bounded(
    bytes: &[u8],
    max_decompressed: usize,
) -> Result<Option<(DecodedBatch, usize)>, DecodeError> {
    // One copy per batch; keys, values and header values are slices of it.
    decode_batch_framed(bytes, max_decompressed, Bytes::copy_from_slice)
}

/// [`decode_batch`] of the batch at the start of a buffer the caller shares (a fetched
/// partition's records): keys, values and header values are slices of `bytes` itself, with
/// no copy; a compressed batch's are slices of its own decompressed buffer.
pub fn decode_shared_batch(bytes: &Bytes) -> Result<Option<(DecodedBatch, usize)>, DecodeError> {
    decode_batch_framed(bytes, DEFAULT_MAX_DECOMPRESSED_LEN, |frame| {
        bytes.slice_ref(frame)
    })
}

/// The decoder behind both: `own` turns the batch's bytes (a sub-slice of `bytes`) into the
/// buffer its records are sliced from.
fn decode_batch_framed(
    bytes: &[u8],
    max_decompressed: usize,
    own: impl FnOnce(&[u8]) -> Bytes,
) -> Result<Option<(DecodedBatch, usize)>, DecodeError> {
    let mut d = Decoder::new(bytes);
    if d.remaining() < LOG_OVERHEAD {
        return Ok(None);
    }
    let base_offset = d.i64("RecordBatch.base_offset")?;
    let batch_length = d.i32("RecordBatch.length")?;
    let invalid_length = |d: &Decoder<'_>| {
        d.error(
            "RecordBatch.length",
            DecodeErrorKind::InvalidLength(i64::from(batch_length)),
        )
    };
    let total = usize::try_from(batch_length)
        .map_err(|_| invalid_length(&d))?
        .saturating_add(LOG_OVERHEAD);
    let Some(frame) = bytes.get(..total) else {
        return Ok(None);
    };
    let frame = own(frame);
    let mut d = Decoder::new(&frame);
    d.take(LOG_OVERHEAD, "RecordBatch.length")?;
    let partition_leader_epoch = d.i32("RecordBatch.partition_leader_epoch")?;
    // The magic sits at the same place in the legacy message sets (v0/v1), so check it before
    // the v2 header length: an old message set is reported as such.
    let magic = d.i8("RecordBatch.magic")?;
    if magic != MAGIC {
        return Err(d.error(
            "RecordBatch.magic",
            DecodeErrorKind::UnsupportedMagic(magic),
        ));
    }
    if total < RECORD_BATCH_HEADER_LEN {
        return Err(invalid_length(&d));
    }
    let crc = d.u32("RecordBatch.crc")?;
    let actual = crc32c(d.rest());
    if crc != actual {
        return Err(d.error(
            "RecordBatch.crc",
            DecodeErrorKind::CrcMismatch {
                expected: crc,
                actual,
            },
        ));
    }
    let attributes = d.i16("RecordBatch.attributes")?;
    let codec_id = (attributes & COMPRESSION_MASK) as u8;
    let codec = Codec::from_id(codec_id)
        .filter(|c| c.is_available())
        .ok_or_else(|| {
            d.error(
                "RecordBatch.attributes",
                DecodeErrorKind::UnsupportedCompression(codec_id),
            )
        })?;
    let last_offset_delta = d.i32("RecordBatch.last_offset_delta")?;
    let base_timestamp = d.i64("RecordBatch.base_timestamp")?;
    let max_timestamp = d.i64("RecordBatch.max_timestamp")?;
    let producer_id = d.i64("RecordBatch.producer_id")?;
    let producer_epoch = d.i16("RecordBatch.producer_epoch")?;
    let base_sequence = d.i32("RecordBatch.base_sequence")?;
    let records_count = d.i32("RecordBatch.records_count")?;
    // The records: the rest of the frame, or what it decompresses to. Keys and values are
    // slices of this one buffer.
    let (records_buf, records_at) = if codec == Codec::None {
        (frame.clone(), d.position())
    } else {
        let decompressed =
            compression::decompress(codec, d.rest(), max_decompressed).map_err(|e| {
                let kind = match e {
                    DecompressError::TooLarge { limit } => {
                        DecodeErrorKind::DecompressedTooLarge { limit }
                    }
                    DecompressError::Corrupt(reason) => {
                        DecodeErrorKind::CorruptCompressed { codec, reason }
                    }
                    DecompressError::Unavailable => {
                        DecodeErrorKind::UnsupportedCompression(codec_id)
                    }
                };
                d.error("RecordBatch.records", kind)
            })?;
        (Bytes::from(decompressed), 0)
    };
    let mut d = Decoder::new(&records_buf);
    d.take(records_at, "RecordBatch.records")?;
    let count = usize::try_from(records_count)
        .ok()
        .filter(|&n| n <= d.remaining() / MIN_RECORD_LEN)
        .ok_or_else(|| {
            d.error(
                "RecordBatch.records_count",
                DecodeErrorKind::InvalidLength(i64::from(records_count)),
            )
        })?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        records.push(decode_record(&mut d, &records_buf)?);
    }
    d.finish("RecordBatch.records")?;
    let batch = DecodedBatch {
        base_offset,
        batch_length,
        partition_leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records,
    };
    Ok(Some((batch, total)))
}

/// Reads one record. Its Length varint must match exactly the bytes its fields take (Java's
/// `DefaultRecord.readFrom` rejects a mismatch as corrupt).
fn decode_record(d: &mut Decoder<'_>, frame: &Bytes) -> Result<DecodedRecord, DecodeError> {
    let length = d.varint("Record.length")?;
    let len = usize::try_from(length)
        .ok()
        .filter(|&n| n <= d.remaining())
        .ok_or_else(|| {
            d.error(
                "Record.length",
                DecodeErrorKind::InvalidLength(i64::from(length)),
            )
        })?;
    let end = d.position() + len;
    // A decoder that ends where the record ends, positioned where it starts, so offsets in
    // errors stay relative to the batch.
    let mut r = Decoder::new(frame.get(..end).unwrap_or_default());
    r.take(d.position(), "Record")?;
    d.take(len, "Record")?;

    r.i8("Record.attributes")?; // unused in v2
    let timestamp_delta = r.varlong("Record.timestamp_delta")?;
    let offset_delta = r.varint("Record.offset_delta")?;
    let key = nullable_bytes(&mut r, frame, "Record.key")?;
    let value = nullable_bytes(&mut r, frame, "Record.value")?;
    let header_count = r.varint("Record.headers")?;
    let header_count = usize::try_from(header_count)
        .ok()
        .filter(|&n| n <= r.remaining() / MIN_HEADER_LEN)
        .ok_or_else(|| {
            r.error(
                "Record.headers",
                DecodeErrorKind::InvalidLength(i64::from(header_count)),
            )
        })?;
    let mut headers = Vec::with_capacity(header_count);
    for _ in 0..header_count {
        headers.push(decode_header(&mut r, frame)?);
    }
    r.finish("Record.length")?;
    Ok(DecodedRecord {
        offset_delta,
        timestamp_delta,
        key,
        value,
        headers,
    })
}

/// Reads one record header: a non-null UTF-8 key and a nullable value.
fn decode_header(r: &mut Decoder<'_>, frame: &Bytes) -> Result<Header, DecodeError> {
    let key_len = r.varint("Header.key")?;
    let key_len = usize::try_from(key_len).map_err(|_| {
        r.error(
            "Header.key",
            DecodeErrorKind::InvalidLength(i64::from(key_len)),
        )
    })?;
    let key = r.take(key_len, "Header.key")?;
    let key = std::str::from_utf8(key)
        .map_err(|_| r.error("Header.key", DecodeErrorKind::InvalidUtf8))?
        .to_owned();
    let value = nullable_bytes(r, frame, "Header.value")?;
    Ok(Header { key, value })
}

/// A zig-zag varint length (-1 for null) and that many bytes, as a slice of `frame` (the
/// buffer `r` reads).
fn nullable_bytes(
    r: &mut Decoder<'_>,
    frame: &Bytes,
    context: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    let len = r.varint(context)?;
    if len == -1 {
        return Ok(None);
    }
    let n = usize::try_from(len)
        .map_err(|_| r.error(context, DecodeErrorKind::InvalidLength(i64::from(len))))?;
    // `take` returns a sub-slice of `frame`'s own memory, which `slice_ref` accepts.
    Ok(Some(frame.slice_ref(r.take(n, context)?)))
}
