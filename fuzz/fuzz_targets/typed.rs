//! Typed mode (`docs/typed.md`): the fuzz input's header picks a format, one schema or one per
//! table, and a type for each of a fixed list of column names; the rest is the messages (see
//! `harness::check_typed`). Every conversion is reached from every format's text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::check_typed(data));
