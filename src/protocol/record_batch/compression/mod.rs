//! The four codecs a RecordBatch's records section can be compressed with (Attributes bits
//! 0–2), in the wire formats Kafka's own clients write and read.
//!
//! Only the records section is compressed; the 61-byte header stays as it is, so a sealed batch
//! is still stamped by rewriting its header and combining CRCs (rule P1).
//!
//! Decompression is bounded: every decoder is read through a reader that stops one byte past
//! the caller's limit, and no size a hostile batch declares is trusted for an allocation, so a
//! decompression bomb is a [`DecompressError::TooLarge`], never an out-of-memory abort.
//!
//! Each codec is behind the cargo feature of the same name (all on by default); a build without
//! one cannot compress with it and reports its batches as unsupported.

#[cfg(feature = "gzip")]
mod gzip;
#[cfg(feature = "lz4")]
mod lz4;
#[cfg(feature = "snappy")]
mod snappy;
#[cfg(feature = "zstd")]
mod zstd;

use std::fmt;
use std::io::Read;

/// A compression codec as Attributes bits 0–2 name it. Non-exhaustive: the three bits leave
/// room for codecs Kafka has not defined yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// 0: the records are stored as they are.
    None,
    /// 1: a gzip stream (RFC 1952).
    Gzip,
    /// 2: snappy blocks in snappy-java's ("xerial") framing.
    Snappy,
    /// 3: an LZ4 frame (KIP-57).
    Lz4,
    /// 4: a zstd frame (KIP-110; needs Produce v7+).
    Zstd,
}

impl Codec {
    /// The codec of Attributes bits 0–2 (`None` for the unassigned values 5–7).
    pub fn from_id(id: u8) -> Option<Codec> {
        Some(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            _ => return None,
        })
    }

    /// The value of Attributes bits 0–2 for this codec.
    pub fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (`compression.type`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// Whether this build can compress and decompress with the codec (its cargo feature is on).
    pub fn is_available(self) -> bool {
        match self {
            Codec::None => true,
            Codec::Gzip => cfg!(feature = "gzip"),
            Codec::Snappy => cfg!(feature = "snappy"),
            Codec::Lz4 => cfg!(feature = "lz4"),
            Codec::Zstd => cfg!(feature = "zstd"),
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a producer compresses its batches: a codec and, where the codec has one, a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip at a zlib level, 1 (fastest) to 9 (smallest).
    Gzip {
        /// The zlib level.
        level: u32,
    },
    /// snappy (no levels).
    Snappy,
    /// lz4 with the fast compressor (see [`Codec::Lz4`]).
    Lz4,
    /// zstd at a level (negative: faster than 1; up to 22).
    Zstd {
        /// The zstd level.
        level: i32,
    },
}

impl Compression {
    /// The codec Attributes will name.
    pub fn codec(self) -> Codec {
        match self {
            Compression::None => Codec::None,
            Compression::Gzip { .. } => Codec::Gzip,
            Compression::Snappy => Codec::Snappy,
            Compression::Lz4 => Codec::Lz4,
            Compression::Zstd { .. } => Codec::Zstd,
        }
    }
}

/// Why a records section could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecompressError {
    /// It decompresses to more than the limit (a decompression bomb, or a batch larger than
    /// the reader accepts).
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The compressed data is corrupt or uses a feature of the format Kafka does not.
    Corrupt(String),
    /// This build does not include the codec (its cargo feature is off).
    Unavailable,
}

impl From<std::io::Error> for DecompressError {
    fn from(e: std::io::Error) -> Self {
        DecompressError::Corrupt(e.to_string())
    }
}

/// `input` compressed with `compression`. On an error (a level the codec refuses, a codec
/// this build lacks) the caller stores the records uncompressed, which every reader accepts.
pub(crate) fn compress(compression: Compression, input: &[u8]) -> std::io::Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip { level } => gzip::compress(input, level),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::compress(input),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4::compress(input),
        #[cfg(feature = "zstd")]
        Compression::Zstd { level } => zstd::compress(input, level),
        #[allow(unreachable_patterns)] // reachable when a codec's feature is off
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("built without the {} feature", compression.codec()),
        )),
    }
}

/// Decompresses a records section written with `codec`, refusing to produce more than `limit`
/// bytes.
pub(crate) fn decompress(
    codec: Codec,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    match codec {
        Codec::None => bounded(input, limit),
        #[cfg(feature = "gzip")]
        Codec::Gzip => gzip::decompress(input, limit),
        #[cfg(feature = "snappy")]
        Codec::Snappy => snappy::decompress(input, limit),
        #[cfg(feature = "lz4")]
        Codec::Lz4 => lz4::decompress(input, limit),
        #[cfg(feature = "zstd")]
        Codec::Zstd => zstd::decompress(input, limit),
        #[allow(unreachable_patterns)] // reachable when a codec's feature is off
        _ => Err(DecompressError::Unavailable),
    }
}

/// Reads `reader` to its end, keeping at most `limit` bytes: the reader is asked for one byte
/// more than the limit, and getting it means the data is too large. Memory grows with what was
/// actually decompressed (at most twice the limit while the buffer doubles), whatever sizes the
/// compressed data declares.
fn bounded(reader: impl Read, limit: usize) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(cap).read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(DecompressError::TooLarge { limit });
    }
    Ok(out)
}

#[cfg(test)]
impl Compression {
    /// Every codec this build has, at Kafka's default levels (for the codec tests).
    pub(crate) fn every_available() -> Vec<Compression> {
        [
            Compression::Gzip { level: 6 },
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd { level: 3 },
        ]
        .into_iter()
        .filter(|c| c.codec().is_available())
        .collect()
    }
}

#[cfg(test)]
mod tests;
