//! Strict JSON for `datahub-blob`, `tdsql-json`, `debezium-json`, `datastream-json` and the
//! Avro schema reader ([`crate::avro`]): one reusable parser that checks a message whole and
//! records it as a flat tape of spans into the input. Decoders look fields up on the tape
//! and copy values from the input straight into the Arrow builders: no tree of owned
//! values, and no allocation per message once the tape has grown to the size of the
//! largest message.
//!
//! The rules are those of `docs/formats/datahub-blob.md` ("JSON accepted"), which the
//! Python fallback follows too:
//! - RFC 8259 read strictly: strict UTF-8 (checked once, whole), no byte order mark, JSON
//!   whitespace only, no comments, trailing commas, `NaN` or control characters in strings;
//! - a `\u` escape of a surrogate must be a high-low pair: a lone surrogate is an error,
//!   in every string and key, read or not;
//! - at most `max_json_depth` levels of objects and arrays ([`Limits`], 128 unless
//!   [`Parser::limited`] says otherwise), counted here (the parser is a loop with an
//!   explicit stack: hostile nesting cannot recurse);
//! - number tokens are kept as the exact text sent, never converted;
//! - within an object the first of duplicate keys wins ([`Value::members`] skips the later
//!   ones; [`Value::get`] finds the first).
//!
//! Why our own scanner rather than serde_json, simd-json or sonic-rs: no one of them gives
//! all of the above at once (number tokens without converting, first-wins duplicates,
//! surrogate checks in skipped values, a depth limit of our choosing), and the tape of
//! spans lets a decoder write values without building a document first.
//! `tools/json-choice/README.md` has the measurements.

use std::borrow::Cow;
use std::collections::HashSet;

pub use crate::error::JsonError;
use crate::limits::{grouped, Limits, OverLimit};

/// Members an object may have before duplicate keys are found with a hash set instead of
/// comparing each key with the ones before it.
const LINEAR_DEDUP: u32 = 32;

/// Values a parser remembers ([`Parser::remembering`]): one per table of a stream, mostly.
const REMEMBERED: usize = 8;

/// The largest value a parser remembers, in bytes.
const MAX_REMEMBERED: usize = 16 << 10;

type Result<T> = std::result::Result<T, JsonError>;

// The parts, each about one thing; the errors are [`crate::error`]'s (`JsonError`), below
// every module that raises them.
mod bytes;
pub mod extended;
pub mod field;
mod keys;
mod scanner;
mod strings;
mod tape;
#[cfg(test)]
mod tests;
mod value;

pub use keys::Name;
pub use tape::Parser;
pub use value::{slots, Items, Kind, Members, Str, Value};

use bytes::*;
use keys::*;
use scanner::*;
use strings::*;
use tape::*;
