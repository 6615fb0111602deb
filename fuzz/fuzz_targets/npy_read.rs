//! The .npy reader on arbitrary bytes: an error or an array, never a panic or an abort.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    logot_fuzz::bodies::npy_read(data);
});
