//! snappy (codec 2): raw snappy blocks in snappy-java's ("xerial") framing, which is what
//! Java's producer writes (`SnappyFactory` wraps the batch in xerial's `SnappyOutputStream`):
//! a 16-byte header (magic `\x82SNAPPY\0`, version 1, compatible version 1, both int32
//! big-endian), then blocks of at most 32 KiB of input, each an int32 big-endian length and a
//! raw snappy block.
//!
//! What the readers accept, checked in their sources: Java reads through xerial's
//! `SnappyInputStream`, which takes the framed form (and a bare raw block when the magic is
//! absent); librdkafka's `rd_kafka_msgset_reader` looks for the same 8-byte magic and then
//! walks the length-prefixed blocks (`rd_kafka_snappy_java_uncompress`), else reads one raw
//! block. So the framed form is the one both read, and we read both forms too. (The "snappy
//! framing format" of the snappy project, which `snap::write` produces, is a third form
//! neither of them reads.)
//!
//! snap: pure Rust raw snappy, with a bound-checked decoder; the xerial framing is ours.

use snap::raw::{Decoder, Encoder, decompress_len, max_compress_len};

use super::DecompressError;

/// The first 8 bytes of a xerial-framed stream.
const MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// The header: magic, version and compatible version (int32 each, both 1 as snappy-java
/// writes them).
const HEADER_LEN: usize = 16;
const VERSION: i32 = 1;
const COMPATIBLE_VERSION: i32 = 1;
/// Input bytes per block (snappy-java's default block size).
const BLOCK_LEN: usize = 32 * 1024;

fn snappy_error(e: snap::Error) -> DecompressError {
    DecompressError::Corrupt(e.to_string())
}

pub(super) fn compress(input: &[u8]) -> std::io::Result<Vec<u8>> {
    let blocks = input.len().div_ceil(BLOCK_LEN);
    let mut out = Vec::with_capacity(
        HEADER_LEN + blocks * (4 + max_compress_len(BLOCK_LEN.min(input.len()))),
    );
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&COMPATIBLE_VERSION.to_be_bytes());
    let mut encoder = Encoder::new();
    for block in input.chunks(BLOCK_LEN) {
        let length_at = out.len();
        let start = length_at + 4;
        out.resize(start + max_compress_len(block.len()), 0);
        let written = encoder
            .compress(block, &mut out[start..])
            .map_err(std::io::Error::other)?;
        out.truncate(start + written);
        // A block's output is at most `max_compress_len(32 KiB)`, far below i32::MAX.
        out[length_at..start].copy_from_slice(&(written as i32).to_be_bytes());
    }
    Ok(out)
}

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    match input.strip_prefix(&MAGIC) {
        Some(framed) if input.len() >= HEADER_LEN => {
            let mut rest = &framed[HEADER_LEN - MAGIC.len()..];
            while !rest.is_empty() {
                let (length, after) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| DecompressError::Corrupt("truncated block length".into()))?;
                let block = usize::try_from(i32::from_be_bytes(*length))
                    .ok()
                    .and_then(|len| after.get(..len))
                    .ok_or_else(|| DecompressError::Corrupt("bad block length".into()))?;
                rest = &after[block.len()..];
                append_block(block, &mut out, limit)?;
            }
        }
        _ => append_block(input, &mut out, limit)?,
    }
    Ok(out)
}

/// Decompresses one raw block onto `out`. The length the block declares is checked against
/// what is left of `limit` before anything is allocated for it, and the decoder checks that
/// the block fills exactly that length.
fn append_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), DecompressError> {
    let declared = decompress_len(block).map_err(snappy_error)?;
    if declared > limit.saturating_sub(out.len()) {
        return Err(DecompressError::TooLarge { limit });
    }
    let start = out.len();
    out.resize(start + declared, 0);
    let written = Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(snappy_error)?;
    if written != declared {
        return Err(DecompressError::Corrupt(format!(
            "block declared {declared} bytes and held {written}"
        )));
    }
    Ok(())
}
