//! gzip (codec 1): a gzip stream (RFC 1952) of the records, as Java's `GZIPOutputStream`
//! writes it. Read with a multi-member decoder, as Java's `GZIPInputStream` reads
//! concatenated members.
//!
//! flate2 on zlib-rs, the pure-Rust port of zlib: no C zlib to build, link or keep patched.
//! At Kafka's default level (6) it takes about half the instructions of flate2's other
//! pure-Rust backend (miniz_oxide) for a batch within 1% of its size (benches/compress.rs).
//! libdeflate's one-shot compressor, made for sealing one buffer at once, was measured in the
//! same bench on bench-peers' 1 KiB JSON-like records: at level 6 it sealed 1.5x as fast for
//! 3.8% more bytes (ratio 0.257 against 0.248), at level 7 0.7x as fast for 1.8% fewer; at the
//! same size it is no faster, so it is not worth a C dependency here.

use std::io::Write;

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

use super::{DecompressError, bounded};

pub(super) fn compress(input: &[u8], level: u32) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(
        Vec::with_capacity(input.len() / 2),
        flate2::Compression::new(level),
    );
    encoder.write_all(input)?;
    encoder.finish()
}

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    bounded(MultiGzDecoder::new(input), limit)
}
