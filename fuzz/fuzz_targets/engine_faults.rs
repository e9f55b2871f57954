//! libFuzzer target: the fuzzer's bytes choose the workload, the configuration and the fault
//! schedule of one simulation run (`exactly::sim::run_fuzz`); the simulation's invariant
//! checkers are the oracle. A violation panics with the failure. Run with
//! `cargo +nightly fuzz run engine_faults` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = exactly::sim::run_fuzz(data) {
        panic!("invariant violated: {failure:?}");
    }
});
