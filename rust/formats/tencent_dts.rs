//! `tencent-dts`: Tencent Cloud DTS data subscription messages (ProtoBuf `Envelope` →
//! `Entries` → `Entry`), multi-part envelopes included. The rules are
//! `docs/formats/tencent-dts.md`.
//!
//! Messages are read with the borrowing [`crate::wire::Reader`] into the `*View` structs
//! below (field names and numbers as in `proto/subscribe.proto`), so no field is copied
//! until it is written into its Arrow column.

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::limits::{grouped, Limits, OverLimit};
use crate::proto::{DataType, DmlType, MessageType, SourceType};
use crate::sequence::OrderKey;
use crate::sink::Sink;
use crate::text::{base64_into, Charset};
use crate::wire::{Reader, Value, WireError};

/// A `KVPair`.
type Kv<'a> = (&'a str, &'a str);

// ---------------------------------------------------------------------------------------
// Multi-part reassembly
// ---------------------------------------------------------------------------------------

/// The decoder, holding the multi-part sets still open, per reassembly key.
#[derive(Default)]
pub struct TencentDts {
    // In the order the sets were opened; few keys at a time, so a Vec beats a map.
    open: Vec<OpenSet>,
    columns: ColumnCache,
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
                return complete(sink, set, &mut self.columns, &self.limits);
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
    let mut result = Ok(());
    for part in parts {
        let reported = sink.error(part.ordinal, &part.raw, Error::Multipart(error.to_string()));
        result = result.and(reported);
    }
    result
}

/// A complete set: its events at the last part's place, or an error row for every part.
fn complete(
    sink: &mut Sink,
    set: OpenSet,
    columns: &mut ColumnCache,
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
        write_entries(rows, &data, &properties, columns, limits)
    }) {
        Ok(()) => {
            // The parts before the last decoded too (`try_events` counted the last).
            sink.decoded(parts - 1);
            Ok(())
        }
        Err(error) => {
            let error = format!("multi-part envelope of {} parts: {error}", set.total);
            fail_parts(sink, set.parts, &error)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Message views: proto3 defaults, the last value of a scalar wins, a singular message seen
// twice is merged, unknown fields and wire types are skipped (as upb does).
// ---------------------------------------------------------------------------------------

fn invalid(message: &'static str) -> impl Fn(WireError) -> Error {
    move |source| Error::Protobuf { message, source }
}

/// Iterates the fields of a sub-message, mapping wire errors to `message`.
fn fields<'a>(
    parent_depth: u32,
    bytes: &'a [u8],
    message: &'static str,
    mut field: impl FnMut(&Reader<'a>, u32, Value<'a>) -> Result<(), WireError>,
) -> Result<()> {
    let on_error = invalid(message);
    let mut reader = Reader::new(bytes, parent_depth).map_err(&on_error)?;
    while let Some((number, value)) = reader.next().map_err(&on_error)? {
        field(&reader, number, value).map_err(&on_error)?;
    }
    Ok(())
}

fn read_kv<'a>(r: &Reader<'a>, bytes: &'a [u8]) -> Result<Kv<'a>, WireError> {
    let mut kv = ("", "");
    let mut inner = r.nested(bytes)?;
    while let Some((number, value)) = inner.next()? {
        match (number, value) {
            (1, Value::Len(b)) => kv.0 = inner.string(b)?,
            (2, Value::Len(b)) => kv.1 = inner.string(b)?,
            _ => {}
        }
    }
    Ok(kv)
}

/// Reads a sub-message that has no fields of its own (`RollbackEvent`) only to check its
/// bytes, as Google's decoder does (which lets field number 0 through there).
fn check_empty<'a>(r: &Reader<'a>, bytes: &'a [u8]) -> Result<(), WireError> {
    r.nested(bytes)?.check_fields_of_empty()
}

struct EnvelopeView<'a> {
    version: i32,
    total: u32,
    index: u32,
    data: &'a [u8],
    properties: Vec<Kv<'a>>,
}

impl<'a> EnvelopeView<'a> {
    fn read(bytes: &'a [u8]) -> Result<Self> {
        let mut e = Self {
            version: 0,
            total: 0,
            index: 0,
            data: &[],
            properties: Vec::new(),
        };
        fields(0, bytes, "Envelope", |r, number, value| {
            match (number, value) {
                (1, Value::Varint(v)) => e.version = v as i32,
                (2, Value::Varint(v)) => e.total = v as u32,
                (3, Value::Varint(v)) => e.index = v as u32,
                (4, Value::Len(b)) => e.data = b,
                (15, Value::Len(b)) => e.properties.push(read_kv(r, b)?),
                _ => {}
            }
            Ok(())
        })?;
        Ok(e)
    }
}

#[derive(Default)]
struct HeaderView<'a> {
    version: i32,
    source_type: i32,
    message_type: i32,
    timestamp: u32,
    server_id: i64,
    file_name: &'a str,
    position: u64,
    gtid: &'a str,
    schema_name: &'a str,
    table_name: &'a str,
    seq_id: u64,
    event_index: u64,
    is_last: bool,
    properties: Vec<Kv<'a>>,
}

