//! The decoder every format shares: the input loop, the accounting across calls and the
//! panic boundary around each call; the [`Sink`] a format writes into is [`crate::sink`]'s.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};

use crate::error::{Error, Result};
use crate::formats::{self, FormatDecoder, Options};
use crate::input::Values;
use crate::limits::{grouped, OverLimit};
use crate::sink::panic_text;
pub use crate::sink::{Mode, Output, Sink, Stats};
use crate::typed::TypedSpec;

/// What `takes` says in [`Error::InputKind`]: a format of binary values …
const BINARY_VALUES: &str = "binary values (an array of messages)";
/// … and a format of records.
const RECORD_BATCHES: &str = "record batches (a pyarrow RecordBatch or Table of records)";

/// The test hook of the panic boundary: the ordinal in `CDC_DECODE_TEST_PANIC_AT`, read once
/// per process. Decoding the message with that ordinal panics, so tests can show the
/// boundary holds without a real bug. Not an API: unset, it costs one comparison a message.
fn panic_at_from_env() -> Option<i64> {
    static PANIC_AT: OnceLock<Option<i64>> = OnceLock::new();
    *PANIC_AT.get_or_init(|| {
        std::env::var("CDC_DECODE_TEST_PANIC_AT")
            .ok()
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Panics when `ordinal` is the test hook's (see [`panic_at_from_env`]).
#[inline]
fn test_hook(panic_at: Option<i64>, ordinal: i64) {
    if panic_at == Some(ordinal) {
        panic!("test hook CDC_DECODE_TEST_PANIC_AT={ordinal}");
    }
}

/// A stateful decoder for one stream of one format.
pub struct Decoder {
    format: Box<dyn FormatDecoder>,
    name: &'static str,
    mode: Mode,
    stats: Stats,
    typed: Option<Arc<TypedSpec>>,
    /// The schema pass (`crate::schemas`) instead of events.
    schemas: bool,
    /// `Limits::max_message_bytes`, checked here for every format of binary values.
    max_message_bytes: usize,
    /// The panic boundary's test hook: the ordinal whose decoding panics.
    panic_at: Option<i64>,
}

impl Decoder {
    /// A decoder for a format (one of [`formats::FORMATS`]) in a mode.
    pub fn new(format: &str, mode: Mode) -> Result<Self> {
        Self::with_options(format, mode, &Options::default())
    }

    /// A decoder with per-format options ([`Options`]).
    pub fn with_options(format: &str, mode: Mode, options: &Options) -> Result<Self> {
        crate::alloc::tune_allocator();
        let (name, format) = formats::new_decoder(format, options)?;
        if options.schemas && options.typed.is_some() {
            return Err(Error::Schema(
                "the schema pass reads the wire's schemas: give it no schema or tables".into(),
            ));
        }
        Ok(Self {
            format,
            name,
            mode,
            stats: Stats::default(),
            typed: options.typed.clone(),
            schemas: options.schemas,
            max_message_bytes: options.limits.max_message_bytes,
            panic_at: panic_at_from_env(),
        })
    }

    /// A sink for one call: of events, or of the schema pass.
    fn sink(&self) -> Sink {
        if self.schemas {
            Sink::for_schemas(self.name, self.mode)
        } else {
            Sink::new(self.name, self.mode, self.typed.clone())
        }
    }

    /// Decodes one array of messages. `keys`, when given, are the multi-part reassembly keys,
    /// one per value. With `last`, this is the end of input too (see [`Decoder::finish`]):
    /// the one-shot `decode` in a single batch.
    pub fn decode(
        &mut self,
        values: &ArrayRef,
        keys: Option<&StringArray>,
        last: bool,
    ) -> Result<Output> {
        self.decode_with_old_keys(values, keys, None, last)
    }

    /// [`Decoder::decode`], with each message's old key where it has one: the value of
    /// Debezium's `__debezium.oldkey` Kafka header (binary or text, null where the message
    /// has none), one per value.
    pub fn decode_with_old_keys(
        &mut self,
        values: &ArrayRef,
        keys: Option<&StringArray>,
        old_keys: Option<&ArrayRef>,
        last: bool,
    ) -> Result<Output> {
        if self.format.takes_records() {
            return Err(Error::InputKind {
                format: self.name,
                takes: RECORD_BATCHES,
                got: "an array of binary values",
            });
        }
        let input = Values::new(values)?;
        if let Some(keys) = keys {
            if keys.len() != input.len() {
                return Err(Error::Keys {
                    values: input.len(),
                    keys: format!("{} keys", keys.len()),
                });
            }
        }
        let old_keys = match old_keys {
            Some(array) => {
                let old = Values::new(array)?;
                if old.len() != input.len() {
                    return Err(Error::Keys {
                        values: input.len(),
                        keys: format!("{} old keys", old.len()),
                    });
                }
                Some((old.owner(), old))
            }
            None => None,
        };
        let owner = input.owner();
        let mut sink = self.sink();
        sink.rows.reserve_for_input(input.data_len());
        let base = self.stats.messages as i64;
        let mut result = Ok(());
        let mut seen = 0;
        for i in 0..input.len() {
            seen += 1;
            let ordinal = base + i as i64;
            let Some(range) = input.range(i) else {
                sink.tombstone(ordinal);
                continue;
            };
            let size = range.len();
            if size > self.max_message_bytes {
                let what = format!("message is {} bytes", grouped(size));
                let error = OverLimit::new(what, "max_message_bytes", self.max_message_bytes);
                result = sink.error(ordinal, &owner.slice(range)[..], error.into());
                if result.is_err() {
                    break;
                }
                continue;
            }
            let key = keys.and_then(|k| k.is_valid(i).then(|| k.value(i)));
            let value = owner.slice(range);
            let old_key = old_keys
                .as_ref()
                .and_then(|(bytes, old)| old.range(i).map(|r| bytes.slice(r)));
            let (format, panic_at) = (&mut self.format, self.panic_at);
            result = sink.guarded(ordinal, &value.clone(), |sink| {
                test_hook(panic_at, ordinal);
                match old_key {
                    Some(old_key) => {
                        format.decode_with_old_key(sink, ordinal, value, key, &old_key)
                    }
                    None => format.decode(sink, ordinal, value, key),
                }
            });
            if result.is_err() {
                break;
            }
        }
        // In failfast, the values after the failing one were not seen.
        self.stats.messages += seen as u64;
        if last && result.is_ok() {
            result = self.format.finish(&mut sink);
        }
        self.absorb(sink, result)
    }

    /// Decodes a record batch, for a format whose input is records (`datahub-tuple`): one
    /// ordinal per record (row). With `last`, this is the end of input too.
    pub fn decode_records(&mut self, records: &RecordBatch, last: bool) -> Result<Output> {
        if !self.format.takes_records() {
            return Err(Error::InputKind {
                format: self.name,
                takes: BINARY_VALUES,
                got: "a record batch",
            });
        }
        let mut sink = self.sink();
        // Rows of wide records hold a map entry per column.
        let per_row = 100.max(16 * records.num_columns());
        sink.rows.reserve_for_input(records.num_rows() * per_row);
        let base = self.stats.messages as i64;
        let mut result = self.records_guarded(&mut sink, base, records);
        // Records seen: all, none when the columns were refused, up to the failing one in
        // failfast.
        self.stats.messages += match &result {
            Ok(()) => records.num_rows() as u64,
            Err(Error::Message { ordinal, .. }) => (ordinal - base + 1) as u64,
            Err(_) => 0,
        };
        if last && result.is_ok() {
            result = self.format.finish(&mut sink);
        }
        self.absorb(sink, result)
    }

    /// Decodes records behind the panic boundary. Records decode in one call, so after a
    /// panic the batch is decoded again one record at a time, each guarded: the record that
    /// panics becomes the error row, with its raw bytes as the format renders a record's.
    fn records_guarded(&mut self, sink: &mut Sink, base: i64, records: &RecordBatch) -> Result<()> {
        let (rows, ordinals, stats) = (sink.rows.len(), sink.ordinals.len(), sink.stats);
        let (format, panic_at) = (&mut self.format, self.panic_at);
        let all = panic::catch_unwind(AssertUnwindSafe(|| {
            let last = base + records.num_rows() as i64;
            if let Some(at) = panic_at.filter(|at| (base..last).contains(at)) {
                test_hook(panic_at, at);
            }
            format.decode_records(sink, base, records)
        }));
        if let Ok(result) = all {
            return result;
        }
        sink.rows.truncate(rows);
        sink.ordinals.truncate(ordinals);
        sink.stats = stats;
        for row in 0..records.num_rows() {
            let ordinal = base + row as i64;
            let record = records.slice(row, 1);
            let raw = format.raw_record(&record);
            sink.guarded(ordinal, &raw, |sink| {
                test_hook(panic_at, ordinal);
                format.decode_records(sink, ordinal, &record)
            })?;
        }
        Ok(())
    }

    /// End of input: rows for whatever the format still holds (incomplete multi-part sets).
    /// A panic here names no message: it fails the call with [`Error::Panic`].
    pub fn finish(&mut self) -> Result<Output> {
        let mut sink = self.sink();
        let format = &mut self.format;
        let result = panic::catch_unwind(AssertUnwindSafe(|| format.finish(&mut sink)))
            .unwrap_or_else(|payload| Err(Error::Panic(panic_text(payload.as_ref()))));
        self.absorb(sink, result)
    }

    fn absorb(&mut self, sink: Sink, result: Result<()>) -> Result<Output> {
        let (output, stats) = sink.finish();
        self.stats.events += stats.events;
        self.stats.decoded += stats.decoded;
        self.stats.errors += stats.errors;
        self.stats.dropped += stats.dropped;
        self.stats.pending = self.format.pending();
        result.map(|()| output)
    }

    /// What this decoder did so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, ArrayRef, BinaryArray, StringArray};

    use super::{Decoder, Mode};
    use crate::error::Error;

    fn values(messages: &[&[u8]]) -> ArrayRef {
        Arc::new(BinaryArray::from(
            messages.iter().map(|m| Some(*m)).collect::<Vec<_>>(),
        ))
    }

    const GOOD: &[u8] = br#"{"after":{"id":1},"source":{"db":"d","table":"t"},"op":"c"}"#;

    /// A panic while decoding one message becomes that message's error row, raw bytes kept;
    /// the messages around it decode, and the counts add up.
    #[test]
    fn a_panic_is_the_message_error_row() {
        let mut decoder = Decoder::new("debezium-json", Mode::Permissive).unwrap();
        decoder.panic_at = Some(1);
        let out = decoder
            .decode(&values(&[GOOD, b"{\"panic\":1}", GOOD]), None, true)
            .unwrap();
        assert_eq!(out.ordinals, [0, 1, 2]);
        let errors = out.batch.column_by_name("error").unwrap();
        let errors = errors.as_any().downcast_ref::<StringArray>().unwrap();
        assert!(errors.is_null(0) && errors.is_null(2));
        assert_eq!(
            errors.value(1),
            "internal error (a bug in cdc-decode, please report it): panicked: \
             test hook CDC_DECODE_TEST_PANIC_AT=1"
        );
        let raw = out.batch.column_by_name("raw").unwrap();
        let raw = raw.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(raw.value(1), b"{\"panic\":1}");
        let stats = decoder.stats();
        assert_eq!((stats.messages, stats.events, stats.errors), (3, 2, 1));
    }

    /// In failfast the panic is the call's error, naming the message.
    #[test]
    fn a_panic_in_failfast_names_the_message() {
        let mut decoder = Decoder::new("debezium-json", Mode::FailFast).unwrap();
        decoder.panic_at = Some(3);
        decoder.decode(&values(&[GOOD, GOOD]), None, false).unwrap();
        let error = decoder
            .decode(&values(&[GOOD, GOOD]), None, false)
            .unwrap_err();
        assert!(matches!(
            &error,
            Error::Message { ordinal: 3, source } if matches!(**source, Error::Panic(_))
        ));
        assert!(error.to_string().starts_with("message 3: internal error"));
    }
}
