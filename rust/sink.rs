//! The [`Sink`] a format writes its events and error rows into: it applies the [`Mode`] to
//! errors, counts every outcome ([`Stats`]) and holds the panic boundary of one message. The
//! formats ([`crate::formats`]) write into it; [`crate::decoder::Decoder`] makes one per call.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::events::EventBuilder;
use crate::typed::TypedSpec;

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

/// What a decoder did so far. Every message seen has one outcome (`docs/events.md`,
/// "Accounting"): `messages == decoded + errors + pending`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Input values seen.
    pub messages: u64,
    /// Messages decoded into their events (tombstones included, and every part of a
    /// completed multi-part set), however many rows each gave (none or many).
    pub decoded: u64,
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
/// came from (counted across every call of one [`crate::decoder::Decoder`]).
#[derive(Debug)]
pub struct Output {
    pub batch: RecordBatch,
    pub ordinals: Vec<i64>,
}

/// Where a format writes its rows: applies the mode to errors and counts everything.
pub struct Sink {
    /// The rows so far.
    pub rows: EventBuilder,
    pub(crate) ordinals: Vec<i64>,
    mode: Mode,
    pub(crate) stats: Stats,
    /// Multi-table typed mode: the table of the value that failed the last
    /// [`Sink::try_events`] (its error rows go with that table, docs/typed.md).
    failed_table: Option<usize>,
}

impl Sink {
    pub(crate) fn new(format: &'static str, mode: Mode, typed: Option<Arc<TypedSpec>>) -> Self {
        Self {
            rows: EventBuilder::with_typed(format, typed),
            ordinals: Vec::new(),
            mode,
            stats: Stats::default(),
            failed_table: None,
        }
    }

    /// A sink for the schema pass (`crate::schemas`).
    pub(crate) fn for_schemas(format: &'static str, mode: Mode) -> Self {
        Self {
            rows: EventBuilder::for_schemas(format),
            ..Self::new(format, mode, None)
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
        self.failed_table = None;
        if let Some(typed) = self.rows.typed() {
            typed.start_message();
        }
        self.rows.observe(None);
        let converted = |rows: &mut EventBuilder| match rows.typed().and_then(|t| t.take_error()) {
            Some(error) => Err(Error::Convert(error)),
            None => Ok(()),
        };
        match write(&mut self.rows).and_then(|()| converted(&mut self.rows)) {
            Ok(()) => {
                let added = self.rows.len() - mark;
                self.ordinals.resize(self.ordinals.len() + added, ordinal);
                self.stats.events += added as u64;
                self.stats.decoded += 1;
                Ok(())
            }
            Err(error) => {
                if matches!(error, Error::Convert(_)) {
                    self.failed_table = self.rows.typed().and_then(|t| t.failed_table());
                }
                self.rows.truncate(mark);
                Err(error)
            }
        }
    }

    /// Multi-table typed mode: the table of the value that failed the last
    /// [`Sink::try_events`] (`None`: it did not fail on a table's value).
    pub fn failed_table(&self) -> Option<usize> {
        self.failed_table
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
            Err(error) => {
                let table = self.failed_table;
                self.error_of(ordinal, raw, error, table)
            }
        }
    }

    /// Counts `messages` more as decoded, whose events an earlier [`Sink::try_events`]
    /// wrote: the parts before the last of a completed multi-part set.
    pub fn decoded(&mut self, messages: u64) {
        self.stats.decoded += messages;
    }

    /// Reports a message that did not decode, as the mode says. Fails only in failfast.
    pub fn error(&mut self, ordinal: i64, raw: &[u8], error: Error) -> Result<()> {
        self.error_of(ordinal, raw, error, None)
    }

    /// [`Sink::error`] for a message that failed on a value of `table` (multi-table typed
    /// mode, [`Sink::failed_table`]): its error row's `table` names it.
    pub fn error_of(
        &mut self,
        ordinal: i64,
        raw: &[u8],
        error: Error,
        table: Option<usize>,
    ) -> Result<()> {
        self.stats.errors += 1;
        match self.mode {
            Mode::Permissive => {
                if let Some(typed) = self.rows.typed() {
                    typed.claim_next(table);
                }
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

    /// Runs `decode`, which decodes the message with this ordinal, behind the panic boundary
    /// (`docs/hardening.md`): a panic inside it is a bug, and rather than take the process
    /// down it becomes the message's error ([`Error::Panic`]), reported as the mode says,
    /// with whatever the message wrote taken back first.
    pub(crate) fn guarded(
        &mut self,
        ordinal: i64,
        raw: &[u8],
        decode: impl FnOnce(&mut Sink) -> Result<()>,
    ) -> Result<()> {
        let (rows, ordinals, stats) = (self.rows.len(), self.ordinals.len(), self.stats);
        match panic::catch_unwind(AssertUnwindSafe(|| decode(self))) {
            Ok(result) => result,
            Err(payload) => {
                self.rows.truncate(rows);
                self.ordinals.truncate(ordinals);
                self.stats = stats;
                self.error(ordinal, raw, Error::Panic(panic_text(payload.as_ref())))
            }
        }
    }

    pub(crate) fn tombstone(&mut self, ordinal: i64) {
        self.rows.push_bare("tombstone", None);
        self.ordinals.push(ordinal);
        self.stats.events += 1;
        self.stats.decoded += 1;
    }

    pub(crate) fn finish(mut self) -> (Output, Stats) {
        if self.rows.schema_pass() {
            // The schema pass: a row per table and schema seen, and per error row.
            let schemas = self.rows.take_schemas();
            let events = self.rows.finish();
            let (batch, ordinals) = crate::schemas::aggregate(&events, &self.ordinals, &schemas);
            return (Output { batch, ordinals }, self.stats);
        }
        (
            Output {
                batch: self.rows.finish(),
                ordinals: self.ordinals,
            },
            self.stats,
        )
    }
}

/// What a panic said, for its error.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(text), _) => text,
        (_, Some(text)) => text.as_str(),
        _ => "a panic without a message",
    };
    format!("panicked: {text}")
}