impl<'a> HeaderView<'a> {
    fn merge(&mut self, depth: u32, bytes: &'a [u8]) -> Result<()> {
        fields(depth, bytes, "Header", |r, number, value| {
            match (number, value) {
                (1, Value::Varint(v)) => self.version = v as i32,
                (2, Value::Varint(v)) => self.source_type = v as i32,
                (3, Value::Varint(v)) => self.message_type = v as i32,
                (4, Value::Varint(v)) => self.timestamp = v as u32,
                (5, Value::Varint(v)) => self.server_id = v as i64,
                (6, Value::Len(b)) => self.file_name = r.string(b)?,
                (7, Value::Varint(v)) => self.position = v,
                (8, Value::Len(b)) => self.gtid = r.string(b)?,
                (9, Value::Len(b)) => self.schema_name = r.string(b)?,
                (10, Value::Len(b)) => self.table_name = r.string(b)?,
                (11, Value::Varint(v)) => self.seq_id = v,
                (12, Value::Varint(v)) => self.event_index = v,
                (13, Value::Varint(v)) => self.is_last = v != 0,
                (15, Value::Len(b)) => self.properties.push(read_kv(r, b)?),
                _ => {}
            }
            Ok(())
        })
    }
}

#[derive(Default)]
struct ColumnView<'a> {
    name: &'a str,
    is_key: bool,
}

impl<'a> ColumnView<'a> {
    /// The common encoding (see [`DataView::canonical`]): `name`, `originalType`, `isKey`,
    /// each at most once and in order, no properties.
    #[inline(always)]
    fn canonical(b: &'a [u8]) -> Option<Self> {
        let mut at = 0;
        let mut text = |tag: u8| -> Option<&'a str> {
            if b.get(at) != Some(&tag) {
                return Some("");
            }
            let (len, start) = short_len(b, at + 1)?;
            let bytes = b.get(start..start + len)?;
            at = start + len;
            crate::text::utf8(bytes)
        };
        let name = text(0x0a)?;
        text(0x12)?;
        let mut is_key = false;
        if b.get(at) == Some(&0x18) {
            let value = *b.get(at + 1)?;
            if value >= 0x80 {
                return None;
            }
            is_key = value != 0;
            at += 2;
        }
        (at == b.len()).then_some(Self { name, is_key })
    }
}

#[derive(Default)]
struct DmlView<'a> {
    dml_event_type: i32,
    columns: Vec<ColumnView<'a>>,
    /// The columns came in one run known to have no duplicate name.
    unique: bool,
    /// Runs of `columns` fields read (a run is consecutive `columns` fields).
    runs: u32,
    /// `RowChange`s, read when written (they are most of the message).
    rows: Vec<&'a [u8]>,
    /// Nesting depth of the `DMLEvent` the rows were in.
    depth: u32,
}

