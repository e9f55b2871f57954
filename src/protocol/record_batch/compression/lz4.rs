//! lz4 (codec 3): one standard LZ4 frame (KIP-57) with the settings Java's
//! `KafkaLZ4BlockOutputStream` uses: 64 KiB independent blocks, no block or content checksum,
//! no content size, and a header checksum computed over the frame descriptor only (the bug
//! KIP-57 fixed: pre-0.10 Kafka hashed the magic too; magic-2 readers check the right one).
//! Java's reader decompresses each block on its own, so blocks must be independent.
//!
//! Java's reader (`KafkaLZ4BlockInputStream`, checked in its source) rejects dependent blocks
//! and block sizes outside 64 KiB–4 MiB, and skips a content checksum without verifying it.
//!
//! lz4_flex: pure Rust, with the frame format. It has only the fast compressor: what Java uses
//! at the default `compression.lz4.level` (9; `Lz4BlockOutputStream` switches to lz4-java's
//! high-compression mode only for other levels), so other levels are not applied here.

use std::io::Write;

use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};

use super::{DecompressError, bounded};

pub(super) fn compress(input: &[u8]) -> std::io::Result<Vec<u8>> {
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent)
        .block_checksums(false)
        .content_checksum(false);
    let mut encoder = FrameEncoder::with_frame_info(info, Vec::with_capacity(input.len() / 2));
    encoder.write_all(input)?;
    encoder.finish().map_err(std::io::Error::other)
}

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    bounded(FrameDecoder::new(input), limit)
}
