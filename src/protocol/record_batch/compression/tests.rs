use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

/// JSON-like text: compressible, but not a run of one byte.
fn json_like(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    while out.len() < len {
        let id: u32 = rng.random_range(0..100_000);
        let name = ["alpha", "beta", "gamma", "delta"][rng.random_range(0..4)];
        out.extend_from_slice(format!(r#"{{"id":{id},"name":"{name}","ok":true}},"#).as_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn every_codec_round_trips_compressible_and_random_data() {
    let mut rng = SmallRng::seed_from_u64(12);
    for compression in Compression::every_available() {
        for len in [
            1usize,
            100,
            32 * 1024,
            32 * 1024 + 1,
            64 * 1024,
            64 * 1024 + 7,
            128 * 1024,
            300_000,
        ] {
            let text = json_like(&mut rng, len);
            let noise: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            for input in [text, noise] {
                let compressed = compress(compression, &input).expect("compresses");
                let back = decompress(compression.codec(), &compressed, input.len())
                    .unwrap_or_else(|e| panic!("{compression:?} len {len}: {e:?}"));
                assert_eq!(back, input, "{compression:?} len {len}");
            }
        }
    }
}

#[test]
fn compressible_data_shrinks() {
    let input = json_like(&mut SmallRng::seed_from_u64(1), 64 * 1024);
    for compression in Compression::every_available() {
        let compressed = compress(compression, &input).expect("compresses");
        assert!(
            compressed.len() * 2 < input.len(),
            "{compression:?}: {} of {}",
            compressed.len(),
            input.len()
        );
    }
}

#[test]
fn output_past_the_limit_is_too_large_for_every_codec() {
    // 4 MiB of zeros compresses to a few KiB: a small bomb against a 1 MiB limit.
    let zeros = vec![0u8; 4 << 20];
    let limit = 1 << 20;
    for compression in Compression::every_available() {
        let bomb = compress(compression, &zeros).expect("compresses");
        assert!(bomb.len() < 300 * 1024, "{compression:?}: {}", bomb.len());
        assert_eq!(
            decompress(compression.codec(), &bomb, limit),
            Err(DecompressError::TooLarge { limit }),
            "{compression:?}"
        );
        // Exactly at the limit is fine.
        let back = decompress(compression.codec(), &bomb, zeros.len()).expect("at the limit");
        assert_eq!(back.len(), zeros.len());
    }
}

#[cfg(feature = "snappy")]
#[test]
fn a_snappy_block_claiming_a_huge_length_is_refused_before_allocating() {
    // A raw block whose length varint says 4 GiB - 1, then nothing.
    let claim = [0xFF, 0xFF, 0xFF, 0xFF, 0x0F];
    assert_eq!(
        decompress(Codec::Snappy, &claim, 1 << 20),
        Err(DecompressError::TooLarge { limit: 1 << 20 })
    );
    // The same claim inside xerial framing.
    let mut framed = compress(Compression::Snappy, b"x").expect("compresses");
    framed.truncate(16);
    framed.extend_from_slice(&(claim.len() as i32).to_be_bytes());
    framed.extend_from_slice(&claim);
    assert_eq!(
        decompress(Codec::Snappy, &framed, 1 << 20),
        Err(DecompressError::TooLarge { limit: 1 << 20 })
    );
}

#[cfg(feature = "snappy")]
#[test]
fn snappy_is_xerial_framed_and_raw_blocks_are_read_too() {
    let input = json_like(&mut SmallRng::seed_from_u64(2), 70_000);
    let framed = compress(Compression::Snappy, &input).expect("compresses");
    assert_eq!(&framed[..8], b"\x82SNAPPY\0");
    assert_eq!(&framed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
    // 70,000 bytes are three 32 KiB blocks; the first block's length follows the header.
    let first = i32::from_be_bytes(framed[16..20].try_into().unwrap()) as usize;
    let first_block = &framed[20..20 + first];
    assert_eq!(snap::raw::decompress_len(first_block).unwrap(), 32 * 1024);
    // An unframed raw block (what an old librdkafka producer writes) decodes as well.
    let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
    assert_eq!(decompress(Codec::Snappy, &raw, 1 << 20).unwrap(), input);
}

#[cfg(feature = "lz4")]
#[test]
fn lz4_frames_have_kafkas_descriptor() {
    let framed = compress(Compression::Lz4, &[7u8; 1000]).expect("compresses");
    // Magic 0x184D2204 little-endian; FLG: version 01, independent blocks, no checksums, no
    // content size; BD: 64 KiB blocks (KafkaLZ4BlockOutputStream's settings).
    assert_eq!(&framed[..4], &[0x04, 0x22, 0x4D, 0x18]);
    assert_eq!(framed[4], 0b0110_0000);
    assert_eq!(framed[5], 0b0100_0000);
}

/// The frame header is a constant (its checksum included): the one lz4_flex's frame encoder
/// writes for the same settings.
#[cfg(feature = "lz4")]
#[test]
fn the_lz4_frame_header_is_what_a_frame_encoder_writes() {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    use std::io::Write;
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent)
        .block_checksums(false)
        .content_checksum(false);
    let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
    encoder.write_all(b"records").unwrap();
    let reference = encoder.finish().unwrap();
    assert_eq!(reference[..7], lz4::FRAME_HEADER);
    let ours = compress(Compression::Lz4, b"records").unwrap();
    assert_eq!(ours[..7], lz4::FRAME_HEADER);
    // Each frame ends with the EndMark, an empty block.
    assert_eq!(ours[ours.len() - 4..], [0, 0, 0, 0]);
}

#[test]
fn garbage_is_corrupt_not_a_panic() {
    let mut rng = SmallRng::seed_from_u64(3);
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        if !codec.is_available() {
            continue;
        }
        for len in 0..200 {
            let garbage: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            // Any answer but a panic; most are `Corrupt`.
            let _ = decompress(codec, &garbage, 1 << 16);
        }
    }
}