impl<'a> DmlView<'a> {
    fn merge(&mut self, depth: u32, bytes: &'a [u8], cache: &mut ColumnCache) -> Result<()> {
        self.depth = depth;
        if self.columns.capacity() == 0 {
            // Tables have tens of columns: one allocation, not a doubling series.
            self.columns.reserve(32);
        }
        let on_error = invalid("DMLEvent");
        let mut reader = Reader::new(bytes, depth).map_err(&on_error)?;
        loop {
            let at = reader.position();
            if bytes.get(at) == Some(&COLUMNS_TAG) {
                if let Some((len, unique)) =
                    cache.columns(&bytes[at..], depth, &mut self.columns)?
                {
                    self.runs += 1;
                    self.unique = unique && self.runs == 1;
                    reader.seek(at + len);
                    continue;
                }
            }
            let Some((number, value)) = reader.next().map_err(&on_error)? else {
                break;
            };
            match (number, value) {
                (1, Value::Varint(v)) => self.dml_event_type = v as i32,
                (2, Value::Len(b)) => {
                    self.runs += 1;
                    self.unique = false;
                    self.columns
                        .push(read_column(&reader, b).map_err(&on_error)?);
                }
                (3, Value::Len(b)) => {
                    if self.rows.capacity() == 0 {
                        self.rows.reserve(16);
                    }
                    self.rows.push(b);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The tag of `DMLEvent.columns` (field 2, length-delimited).
const COLUMNS_TAG: u8 = 0x12;

/// A length prefix at `at` of one or two bytes (values below 16 KiB) in its shortest form:
/// the length and where the value starts. `None` for anything else (longer lengths, or a
/// non-shortest form), which the general reader handles.
#[inline(always)]
fn short_len(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let first = *b.get(at)? as usize;
    if first < 0x80 {
        return Some((first, at + 1));
    }
    let second = *b.get(at + 1)? as usize;
    if !(1..0x80).contains(&second) {
        return None;
    }
    Some(((first & 0x7f) | (second << 7), at + 2))
}

/// The length of the run of `columns` fields at the start of `bytes` (tags and lengths in
/// their one-byte / shortest forms, every length within the bytes), or `None` when the
/// bytes do not start so; the general reader then takes over.
fn column_run(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    while bytes.get(at) == Some(&COLUMNS_TAG) {
        let (len, start) = short_len(bytes, at + 1)?;
        if start + len > bytes.len() {
            return None;
        }
        at = start + len;
    }
    (at > 0).then_some(at)
}

/// One `Column`, by the general reader.
fn read_column<'a>(r: &Reader<'a>, b: &'a [u8]) -> Result<ColumnView<'a>, WireError> {
    if let Some(column) = ColumnView::canonical(b) {
        return Ok(column);
    }
    let mut column = ColumnView::default();
    let mut inner = r.nested(b)?;
    while let Some((number, value)) = inner.next()? {
        match (number, value) {
            (1, Value::Len(b)) => column.name = inner.string(b)?,
            (2, Value::Len(b)) => _ = inner.string(b)?,
            (3, Value::Varint(v)) => column.is_key = v != 0,
            (15, Value::Len(b)) => _ = read_kv(&inner, b)?,
            _ => {}
        }
    }
    Ok(column)
}

/// Column lists seen before, by their exact bytes: every DML entry of a table repeats its
/// columns (names, types, key flags), so each distinct list is parsed, UTF-8-checked and
/// checked for duplicate names once per decoder, not once per entry.
#[derive(Default)]
pub(crate) struct ColumnCache {
    lists: Vec<CachedColumns>,
    /// The slot the next new list replaces once the cache is full.
    next: usize,
}

struct CachedColumns {
    bytes: Vec<u8>,
    /// Per column: where its name is in `bytes`, and `isKey`.
    columns: Vec<(u32, u32, bool)>,
    /// No two columns share a name.
    unique: bool,
}

impl ColumnCache {
    const SIZE: usize = 64;
    const MAX_BYTES: usize = 64 * 1024;

    /// Appends the columns of the run of `columns` fields that `rest` starts with to `out`;
    /// returns the run's length and whether its names are known to be unique, or `None`
    /// when `rest` does not start with a run in the common encoding.
    fn columns<'a>(
        &mut self,
        rest: &'a [u8],
        depth: u32,
        out: &mut Vec<ColumnView<'a>>,
    ) -> Result<Option<(usize, bool)>> {
        // A list seen before: the same bytes, and the run ends where the list does.
        let hit = self.lists.iter().position(|l| {
            rest.starts_with(&l.bytes) && rest.get(l.bytes.len()) != Some(&COLUMNS_TAG)
        });
        if let Some(i) = hit {
            // The most recent hit first: a table's entries come in runs.
            self.lists.swap(0, i);
            let list = &self.lists[0];
            let run = &rest[..list.bytes.len()];
            for &(start, len, is_key) in &list.columns {
                let name = &run[start as usize..(start + len) as usize];
                // SAFETY: these bytes equal the cached ones, which were checked as UTF-8
                // when the list was first read.
                let name = unsafe { std::str::from_utf8_unchecked(name) };
                out.push(ColumnView { name, is_key });
            }
            return Ok(Some((run.len(), list.unique)));
        }
        // Only lists of an ordinary size are cached (64 entries of at most 64 KiB each).
        let Some(end) = column_run(rest).filter(|&end| end <= Self::MAX_BYTES) else {
            return Ok(None);
        };
        let run = &rest[..end];
        let on_error = invalid("DMLEvent");
        let mut reader = Reader::new(run, depth).map_err(&on_error)?;
        let first = out.len();
        while let Some((_, value)) = reader.next().map_err(&on_error)? {
            if let Value::Len(b) = value {
                out.push(read_column(&reader, b).map_err(&on_error)?);
            }
        }
        let names: Vec<&str> = out[first..].iter().map(|c| c.name).collect();
        let unique = check_unique(&names).is_ok();
        let base = run.as_ptr() as usize;
        let list = CachedColumns {
            bytes: run.to_vec(),
            columns: out[first..]
                .iter()
                .map(|c| {
                    // A name is a slice of `run`; an empty one may be a static "".
                    let start = if c.name.is_empty() {
                        0
                    } else {
                        c.name.as_ptr() as usize - base
                    };
                    (start as u32, c.name.len() as u32, c.is_key)
                })
                .collect(),
            unique,
        };
        if self.lists.len() < Self::SIZE {
            self.lists.push(list);
        } else {
            self.lists[self.next] = list;
            self.next = (self.next + 1) % Self::SIZE;
        }
        Ok(Some((end, unique)))
    }
}

#[derive(Default)]
struct EventView<'a> {
    transaction_id_begin: &'a str,
    thread_id: i64,
    transaction_id_commit: &'a str,
    dml: DmlView<'a>,
    ddl_schema_name: &'a str,
    ddl_sql: &'a str,
    ddl_execution_time: u32,
    heartbeat_epoch: i64,
    synced_gtid: &'a str,
    fake_gtid: bool,
    checkpoint_file_name: &'a str,
    checkpoint_position: u64,
    properties: Vec<Kv<'a>>,
}

impl<'a> EventView<'a> {
    fn merge(&mut self, depth: u32, bytes: &'a [u8], cache: &mut ColumnCache) -> Result<()> {
        let on_error = invalid("Event");
        let mut reader = Reader::new(bytes, depth).map_err(&on_error)?;
        while let Some((number, value)) = reader.next().map_err(&on_error)? {
            let Value::Len(b) = value else { continue };
            match number {
                2 => self.dml.merge(depth + 1, b, cache)?,
                15 => self
                    .properties
                    .push(read_kv(&reader, b).map_err(&on_error)?),
                _ => self.merge_event(&reader, number, b).map_err(&on_error)?,
            }
        }
        Ok(())
    }

    /// The other event messages: BEGIN (1), COMMIT (3), DDL (4), ROLLBACK (5), HEARTBEAT
    /// (6), CHECKPOINT (7).
    fn merge_event(&mut self, r: &Reader<'a>, number: u32, b: &'a [u8]) -> Result<(), WireError> {
        match number {
            1 => {
                let mut inner = r.nested(b)?;
                while let Some((number, value)) = inner.next()? {
                    match (number, value) {
                        (1, Value::Len(b)) => self.transaction_id_begin = inner.string(b)?,
                        (2, Value::Varint(v)) => self.thread_id = v as i64,
                        _ => {}
                    }
                }
            }
            3 => {
                let mut inner = r.nested(b)?;
                while let Some((number, value)) = inner.next()? {
                    if let (1, Value::Len(b)) = (number, value) {
                        self.transaction_id_commit = inner.string(b)?;
                    }
                }
            }
            4 => {
                let mut inner = r.nested(b)?;
                while let Some((number, value)) = inner.next()? {
                    match (number, value) {
                        (1, Value::Len(b)) => self.ddl_schema_name = inner.string(b)?,
                        (2, Value::Len(b)) => self.ddl_sql = inner.string(b)?,
                        (3, Value::Varint(v)) => self.ddl_execution_time = v as u32,
                        _ => {}
                    }
                }
            }
            5 => check_empty(r, b)?,
            6 => {
                let mut inner = r.nested(b)?;
                while let Some((number, value)) = inner.next()? {
                    if let (1, Value::Varint(v)) = (number, value) {
                        self.heartbeat_epoch = v as i64;
                    }
                }
            }
            7 => {
                let mut inner = r.nested(b)?;
                while let Some((number, value)) = inner.next()? {
                    match (number, value) {
                        (1, Value::Len(b)) => self.synced_gtid = inner.string(b)?,
                        (2, Value::Varint(v)) => self.fake_gtid = v != 0,
                        (3, Value::Len(b)) => self.checkpoint_file_name = inner.string(b)?,
                        (4, Value::Varint(v)) => self.checkpoint_position = v,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// One `Data`: the last value of each field wins.
#[derive(Default)]
struct DataView<'a> {
    data_type: i32,
    charset: &'a str,
    sv: &'a str,
    bv: &'a [u8],
}

impl<'a> DataView<'a> {
    /// The common encoding, read without the general field loop: each field at most once,
    /// in field-number order, a one-byte `dataType`, lengths of one or two bytes, strings
    /// UTF-8 (as every serializer writes values up to 16 KiB). `None` for anything else, which the general loop
    /// then reads (and rejects, if it must), so both paths accept the same bytes.
    #[inline(always)]
    fn canonical(b: &'a [u8]) -> Option<Self> {
        let mut data = Self::default();
        let mut at = 0;
        if b.first() == Some(&0x08) {
            let value = *b.get(1)?;
            if value >= 0x80 {
                return None;
            }
            data.data_type = i32::from(value);
            at = 2;
        }
        let mut field = |tag: u8| -> Option<&'a [u8]> {
            if b.get(at) != Some(&tag) {
                return Some(&[]);
            }
            let (len, start) = short_len(b, at + 1)?;
            let bytes = b.get(start..start + len)?;
            at = start + len;
            Some(bytes)
        };
        let charset = crate::text::utf8(field(0x12)?)?;
        let sv = crate::text::utf8(field(0x1a)?)?;
        let bv = field(0x22)?;
        (at == b.len()).then_some(Self {
            data_type: data.data_type,
            charset,
            sv,
            bv,
        })
    }
}

/// One `Data` in whatever encoding: the common one directly, any other by the general
/// field loop.
#[inline(always)]
fn read_data<'a>(depth: u32, b: &'a [u8]) -> Result<DataView<'a>> {
    match DataView::canonical(b) {
        Some(data) => Ok(data),
        None => read_data_generally(depth, b),
    }
}

#[cold]
fn read_data_generally<'a>(depth: u32, b: &'a [u8]) -> Result<DataView<'a>> {
    let mut data = DataView::default();
    fields(depth, b, "Data", |r, number, value| {
        match (number, value) {
            (1, Value::Varint(v)) => data.data_type = v as i32,
            (2, Value::Len(b)) => data.charset = r.string(b)?,
            (3, Value::Len(b)) => data.sv = r.string(b)?,
            (4, Value::Len(b)) => data.bv = b,
            _ => {}
        }
        Ok(())
    })?;
    Ok(data)
}

/// The two images of one `RowChange` into `before` and `after` (both open at once: a row
/// may interleave its two lists), named by `columns`; returns the row's properties.
fn write_images<'a>(
    rows: &mut EventBuilder,
    columns: &[ColumnView],
    depth: u32,
    bytes: &'a [u8],
    row: usize,
) -> Result<Vec<Kv<'a>>> {
    let on_error = invalid("RowChange");
    let mut properties = Vec::new();
    let (mut old, mut new) = (0usize, 0usize);
    let mut reader = Reader::new(bytes, depth).map_err(&on_error)?;
    while let Some((number, value)) = reader.next().map_err(&on_error)? {
        match (number, value) {
            (1 | 2, Value::Len(b)) => {
                let data = read_data(depth + 1, b)?;
                let (map, count, image) = if number == 1 {
                    (&mut rows.before, &mut old, "old")
                } else {
                    (&mut rows.after, &mut new, "new")
                };
                let Some(column) = columns.get(*count) else {
                    return Err(Error::TooManyValues {
                        row,
                        values: *count + 1,
                        image,
                        columns: columns.len(),
                    });
                };
                *count += 1;
                write_value(map, column.name, &data)?;
            }
            (15, Value::Len(b)) => properties.push(read_kv(&reader, b).map_err(&on_error)?),
            _ => {}
        }
    }
    for (map, count) in [(&mut rows.before, old), (&mut rows.after, new)] {
        if count == 0 {
            map.push_null();
        } else {
            map.close();
        }
    }
    Ok(properties)
}

// ---------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------

/// What the events of one `Entries` may take: `Limits::max_items` per collection, and
/// output bytes (`before`, `after`, `metadata`) as `Limits::output_limit` of its size.
struct Bounds {
    max_items: usize,
    max_output_ratio: usize,
    output_start: usize,
    output_limit: usize,
}

impl Bounds {
    /// Fails when the rows written since these bounds were made take too many bytes.
    fn check_output(&self, rows: &EventBuilder) -> Result<()> {
        if rows.output_bytes() - self.output_start > self.output_limit {
            let what = format!(
                "the message's events take more than {} bytes (max_output_ratio times its \
                 size, or output_floor_bytes if more)",
                grouped(self.output_limit)
            );
            return Err(OverLimit::new(what, "max_output_ratio", self.max_output_ratio).into());
        }
        Ok(())
    }
}

/// The events of one serialized `Entries`.
fn write_entries(
    rows: &mut EventBuilder,
    data: &[u8],
    envelope: &[Kv],
    columns: &mut ColumnCache,
    limits: &Limits,
) -> Result<()> {
    let max_items = limits.max_items;
    let bounds = Bounds {
        max_items,
        max_output_ratio: limits.max_output_ratio,
        output_start: rows.output_bytes(),
        output_limit: limits.output_limit(data.len()),
    };
    let on_error = invalid("Entries (Envelope.data)");
    let mut reader = Reader::new(data, 0).map_err(&on_error)?;
    let mut index = 0;
    while let Some((number, value)) = reader.next().map_err(&on_error)? {
        if let (1, Value::Len(item)) = (number, value) {
            if index >= max_items {
                let what = format!("Entries has more than {} items", grouped(max_items));
                return Err(OverLimit::new(what, "max_items", max_items).into());
            }
            write_entry(rows, item, envelope, columns, &bounds).map_err(|source| {
                Error::InEntry {
                    index,
                    source: Box::new(source),
                }
            })?;
            index += 1;
        }
    }
    Ok(())
}

fn write_entry(
    rows: &mut EventBuilder,
    bytes: &[u8],
    envelope: &[Kv],
    columns: &mut ColumnCache,
    bounds: &Bounds,
) -> Result<()> {
    let max_items = bounds.max_items;
    let mut header = HeaderView::default();
    let mut event = EventView::default();
    let on_error = invalid("Entry");
    let mut reader = Reader::new(bytes, 1).map_err(&on_error)?;
    while let Some((number, value)) = reader.next().map_err(&on_error)? {
        match (number, value) {
            (1, Value::Len(b)) => header.merge(2, b)?,
            (2, Value::Len(b)) => event.merge(2, b, columns)?,
            _ => {}
        }
    }
    for (count, noun) in [
        (event.dml.rows.len(), "rows"),
        (event.dml.columns.len(), "columns"),
    ] {
        if count > max_items {
            let what = format!("DMLEvent has {} {noun}", grouped(count));
            return Err(OverLimit::new(what, "max_items", max_items).into());
        }
    }
    let mut texts = [(); 5].map(|()| itoa::Buffer::new());
    let [seq_id, position, version, server_id, event_index] = &mut texts;
    let context = Context {
        seq_id: seq_id.format(header.seq_id),
        position: position.format(header.position),
        version: version.format(header.version),
        server_id: server_id.format(header.server_id),
        event_index: event_index.format(header.event_index),
        header: &header,
        event: &event,
        envelope,
    };
    match MessageType::try_from(header.message_type) {
        Ok(MessageType::Dml) => write_dml(rows, &context, bounds),
        Ok(kind) => {
            check_rows(&event.dml)?;
            let op = match kind {
                MessageType::Begin => "begin",
                MessageType::Commit => "commit",
                MessageType::Ddl => "ddl",
                MessageType::Rollback => "rollback",
                MessageType::Heartbeat => "heartbeat",
                MessageType::Checkpoint => "checkpoint",
                MessageType::Dml => unreachable!("handled above"),
            };
            write_control(rows, &context, op, kind.as_str_name());
            bounds.check_output(rows)
        }
        Err(_) => {
            check_rows(&event.dml)?;
            let number = itoa::Buffer::new().format(header.message_type).to_string();
            write_control(rows, &context, "other", &number);
            bounds.check_output(rows)
        }
    }
}

/// The rows of a `dmlEvent` on a non-DML entry are not written, but must parse (as they
/// must for Google's decoder).
fn check_rows(dml: &DmlView) -> Result<()> {
    let on_error = invalid("RowChange");
    let depth = dml.depth + 1;
    for row in &dml.rows {
        let mut reader = Reader::new(row, depth).map_err(&on_error)?;
        while let Some((number, value)) = reader.next().map_err(&on_error)? {
            match (number, value) {
                (1 | 2, Value::Len(b)) => _ = read_data(depth + 1, b)?,
                (15, Value::Len(b)) => _ = read_kv(&reader, b).map_err(&on_error)?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// What every event of one entry shares; `'a` is the message's bytes.
struct Context<'c, 'a> {
    /// Header numbers as decimal text, formatted once per entry (a DML entry gives an event
    /// per row).
    seq_id: &'c str,
    position: &'c str,
    version: &'c str,
    server_id: &'c str,
    event_index: &'c str,
    header: &'c HeaderView<'a>,
    event: &'c EventView<'a>,
    envelope: &'c [Kv<'c>],
}

impl Context<'_, '_> {
    /// The columns from `format` to `event_id`.
    fn common(
        &self,
        rows: &mut EventBuilder,
        op: &str,
        source_op: &str,
        row: u64,
        source_db: &str,
    ) {
        let h = self.header;
        rows.op.push_str(op);
        rows.source_op.push_str(source_op);
        rows.source_db.push_nonempty(Some(source_db));
        rows.source_schema.push_null();
        rows.source_table.push_nonempty(Some(h.table_name));
        rows.event_time
            .push((h.timestamp != 0).then(|| i64::from(h.timestamp) * 1_000_000));
        rows.capture_time.push(None);
        let tx_id = if !h.gtid.is_empty() {
            h.gtid
        } else {
            match MessageType::try_from(h.message_type) {
                Ok(MessageType::Begin) => self.event.transaction_id_begin,
                Ok(MessageType::Commit) => self.event.transaction_id_commit,
                _ => "",
            }
        };
        rows.tx_id.push_nonempty(Some(tx_id));
        if !h.file_name.is_empty() {
            rows.position.push_with(|out| {
                out.extend_from_slice(h.file_name.as_bytes());
                out.push(b':');
                out.extend_from_slice(self.position.as_bytes());
            });
        } else if h.position != 0 {
            rows.position.push_str(self.position);
        } else {
            rows.position.push_null();
        }
        rows.sequence.push_with(|out| {
            OrderKey(out).u64(h.seq_id).u64(row);
        });
        rows.event_id.push_with(|out| {
            out.extend_from_slice(self.seq_id.as_bytes());
            out.push(b':');
            out.extend_from_slice(itoa::Buffer::new().format(row).as_bytes());
        });
    }

    /// `metadata`: header fields, the event's own fields, then properties (first key wins).
    fn metadata(&self, map: &mut MapColumn, row_properties: &[Kv]) {
        let h = self.header;
        if h.version != 0 {
            map.entry("version", Some(self.version));
        }
        match SourceType::try_from(h.source_type) {
            Ok(source) => map.entry("sourceType", Some(source.as_str_name())),
            Err(_) => map.entry_int("sourceType", h.source_type),
        }
        if h.server_id != 0 {
            map.entry("serverId", Some(self.server_id));
        }
        map.entry("seqId", Some(self.seq_id));
        if h.event_index != 0 {
            map.entry("eventIndex", Some(self.event_index));
        }
        if h.is_last {
            map.entry("isLast", Some("true"));
        }
        let e = self.event;
        let text = |map: &mut MapColumn, key: &str, value: &str| {
            if !value.is_empty() {
                map.entry(key, Some(value));
            }
        };
        match MessageType::try_from(h.message_type) {
            Ok(MessageType::Begin) => {
                text(map, "transactionId", e.transaction_id_begin);
                if e.thread_id != 0 {
                    map.entry_int("threadId", e.thread_id);
                }
            }
            Ok(MessageType::Commit) => text(map, "transactionId", e.transaction_id_commit),
            Ok(MessageType::Ddl) if e.ddl_execution_time != 0 => {
                map.entry_int("executionTime", e.ddl_execution_time);
            }
            Ok(MessageType::Heartbeat) if e.heartbeat_epoch != 0 => {
                map.entry_int("epoch", e.heartbeat_epoch);
            }
            Ok(MessageType::Checkpoint) => {
                text(map, "syncedGtid", e.synced_gtid);
                if e.fake_gtid {
                    map.entry("fakeGtid", Some("true"));
                }
                text(map, "fileName", e.checkpoint_file_name);
                if e.checkpoint_position != 0 {
                    map.entry_int("position", e.checkpoint_position);
                }
            }
            _ => {}
        }
        for properties in [self.envelope, &h.properties, &e.properties, row_properties] {
            for (key, value) in properties {
                map.insert(key, value);
            }
        }
        map.close();
    }
}

/// BEGIN, COMMIT, DDL, ROLLBACK, HEARTBEAT, CHECKPOINT, or an undefined message type.
fn write_control(rows: &mut EventBuilder, context: &Context, op: &str, source_op: &str) {
    let is_ddl = op == "ddl";
    let mut source_db = context.header.schema_name;
    if source_db.is_empty() && is_ddl {
        source_db = context.event.ddl_schema_name;
    }
    context.common(rows, op, source_op, 0, source_db);
    rows.primary_key.push_null();
    rows.before.push_null();
    rows.after.push_null();
    rows.ddl
        .push_nonempty(is_ddl.then_some(context.event.ddl_sql));
    context.metadata(&mut rows.metadata, &[]);
    rows.error.push_null();
    rows.raw.push_null();
    rows.end_row();
}

/// One event per `RowChange`.
fn write_dml(rows: &mut EventBuilder, context: &Context, bounds: &Bounds) -> Result<()> {
    let dml = &context.event.dml;
    let (op, source_op) = match DmlType::try_from(dml.dml_event_type) {
        Ok(DmlType::Insert) => ("insert", "INSERT"),
        Ok(DmlType::Update) => ("update", "UPDATE"),
        Ok(DmlType::Delete) => ("delete", "DELETE"),
        Err(_) => ("other", ""),
    };
    let number;
    let source_op = if source_op.is_empty() {
        number = itoa::Buffer::new().format(dml.dml_event_type).to_string();
        number.as_str()
    } else {
        source_op
    };
    if !dml.unique {
        check_unique(&dml.columns.iter().map(|c| c.name).collect::<Vec<_>>())?;
    }
    let columns = &dml.columns;
    let has_key = dml.columns.iter().any(|c| c.is_key);
    for (index, row) in dml.rows.iter().enumerate() {
        context.common(
            rows,
            op,
            source_op,
            index as u64,
            context.header.schema_name,
        );
        if has_key {
            for column in dml.columns.iter().filter(|c| c.is_key) {
                rows.primary_key.item(column.name);
            }
            rows.primary_key.close();
        } else {
            rows.primary_key.push_null();
        }
        let properties = write_images(rows, columns, dml.depth + 1, row, index)?;
        rows.ddl.push_null();
        context.metadata(&mut rows.metadata, &properties);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
        bounds.check_output(rows)?;
    }
    Ok(())
}

fn check_unique(names: &[&str]) -> Result<()> {
    let duplicate = if names.len() <= 16 {
        names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
            .map(|(_, n)| *n)
    } else {
        let mut seen = HashSet::with_capacity(names.len());
        names.iter().find(|n| !seen.insert(**n)).copied()
    };
    match duplicate {
        Some(name) => Err(Error::DuplicateColumn(name.to_string())),
        None => Ok(()),
    }
}

/// One `Data` into an image: NA left out, NIL a null value.
fn write_value(map: &mut MapColumn, name: &str, data: &DataView) -> Result<()> {
    use DataType::*;
    match DataType::try_from(data.data_type) {
        Ok(Nil) => map.entry(name, None),
        Ok(Na) => {}
        Ok(
            Int8 | Int16 | Int32 | Int64 | Uint8 | Uint16 | Uint32 | Uint64 | Float32 | Float64
            | Decimal,
        ) => map.entry(name, (!data.sv.is_empty()).then_some(data.sv)),
        Ok(Bytes) => map.entry_with(name, |out| base64_into(data.bv, out)),
        Ok(String) => {
            let charset =
                Charset::from_name(data.charset).ok_or_else(|| Error::UnsupportedCharset {
                    charset: data.charset.to_string(),
                    column: name.to_string(),
                })?;
            let mut ok = true;
            map.entry_with(name, |out| ok = charset.decode_into(data.bv, out));
            if !ok {
                let charset = if data.charset.is_empty() {
                    "utf8"
                } else {
                    data.charset
                };
                return Err(Error::InvalidText {
                    charset: charset.to_string(),
                    column: name.to_string(),
                });
            }
        }
        Err(_) => {
            return Err(Error::UnknownDataType {
                number: data.data_type,
                column: name.to_string(),
            })
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, ArrayRef, BinaryArray, StringArray};
    use prost::Message;

    use crate::decoder::{Decoder, Mode};
    use crate::proto::{self, Data, DmlEvent, Entries, Entry, Envelope, Event, Header, RowChange};

    fn message(rows: usize) -> Vec<u8> {
        let column = |name: &str, key: bool| proto::Column {
            name: name.into(),
            is_key: key,
            ..Default::default()
        };
        let value = |i: usize| Data {
            data_type: proto::DataType::Int64 as i32,
            sv: i.to_string(),
            ..Default::default()
        };
        let text = Data {
            data_type: proto::DataType::String as i32,
            charset: "gbk".into(),
            bv: vec![0xd6, 0xd0, 0xce, 0xc4].into(),
            ..Default::default()
        };
        let entry = Entry {
            header: Some(Header {
                version: 1,
                message_type: proto::MessageType::Dml as i32,
                file_name: "mysql-bin.000001".into(),
                position: 4,
                schema_name: "shop".into(),
                table_name: "t".into(),
                seq_id: 7,
                ..Default::default()
            }),
            event: Some(Event {
                dml_event: Some(DmlEvent {
                    dml_event_type: proto::DmlType::Insert as i32,
                    columns: vec![column("id", true), column("name", false)],
                    rows: (0..rows)
                        .map(|i| RowChange {
                            new_columns: vec![value(i), text.clone()],
                            ..Default::default()
                        })
                        .collect(),
                }),
                ..Default::default()
            }),
        };
        let data = Entries { items: vec![entry] }.encode_to_vec();
        Envelope {
            version: 1,
            total: 1,
            data: data.into(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    fn decode(
        values: &[Option<Vec<u8>>],
        keys: Option<Vec<Option<&str>>>,
    ) -> arrow_array::RecordBatch {
        let array: ArrayRef =
            Arc::new(values.iter().map(|v| v.as_deref()).collect::<BinaryArray>());
        let keys = keys.map(StringArray::from);
        let mut decoder = Decoder::new("tencent-dts", Mode::Permissive).unwrap();
        decoder.decode(&array, keys.as_ref(), true).unwrap().batch
    }

    fn ops(batch: &arrow_array::RecordBatch) -> Vec<String> {
        let ops = batch.column_by_name("op").unwrap();
        let ops = ops.as_any().downcast_ref::<StringArray>().unwrap();
        ops.iter().map(|o| o.unwrap().to_string()).collect()
    }

    #[test]
    fn a_dml_entry_gives_one_event_per_row() {
        let batch = decode(&[Some(message(3))], None);
        assert_eq!(ops(&batch), ["insert", "insert", "insert"]);
        assert_eq!(batch.column_by_name("error").unwrap().null_count(), 3);
    }

    #[test]
    fn a_set_split_over_parts_joins_and_a_broken_one_gives_error_rows() {
        let whole = Envelope::decode(&message(2)[..]).unwrap().data;
        let part = |index: u32, bytes: &[u8]| {
            let data = bytes.to_vec().into();
            Some(
                Envelope {
                    version: 1,
                    total: 2,
                    index,
                    data,
                    ..Default::default()
                }
                .encode_to_vec(),
            )
        };
        let (a, b) = whole.split_at(whole.len() / 2);
        assert_eq!(
            ops(&decode(&[part(0, a), part(1, b)], None)),
            ["insert", "insert"]
        );
        // Interleaved keys still join; a part without its set is an error row.
        let batch = decode(
            &[part(0, a), part(0, a), part(1, b)],
            Some(vec![Some("p0"), Some("p1"), Some("p1")]),
        );
        assert_eq!(ops(&batch), ["insert", "insert", "error"]);
        assert_eq!(ops(&decode(&[part(1, b)], None)), ["error"]);
    }

    fn with_columns(names: &[&str]) -> Vec<u8> {
        let mut envelope = Envelope::decode(&message(1)[..]).unwrap();
        let mut entries = Entries::decode(&envelope.data[..]).unwrap();
        let dml = entries.items[0]
            .event
            .as_mut()
            .unwrap()
            .dml_event
            .as_mut()
            .unwrap();
        dml.columns = names
            .iter()
            .map(|n| proto::Column {
                name: n.to_string(),
                ..Default::default()
            })
            .collect();
        envelope.data = entries.encode_to_vec().into();
        envelope.encode_to_vec()
    }

    /// Column lists are cached by their bytes across messages; a hit must give the same
    /// names, and a list with a duplicate name must fail every time.
    #[test]
    fn cached_column_lists_give_the_same_events_and_errors() {
        let good = with_columns(&["", "name"]);
        let bad = with_columns(&["a", "a"]);
        let batch = decode(
            &[Some(good.clone()), Some(bad.clone()), Some(good), Some(bad)],
            None,
        );
        assert_eq!(ops(&batch), ["insert", "error", "insert", "error"]);
        let after = batch.column_by_name("after").unwrap();
        let after = after
            .as_any()
            .downcast_ref::<arrow_array::MapArray>()
            .unwrap();
        for row in [0, 2] {
            let keys = after.value(row).column(0).clone();
            let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
            assert_eq!(keys.iter().flatten().collect::<Vec<_>>(), ["", "name"]);
        }
    }

    /// Every mutation of a valid message gives its events or exactly one error row, and no
    /// panic (a small deterministic fuzz; the fuzz targets of the hardening issue go further).
    #[test]
    fn mutated_messages_never_panic() {
        let base = message(4);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let mut bytes = base.clone();
            match next() % 4 {
                0 => bytes.truncate((next() as usize) % bytes.len()),
                1 => {
                    for _ in 0..1 + next() % 4 {
                        let at = (next() as usize) % bytes.len();
                        bytes[at] ^= 1 << (next() % 8);
                    }
                }
                2 => {
                    let at = (next() as usize) % bytes.len();
                    bytes[at] = next() as u8;
                }
                _ => {
                    let at = (next() as usize) % (bytes.len() + 1);
                    let junk: Vec<u8> = (0..1 + next() % 8).map(|_| next() as u8).collect();
                    bytes.splice(at..at, junk);
                }
            }
            let batch = decode(&[Some(bytes.clone())], None);
            let ops = ops(&batch);
            assert!(
                ops == ["error"]
                    || (!ops.is_empty() && !ops.contains(&"error".to_string()))
                    || ops.is_empty(),
                "{ops:?} for {bytes:?}"
            );
        }
    }
}
