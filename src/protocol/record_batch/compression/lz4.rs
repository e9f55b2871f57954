//! lz4 (codec 3): one standard LZ4 frame (KIP-57) with the settings Java's
//! `KafkaLZ4BlockOutputStream` uses: 64 KiB independent blocks, no block or content checksum,
//! no content size, and a header checksum computed over the frame descriptor only (the bug
//! KIP-57 fixed: pre-0.10 Kafka hashed the magic too; magic-2 readers check the right one).
//! Java's reader decompresses each block on its own, so blocks must be independent.
//!
//! lz4_flex: pure Rust, with the frame format. It has only the fast compressor, so
//! `compression.lz4.level` (which picks lz4-java's high-compression mode at 3+) does not apply.

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
