//! lz4 (codec 3): one standard LZ4 frame (KIP-57) with the settings Java's
//! `KafkaLZ4BlockOutputStream` uses: 64 KiB independent blocks, no block or content checksum,
//! no content size, and a header checksum computed over the frame descriptor only (the bug
//! KIP-57 fixed: pre-0.10 Kafka hashed the magic too; magic-2 readers check the right one).
//! Java's reader decompresses each block on its own, so blocks must be independent.
//!
//! Java's reader (`KafkaLZ4BlockInputStream`, checked in its source) rejects dependent blocks
//! and block sizes outside 64 KiB–4 MiB, and skips a content checksum without verifying it.
//!
//! Compressed with the reference liblz4's block compressor (the `lz4` crate, built from source
//! with `cc` as zstd is), the one Java's lz4-java and librdkafka use: on the bench-peers payload
//! it takes 40% fewer instructions than lz4_flex's for a batch about 6% larger, the size those
//! peers' batches have (benches/compress.rs). The fast
//! compressor only: what Java uses at the default `compression.lz4.level` (9;
//! `Lz4BlockOutputStream` switches to lz4-java's high-compression mode only for other levels),
//! so other levels are not applied here. The frame around the blocks is written here; its
//! fields are fixed, so its header (with its checksum) is a constant, checked against
//! lz4_flex's frame encoder in the tests. Read with lz4_flex's pure-Rust frame decoder (safe
//! decoding of untrusted input).

use std::cell::RefCell;

use lz4_flex::frame::FrameDecoder;

use super::{DecompressError, bounded};

/// Magic 0x184D2204 (little-endian); FLG 0x60: version 1, independent blocks, no block
/// checksum, no content size, no content checksum, no dictionary; BD 0x40: 64 KiB blocks at
/// most; HC: the second byte of xxHash32 (seed 0) of FLG and BD.
pub(super) const FRAME_HEADER: [u8; 7] = [0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82];
/// Input bytes per block: the frame's maximum.
const BLOCK_LEN: usize = 64 * 1024;
/// The block size's high bit: the block is stored uncompressed.
const UNCOMPRESSED: u32 = 1 << 31;

thread_local! {
    /// This thread's output buffer for one block, zeroed once: the compressor writes into an
    /// initialised slice, and zeroing room for each block in the batch's own buffer was 18% of
    /// a compression worker's instructions (callgrind, examples/perf).
    static BLOCK_OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn compress(input: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() / 2);
    out.extend_from_slice(&FRAME_HEADER);
    BLOCK_OUT.with(|cell| {
        let mut block_out = cell.borrow_mut();
        let bound = ::lz4::block::compress_bound(BLOCK_LEN)?;
        if block_out.len() < bound {
            block_out.resize(bound, 0);
        }
        for block in input.chunks(BLOCK_LEN) {
            let written = ::lz4::block::compress_to_buffer(block, None, false, &mut block_out)?;
            // Blocks are at most 64 KiB: every size fits the 31 bits the format gives it.
            if written < block.len() {
                out.extend_from_slice(&(written as u32).to_le_bytes());
                out.extend_from_slice(&block_out[..written]);
            } else {
                out.extend_from_slice(&(block.len() as u32 | UNCOMPRESSED).to_le_bytes());
                out.extend_from_slice(block);
            }
        }
        Ok::<_, std::io::Error>(())
    })?;
    // EndMark: a block size of 0.
    out.extend_from_slice(&0u32.to_le_bytes());
    Ok(out)
}

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    bounded(FrameDecoder::new(input), limit)
}
