//! zstd (codec 4, KIP-110): one zstd frame, as zstd-jni and librdkafka write it. Brokers take
//! it from Produce v7 on (Kafka 2.1); the driver refuses to send it in an older version.
//!
//! The `zstd` crate binds the reference libzstd, built from source with `cc`: Kafka's peers use
//! the same library, and no pure-Rust zstd compresses at Kafka's default level 3 yet.

use std::cell::RefCell;

use ::zstd::bulk::Compressor;

use super::{DecompressError, bounded};

thread_local! {
    /// This thread's compression context and the level it was made for: a zstd context holds
    /// its match tables (about 1 MiB at level 3), which would otherwise be allocated and
    /// initialised for every batch.
    static COMPRESSOR: RefCell<Option<(i32, Compressor<'static>)>> = const { RefCell::new(None) };
}

/// The largest window a frame may make the decoder allocate, as a power of two: 16 MiB. The
/// format allows up to 2 GiB (libzstd accepts 128 MiB by default), which a hostile frame could
/// declare to make us allocate it; zstd's level table uses at most 8 MiB windows up to level
/// 19, and a batch is smaller than that anyway at every level.
const WINDOW_LOG_MAX: u32 = 24;

pub(super) fn compress(input: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    // A frame is at most `compress_bound` bytes; with that capacity the single-shot compressor
    // writes straight into the buffer.
    let mut out = Vec::with_capacity(::zstd::zstd_safe::compress_bound(input.len()));
    COMPRESSOR.with(|cell| {
        let mut cached = cell.borrow_mut();
        let compressor = match &mut *cached {
            Some((cached_level, compressor)) if *cached_level == level => compressor,
            slot => &mut slot.insert((level, Compressor::new(level)?)).1,
        };
        compressor.compress_to_buffer(input, &mut out)
    })?;
    Ok(out)
}

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
    let mut decoder = ::zstd::stream::read::Decoder::with_buffer(input)?;
    decoder.window_log_max(WINDOW_LOG_MAX)?;
    bounded(decoder, limit)
}
