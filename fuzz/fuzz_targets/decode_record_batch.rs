//! libFuzzer target: the RecordBatch v2 decoder on arbitrary bytes (see
//! `fuzz/fuzz_logic/record_batch.rs`). Run with `cargo +nightly fuzz run decode_record_batch`
//! from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../fuzz_logic/record_batch.rs"]
mod logic;

fuzz_target!(|data: &[u8]| logic::decode_record_batch(data));
