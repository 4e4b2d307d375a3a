//! The decoder every format shares: the modes, the accounting, the input loop, and the
//! [`Sink`] a format writes its events and error rows into.

use crate::error::{Error, Result};
use crate::events::EventBuilder;
use crate::formats::{self, FormatDecoder, Options};
use crate::input::Values;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};

use crate::typed::TypedSpec;

/// What `takes` says in [`Error::InputKind`]: a format of binary values …
const BINARY_VALUES: &str = "binary values (an array of messages)";
/// … and a format of records.
const RECORD_BATCHES: &str = "record batches (a pyarrow RecordBatch or Table of records)";

/// What a message that cannot be decoded does (`docs/events.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// It becomes one error row.
    Permissive,
    /// It is dropped and counted.
    DropMalformed,
    /// The call fails with [`Error::Message`].
    FailFast,
}

impl Mode {
    /// The mode of a name: `permissive`, `dropmalformed` or `failfast`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "permissive" => Ok(Self::Permissive),
            "dropmalformed" => Ok(Self::DropMalformed),
            "failfast" => Ok(Self::FailFast),
            other => Err(Error::UnknownMode(other.to_string())),
        }
    }
}

/// What a decoder did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Input values seen.
    pub messages: u64,
    /// Event rows produced (error rows not counted).
    pub events: u64,
    /// Error rows produced, emitted or dropped.
    pub errors: u64,
    /// Error rows dropped (`dropmalformed`).
    pub dropped: u64,
    /// Parts of multi-part messages buffered now.
    pub pending: u64,
}

/// One call's output: the events, and for each row the ordinal of the input value it
/// came from (counted across every call of one [`Decoder`]).
#[derive(Debug)]
pub struct Output {
    pub batch: RecordBatch,
    pub ordinals: Vec<i64>,
}

/// Where a format writes its rows: applies the mode to errors and counts everything.
pub struct Sink {
    /// The rows so far.
    pub rows: EventBuilder,
    ordinals: Vec<i64>,
    mode: Mode,
    stats: Stats,
}

impl Sink {
    fn new(format: &'static str, mode: Mode, typed: Option<Arc<TypedSpec>>) -> Self {
        Self {
            rows: EventBuilder::with_typed(format, typed),
            ordinals: Vec::new(),
            mode,
            stats: Stats::default(),
        }
    }

    /// Runs `write`, which appends the events of the message with this ordinal. On error the
    /// message's rows are taken back and the error is returned, not yet reported.
    pub fn try_events(
        &mut self,
        ordinal: i64,
        write: impl FnOnce(&mut EventBuilder) -> Result<()>,
    ) -> Result<()> {
        let mark = self.rows.len();
        if let Some(typed) = self.rows.typed() {
            typed.start_message();
        }
        let converted = |rows: &mut EventBuilder| match rows.typed().and_then(|t| t.take_error()) {
            Some(error) => Err(Error::Convert(error)),
            None => Ok(()),
        };
        match write(&mut self.rows).and_then(|()| converted(&mut self.rows)) {
            Ok(()) => {
                let added = self.rows.len() - mark;
                self.ordinals.resize(self.ordinals.len() + added, ordinal);
                self.stats.events += added as u64;
                Ok(())
            }
            Err(error) => {
                self.rows.truncate(mark);
                Err(error)
            }
        }
    }

    /// Like [`Sink::try_events`], with a failure reported as the message's error row.
    pub fn events(
        &mut self,
        ordinal: i64,
        raw: &[u8],
        write: impl FnOnce(&mut EventBuilder) -> Result<()>,
    ) -> Result<()> {
        match self.try_events(ordinal, write) {
            Ok(()) => Ok(()),
            Err(error) => self.error(ordinal, raw, error),
        }
    }

    /// Reports a message that did not decode, as the mode says. Fails only in failfast.
    pub fn error(&mut self, ordinal: i64, raw: &[u8], error: Error) -> Result<()> {
        self.stats.errors += 1;
        match self.mode {
            Mode::Permissive => {
                self.rows
                    .push_bare("error", Some((&error.to_string(), raw)));
                self.ordinals.push(ordinal);
                Ok(())
            }
            Mode::DropMalformed => {
                self.stats.dropped += 1;
                Ok(())
            }
            Mode::FailFast => Err(Error::Message {
                ordinal,
                source: Box::new(error),
            }),
        }
    }

    fn tombstone(&mut self, ordinal: i64) {
        self.rows.push_bare("tombstone", None);
        self.ordinals.push(ordinal);
        self.stats.events += 1;
    }

    fn finish(self) -> (Output, Stats) {
        (
            Output {
                batch: self.rows.finish(),
                ordinals: self.ordinals,
            },
            self.stats,
        )
    }
}

/// A stateful decoder for one stream of one format.
pub struct Decoder {
    format: Box<dyn FormatDecoder>,
    name: &'static str,
    mode: Mode,
    stats: Stats,
    typed: Option<Arc<TypedSpec>>,
}

impl Decoder {
    /// A decoder for a format (one of [`formats::FORMATS`]) in a mode.
    pub fn new(format: &str, mode: Mode) -> Result<Self> {
        Self::with_options(format, mode, &Options::default())
    }

    /// A decoder with per-format options ([`Options`]).
    pub fn with_options(format: &str, mode: Mode, options: &Options) -> Result<Self> {
        crate::tune_allocator();
        let (name, format) = formats::new_decoder(format, options)?;
        Ok(Self {
            format,
            name,
            mode,
            stats: Stats::default(),
            typed: options.typed.clone(),
        })
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
        let owner = input.owner();
        let mut sink = Sink::new(self.name, self.mode, self.typed.clone());
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
            let key = keys.and_then(|k| k.is_valid(i).then(|| k.value(i)));
            result = self
                .format
                .decode(&mut sink, ordinal, owner.slice(range), key);
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
        let mut sink = Sink::new(self.name, self.mode, self.typed.clone());
        // Rows of wide records hold a map entry per column.
        let per_row = 100.max(16 * records.num_columns());
        sink.rows.reserve_for_input(records.num_rows() * per_row);
        let base = self.stats.messages as i64;
        let mut result = self.format.decode_records(&mut sink, base, records);
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

    /// End of input: rows for whatever the format still holds (incomplete multi-part sets).
    pub fn finish(&mut self) -> Result<Output> {
        let mut sink = Sink::new(self.name, self.mode, self.typed.clone());
        let result = self.format.finish(&mut sink);
        self.absorb(sink, result)
    }

    fn absorb(&mut self, sink: Sink, result: Result<()>) -> Result<Output> {
        let (output, stats) = sink.finish();
        self.stats.events += stats.events;
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
