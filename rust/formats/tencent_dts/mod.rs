//! `tencent-dts`: Tencent Cloud DTS data subscription messages (ProtoBuf `Envelope` →
//! `Entries` → `Entry`), multi-part envelopes included. The rules are
//! `docs/formats/tencent-dts.md`.
//!
//! The parts: this file reassembles multi-part sets; [`views`] reads messages with the
//! borrowing [`crate::wire::Reader`] into `*View` structs (field names and numbers as in `proto/subscribe.proto`), so no field is copied
//! until it is written into its Arrow column.
//! [`events`] writes their events.

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::formats::FormatDecoder;
use crate::limits::{grouped, Limits, OverLimit};
use crate::schemas::SchemaCache;
use crate::sink::Sink;

mod events;
#[cfg(test)]
mod tests;
mod views;

use events::write_entries;
use views::{ColumnCache, EnvelopeView};

/// A `KVPair`.
pub(crate) type Kv<'a> = (&'a str, &'a str);

// ---------------------------------------------------------------------------------------
// Multi-part reassembly
// ---------------------------------------------------------------------------------------

/// The decoder, holding the multi-part sets still open, per reassembly key.
#[derive(Default)]
pub struct TencentDts {
    // In the order the sets were opened; few keys at a time, so a Vec beats a map.
    open: Vec<OpenSet>,
    columns: ColumnCache,
    /// The schema pass's wire schemas, one per distinct column list.
    schemas: SchemaCache,
    limits: Limits,
    /// Bytes of the parts in `open` (their whole input values), for `max_pending_bytes`.
    pending_bytes: usize,
}

impl TencentDts {
    /// A decoder whose messages and multi-part sets are held to `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            limits: *limits,
            ..Self::default()
        }
    }

    /// Removes the open set at `at`, no longer counting its bytes.
    fn close(&mut self, at: usize) -> OpenSet {
        let set = self.open.remove(at);
        self.pending_bytes -= set.parts.iter().map(|p| p.raw.len()).sum::<usize>();
        set
    }

    /// An error when buffering `more` bytes would take the open sets over
    /// `max_pending_bytes`.
    fn over_pending(&self, more: usize) -> Option<Error> {
        let limit = self.limits.max_pending_bytes;
        let total = self.pending_bytes.saturating_add(more);
        (total > limit).then(|| {
            OverLimit::new(
                format!(
                    "buffering this part would hold {} bytes of multi-part envelopes",
                    grouped(total)
                ),
                "max_pending_bytes",
                limit,
            )
            .into()
        })
    }
}

struct OpenSet {
    key: Option<String>,
    total: u32,
    /// The first part's Envelope properties.
    properties: Vec<(String, String)>,
    parts: Vec<Part>,
}

/// A buffered part of a multi-part set.
struct Part {
    ordinal: i64,
    raw: Bytes,
    data: Bytes,
}

impl Part {
    /// `raw` is a slice of the input batch and `data` a slice of `raw`: neither is copied.
    /// A buffered part keeps its input batch's buffer alive until its set completes or
    /// fails, which costs memory only while a set spans batches.
    fn new(ordinal: i64, raw: &Bytes, data: &[u8]) -> Self {
        Self {
            ordinal,
            raw: raw.clone(),
            data: raw.slice_ref(data),
        }
    }
}

