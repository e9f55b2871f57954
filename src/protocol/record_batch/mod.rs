//! RecordBatch v2 (magic 2, KIP-98): the on-wire and on-disk unit of records in Produce
//! requests and Fetch responses.
//!
//! A batch is a 61-byte header followed by its records:
//!
//! | bytes  | field                | notes                                                   |
//! |--------|----------------------|---------------------------------------------------------|
//! | 0..8   | BaseOffset i64       | 0 from a producer; the broker assigns the real one       |
//! | 8..12  | Length i32           | bytes from PartitionLeaderEpoch to the end of the batch  |
//! | 12..16 | PartitionLeaderEpoch | -1 from a producer                                      |
//! | 16     | Magic i8             | 2                                                       |
//! | 17..21 | CRC u32              | CRC-32C of bytes 21.. (Attributes to the end)            |
//! | 21..23 | Attributes i16       | bits 0–2 compression, 3 timestamp type, 4 transactional, 5 control, 6 delete horizon (KIP-534) |
//! | 23..27 | LastOffsetDelta i32  |                                                         |
//! | 27..35 | BaseTimestamp i64    |                                                         |
//! | 35..43 | MaxTimestamp i64     |                                                         |
//! | 43..51 | ProducerId i64       | -1 when not idempotent                                  |
//! | 51..53 | ProducerEpoch i16    | -1 when not idempotent                                  |
//! | 53..57 | BaseSequence i32     | -1 when not idempotent                                  |
//! | 57..61 | RecordsCount i32     |                                                         |
//!
//! Each record is `Length varint, Attributes i8, TimestampDelta varlong, OffsetDelta varint,
//! KeyLength varint (-1 = null), Key, ValueLength varint (-1 = null), Value, HeaderCount varint,
//! [HeaderKeyLength varint, HeaderKey, HeaderValueLength varint (-1 = null), HeaderValue]`,
//! all varints zig-zag encoded.
//!
//! The encoder ([`BatchBuilder`] → [`SealedBatch`]) is the producer's per-record hot path: a
//! record is encoded straight into the open batch's body, and the CRC of the body is computed
//! once at [`BatchBuilder::seal`]. Producer id, epoch and base sequence are written only when the
//! batch is dispatched ([`SealedBatch::stamp`], rules P1/P2); since the CRC covers those
//! header fields, stamping combines the CRC of the 40 header bytes with the body's CRC (a
//! CRC-32C combine, as `crc32c_combine` computes it but faster: see `crc.rs`) instead of
//! rescanning the body.
//!
//! Compression ([`compression`]) applies to the records only and happens at seal, before any
//! stamp: the compressed records are the body whose CRC is combined at every stamp.
//!
//! The decoder ([`decode_batches`]) reads what a Fetch response carries, decompressing with a
//! hard bound on the decompressed size.

mod builder;
pub mod compression;
mod crc;
mod decode;
#[cfg(any(test, feature = "internals"))]
mod markers;
#[cfg(test)]
mod tests;

pub use builder::{BatchBuilder, SealedBatch};
pub use compression::{Codec, Compression};
pub use decode::{ControlRecordKind, TimestampType, decode_shared_batch};
// The rest of the codec's surface serves the crate's tests, fuzz targets and simulation (they
// decode what the producer wrote, and write the markers a broker would).
#[cfg(feature = "internals")]
pub use decode::DecodedRecord;
#[cfg(any(test, feature = "internals"))]
pub use decode::{
    ControlRecord, DEFAULT_MAX_DECOMPRESSED_LEN, DecodedBatch, decode_batch, decode_batch_bounded,
    decode_batches,
};
#[cfg(any(test, feature = "internals"))]
pub use markers::encode_control_batch;

/// A record header: a UTF-8 key (Kafka's `String`, never null) and a nullable value.
/// Keys may repeat within one record; order is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header key.
    pub key: String,
    /// The header value; `None` is encoded as length -1.
    pub value: Option<bytes::Bytes>,
}

/// Size of the fixed batch header, from BaseOffset to RecordsCount.
pub const RECORD_BATCH_HEADER_LEN: usize = 61;

/// The only batch format this crate reads and writes (magic 0 and 1 are the pre-0.11 message
/// sets, which Produce v3+ does not accept).
pub const MAGIC: i8 = 2;

/// ProducerId of a batch from a producer that is neither idempotent nor transactional.
pub const NO_PRODUCER_ID: i64 = -1;
/// ProducerEpoch of a batch from a producer that is neither idempotent nor transactional.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// BaseSequence of a non-idempotent batch, and of control batches.
pub const NO_SEQUENCE: i32 = -1;
/// PartitionLeaderEpoch as a producer sends it (the broker fills in the leader's epoch).
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// MaxTimestamp of a batch with no records (Java's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// Bytes before the part that `Length` counts: BaseOffset and Length (Java's `LOG_OVERHEAD`).
const LOG_OVERHEAD: usize = 12;
/// Byte offsets of header fields.
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC covers the batch from here (Attributes) to its end.
const CRC_FROM: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;

/// Attributes bits 0–2: the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
const COMPRESSION_MASK: i16 = 0x07;
/// Attributes bit 3: the record timestamps are the broker's LogAppendTime (KIP-32).
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
/// Attributes bit 4: the batch belongs to a transaction (KIP-98).
const TRANSACTIONAL: i16 = 0x10;
/// Attributes bit 5: the batch holds a control record (transaction marker, KIP-98).
const CONTROL: i16 = 0x20;

/// The sequence number `increment` places after `sequence`, wrapping from `i32::MAX` to 0 as
/// the broker does (Java's `DefaultRecordBatch.incrementSequence`; rule P3).
///
/// Sequences live in `0..=i32::MAX`; a negative `increment` steps back with the same wrap, so
/// `increment_sequence(0, -1) == i32::MAX`.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    const SEQUENCE_SPACE: i64 = i32::MAX as i64 + 1;
    // The result is in 0..=i32::MAX, so the cast is lossless.
    (i64::from(sequence) + i64::from(increment)).rem_euclid(SEQUENCE_SPACE) as i32
}

/// The sequence of the record at `offset_delta` in a batch starting at `base_sequence`, with
/// the broker's wrap; a batch without sequence ([`NO_SEQUENCE`]) has none for any record.
fn sequence_at(base_sequence: i32, offset_delta: i32) -> i32 {
    if base_sequence == NO_SEQUENCE {
        NO_SEQUENCE
    } else {
        increment_sequence(base_sequence, offset_delta)
    }
}
