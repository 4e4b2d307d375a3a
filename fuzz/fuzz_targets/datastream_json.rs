//! `datastream-json`: the fuzz input is a stream of messages (see `harness::split`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::check_values("datastream-json", data));