impl FormatDecoder for TencentDts {
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
    ) -> Result<()> {
        let envelope = match EnvelopeView::read(&value) {
            Ok(envelope) => envelope,
            Err(error) => return sink.error(ordinal, &value, error),
        };
        if envelope.version != 1 {
            return sink.error(ordinal, &value, Error::EnvelopeVersion(envelope.version));
        }
        let total = envelope.total.max(1);
        let index = envelope.index;
        if index >= total {
            return sink.error(ordinal, &value, Error::PartIndex { index, total });
        }
        let max_parts = self.limits.max_parts;
        if total as usize > max_parts {
            let what = format!("a multi-part envelope of {} parts", grouped(total as usize));
            let error = OverLimit::new(what, "max_parts", max_parts);
            return sink.error(ordinal, &value, error.into());
        }
        let limits = &self.limits;
        if total == 1 {
            return sink.events(ordinal, &value, |rows| {
                write_entries(
                    rows,
                    envelope.data,
                    &envelope.properties,
                    &mut self.columns,
                    &mut self.schemas,
                    limits,
                )
            });
        }

        // In failfast, a failed set's parts and this message are all reported, and the first
        // error returned: every message seen is accounted for (docs/events.md).
        let open = self.open.iter().position(|set| set.key.as_deref() == key);
        if index == 0 {
            let mut superseded = Ok(());
            if let Some(at) = open {
                let set = self.close(at);
                let reason = format!(
                    "got {} of {} parts, then a new set started",
                    set.parts.len(),
                    set.total
                );
                superseded = fail_set(sink, set, &reason);
            }
            if let Some(error) = self.over_pending(value.len()) {
                return superseded.and(sink.error(ordinal, &value, error));
            }
            self.pending_bytes += value.len();
            self.open.push(OpenSet {
                key: key.map(str::to_string),
                total,
                properties: envelope
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                parts: vec![Part::new(ordinal, &value, envelope.data)],
            });
            return superseded;
        }
        let Some(at) = open else {
            let error = format!("part {index} of {total} arrived without the parts before it");
            return sink.error(ordinal, &value, Error::Multipart(error));
        };
        let over = self.over_pending(value.len());
        let set = &mut self.open[at];
        let next = set.parts.len() as u32;
        if set.total == total && index == next {
            if let Some(error) = over {
                let set = self.close(at);
                let reason = format!("part {index} of {total} is over max_pending_bytes");
                let failed = fail_set(sink, set, &reason);
                return failed.and(sink.error(ordinal, &value, error));
            }
            set.parts.push(Part::new(ordinal, &value, envelope.data));
            self.pending_bytes += value.len();
            if index == total - 1 {
                let set = self.close(at);
                return complete(
                    sink,
                    set,
                    &mut self.columns,
                    &mut self.schemas,
                    &self.limits,
                );
            }
            return Ok(());
        }
        if set.total == total && index < next && set.parts[index as usize].data == envelope.data {
            let error = format!("duplicate part {index} of {total}");
            return sink.error(ordinal, &value, Error::Multipart(error));
        }
        let set = self.close(at);
        let reason = format!(
            "part {index} of {total} does not follow part {} of {}",
            next - 1,
            set.total
        );
        let failed = fail_set(sink, set, &reason);
        let error = Error::Multipart(format!("out-of-order multi-part envelope: {reason}"));
        failed.and(sink.error(ordinal, &value, error))
    }

    fn finish(&mut self, sink: &mut Sink) -> Result<()> {
        self.pending_bytes = 0;
        let mut result = Ok(());
        for set in std::mem::take(&mut self.open) {
            let reason = format!(
                "input ended after {} of {} parts",
                set.parts.len(),
                set.total
            );
            result = result.and(fail_set(sink, set, &reason));
        }
        result
    }

    fn pending(&self) -> u64 {
        self.open.iter().map(|set| set.parts.len() as u64).sum()
    }
}

/// Every part of a set that will not complete becomes an error row.
fn fail_set(sink: &mut Sink, set: OpenSet, reason: &str) -> Result<()> {
    let error = format!("incomplete multi-part envelope: {reason}");
    fail_parts(sink, set.parts, &error)
}

/// Reports every part as an error; in failfast, every part is still counted, and the first
/// error is returned.
fn fail_parts(sink: &mut Sink, parts: Vec<Part>, error: &str) -> Result<()> {
    fail_parts_of(sink, parts, error, None)
}

/// [`fail_parts`] of a set whose events failed on a value of `table` (multi-table typed
/// mode): every part's error row goes with that table.
fn fail_parts_of(
    sink: &mut Sink,
    parts: Vec<Part>,
    error: &str,
    table: Option<usize>,
) -> Result<()> {
    let mut result = Ok(());
    for part in parts {
        let error = Error::Multipart(error.to_string());
        let reported = sink.error_of(part.ordinal, &part.raw, error, table);
        result = result.and(reported);
    }
    result
}

/// A complete set: its events at the last part's place, or an error row for every part.
fn complete(
    sink: &mut Sink,
    set: OpenSet,
    columns: &mut ColumnCache,
    schemas: &mut SchemaCache,
    limits: &Limits,
) -> Result<()> {
    let mut data = BytesMut::with_capacity(set.parts.iter().map(|p| p.data.len()).sum());
    for part in &set.parts {
        data.extend_from_slice(&part.data);
    }
    let properties: Vec<Kv> = set
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let last = set.parts.last().map_or(0, |p| p.ordinal);
    let parts = set.parts.len() as u64;
    match sink.try_events(last, |rows| {
        write_entries(rows, &data, &properties, columns, schemas, limits)
    }) {
        Ok(()) => {
            // The parts before the last decoded too (`try_events` counted the last).
            sink.decoded(parts - 1);
            Ok(())
        }
        Err(error) => {
            let error = format!("multi-part envelope of {} parts: {error}", set.total);
            let table = sink.failed_table();
            fail_parts_of(sink, set.parts, &error, table)
        }
    }
}
