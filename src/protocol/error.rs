//! The one error every decoder in `crate::protocol` returns.

use thiserror::Error;

/// Why a piece of wire data could not be decoded, with what was being decoded and where.
///
/// Decoders never panic on received data and never allocate more than the input could
/// justify: a hostile length is a `DecodeError`, not an abort.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cannot decode {context} at byte {offset}: {kind}")]
pub struct DecodeError {
    /// What was being decoded, e.g. `"ProduceResponse.responses"` or `"RecordBatch.crc"`.
    pub context: &'static str,
    /// Byte offset into the buffer the decoder was given.
    pub offset: usize,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// The kinds of [`DecodeError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended before the value did.
    #[error("needed {needed} more bytes, {remaining} left")]
    UnexpectedEof {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length prefix that is negative (where null is not allowed) or larger than the input.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A varint longer than its type allows.
    #[error("varint too long")]
    VarintOverflow,
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A version of a message this crate does not implement.
    #[error("unsupported version {version} of API {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// A RecordBatch whose CRC-32C does not match its contents.
    #[error("CRC mismatch: header says {expected:#010x}, contents give {actual:#010x}")]
    CrcMismatch {
        /// The CRC stored in the batch header.
        expected: u32,
        /// The CRC computed over the batch.
        actual: u32,
    },
    /// A RecordBatch compressed with a codec that does not exist (Attributes 5–7) or that this
    /// build leaves out (its cargo feature is off).
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(u8),
    /// A compressed RecordBatch whose records decompress to more than the decoder's limit: a
    /// decompression bomb, or a batch larger than the reader accepts.
    #[error("records decompress to more than {limit} bytes")]
    DecompressedTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A compressed RecordBatch whose records are not valid data of its codec.
    #[error("corrupt {codec} data: {reason}")]
    CorruptCompressed {
        /// The codec.
        codec: crate::protocol::record_batch::compression::Codec,
        /// What the decompressor said.
        reason: String,
    },
    /// A RecordBatch with a magic byte other than 2.
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// A value outside the range the field allows.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// Bytes left over after a value that should have filled its frame.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    /// What a generated (`kafka-protocol`) decoder refused, in its words.
    #[error("{0}")]
    Generated(String),
}

/// A request that cannot be written at the version negotiated with the broker: a field is set
/// that the version does not carry (Java's client fails the same way, with
/// `UnsupportedVersionException`, rather than dropping the field).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cannot encode API {api_key} v{version}: {reason}")]
pub struct EncodeError {
    /// The API key of the request.
    pub api_key: i16,
    /// The version it was written at.
    pub version: i16,
    /// What the encoder refused.
    pub reason: String,
}
