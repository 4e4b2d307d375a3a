//! `datahub-tuple`: the fuzz input is a recipe for a record batch (`harness::records`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::records::check_records(data));
