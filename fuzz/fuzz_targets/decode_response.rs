//! libFuzzer target: every response decoder on arbitrary bytes (see
//! `fuzz/fuzz_logic/response.rs`). Run with `cargo +nightly fuzz run decode_response` from the
//! repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../fuzz_logic/response.rs"]
mod logic;

fuzz_target!(|data: &[u8]| logic::decode_response(data));
