//! Tencent DTS messages read in place (field names and numbers as in
//! `proto/subscribe.proto`): proto3 defaults, the last value of a scalar wins, a singular
//! message seen twice is merged, unknown fields and wire types are skipped (as upb does).
//! No field is copied until it is written into its Arrow column.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::wire::{Reader, Value, WireError};

use super::Kv;

pub(super) fn invalid(message: &'static str) -> impl Fn(WireError) -> Error {
    move |source| Error::Protobuf { message, source }
}

/// Iterates the fields of a sub-message, mapping wire errors to `message`.
pub(super) fn fields<'a>(
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

pub(super) fn read_kv<'a>(r: &Reader<'a>, bytes: &'a [u8]) -> Result<Kv<'a>, WireError> {
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
pub(super) fn check_empty<'a>(r: &Reader<'a>, bytes: &'a [u8]) -> Result<(), WireError> {
    r.nested(bytes)?.check_fields_of_empty()
}

pub(super) struct EnvelopeView<'a> {
    pub(super) version: i32,
    pub(super) total: u32,
    pub(super) index: u32,
    pub(super) data: &'a [u8],
    pub(super) properties: Vec<Kv<'a>>,
}

impl<'a> EnvelopeView<'a> {
    pub(super) fn read(bytes: &'a [u8]) -> Result<Self> {
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
pub(super) struct HeaderView<'a> {
    pub(super) version: i32,
    pub(super) source_type: i32,
    pub(super) message_type: i32,
    pub(super) timestamp: u32,
    pub(super) server_id: i64,
    pub(super) file_name: &'a str,
    pub(super) position: u64,
    pub(super) gtid: &'a str,
    pub(super) schema_name: &'a str,
    pub(super) table_name: &'a str,
    pub(super) seq_id: u64,
    pub(super) event_index: u64,
    pub(super) is_last: bool,
    pub(super) properties: Vec<Kv<'a>>,
}

impl<'a> HeaderView<'a> {
    pub(super) fn merge(&mut self, depth: u32, bytes: &'a [u8]) -> Result<()> {
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
pub(super) struct ColumnView<'a> {
    pub(super) name: &'a str,
    /// `originalType`: the source's type text (the schema pass reports it).
    pub(super) original_type: &'a str,
    pub(super) is_key: bool,
}

impl<'a> ColumnView<'a> {
    /// The common encoding (see [`DataView::canonical`]): `name`, `originalType`, `isKey`,
    /// each at most once and in order, no properties.
    #[inline(always)]
    pub(super) fn canonical(b: &'a [u8]) -> Option<Self> {
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
        let original_type = text(0x12)?;
        let mut is_key = false;
        if b.get(at) == Some(&0x18) {
            let value = *b.get(at + 1)?;
            if value >= 0x80 {
                return None;
            }
            is_key = value != 0;
            at += 2;
        }
        (at == b.len()).then_some(Self {
            name,
            original_type,
            is_key,
        })
    }
}

#[derive(Default)]
pub(super) struct DmlView<'a> {
    pub(super) dml_event_type: i32,
    pub(super) columns: Vec<ColumnView<'a>>,
    /// The columns came in one run known to have no duplicate name.
    pub(super) unique: bool,
    /// Runs of `columns` fields read (a run is consecutive `columns` fields).
    pub(super) runs: u32,
    /// `RowChange`s, read when written (they are most of the message).
    pub(super) rows: Vec<&'a [u8]>,
    /// The bytes of the columns when they came in one run in the common encoding: what the
    /// schema pass knows a column list by.
    pub(super) columns_raw: Option<&'a [u8]>,
    /// Nesting depth of the `DMLEvent` the rows were in.
    pub(super) depth: u32,
}

impl<'a> DmlView<'a> {
    pub(super) fn merge(
        &mut self,
        depth: u32,
        bytes: &'a [u8],
        cache: &mut ColumnCache,
    ) -> Result<()> {
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
                    self.columns_raw = (self.runs == 1).then(|| &bytes[at..at + len]);
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
                    self.columns_raw = None;
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
pub(super) const COLUMNS_TAG: u8 = 0x12;

/// A length prefix at `at` of one or two bytes (values below 16 KiB) in its shortest form:
/// the length and where the value starts. `None` for anything else (longer lengths, or a
/// non-shortest form), which the general reader handles.
#[inline(always)]
pub(super) fn short_len(b: &[u8], at: usize) -> Option<(usize, usize)> {
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
pub(super) fn column_run(bytes: &[u8]) -> Option<usize> {
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
pub(super) fn read_column<'a>(r: &Reader<'a>, b: &'a [u8]) -> Result<ColumnView<'a>, WireError> {
    if let Some(column) = ColumnView::canonical(b) {
        return Ok(column);
    }
    let mut column = ColumnView::default();
    let mut inner = r.nested(b)?;
    while let Some((number, value)) = inner.next()? {
        match (number, value) {
            (1, Value::Len(b)) => column.name = inner.string(b)?,
            (2, Value::Len(b)) => column.original_type = inner.string(b)?,
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

/// Where a text is in a cached list's bytes: start and length.
type Span = (u32, u32);

pub(super) struct CachedColumns {
    pub(super) bytes: Vec<u8>,
    /// Per column: where its name and its `originalType` are in `bytes`, and `isKey`.
    pub(super) columns: Vec<(Span, Span, bool)>,
    /// No two columns share a name.
    pub(super) unique: bool,
}

impl ColumnCache {
    const SIZE: usize = 64;
    const MAX_BYTES: usize = 64 * 1024;

    /// Appends the columns of the run of `columns` fields that `rest` starts with to `out`;
    /// returns the run's length and whether its names are known to be unique, or `None`
    /// when `rest` does not start with a run in the common encoding.
    pub(super) fn columns<'a>(
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
            let text = |(start, len): Span| {
                let bytes = &run[start as usize..(start + len) as usize];
                // SAFETY: these bytes equal the cached ones, which were checked as UTF-8
                // when the list was first read.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            };
            for &(name, original_type, is_key) in &list.columns {
                out.push(ColumnView {
                    name: text(name),
                    original_type: text(original_type),
                    is_key,
                });
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
                    // A text is a slice of `run`; an empty one may be a static "".
                    let span = |text: &str| {
                        let start = if text.is_empty() {
                            0
                        } else {
                            text.as_ptr() as usize - base
                        };
                        (start as u32, text.len() as u32)
                    };
                    (span(c.name), span(c.original_type), c.is_key)
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
pub(super) struct EventView<'a> {
    pub(super) transaction_id_begin: &'a str,
    pub(super) thread_id: i64,
    pub(super) transaction_id_commit: &'a str,
    pub(super) dml: DmlView<'a>,
    pub(super) ddl_schema_name: &'a str,
    pub(super) ddl_sql: &'a str,
    pub(super) ddl_execution_time: u32,
    pub(super) heartbeat_epoch: i64,
    pub(super) synced_gtid: &'a str,
    pub(super) fake_gtid: bool,
    pub(super) checkpoint_file_name: &'a str,
    pub(super) checkpoint_position: u64,
    pub(super) properties: Vec<Kv<'a>>,
}

impl<'a> EventView<'a> {
    pub(super) fn merge(
        &mut self,
        depth: u32,
        bytes: &'a [u8],
        cache: &mut ColumnCache,
    ) -> Result<()> {
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
    pub(super) fn merge_event(
        &mut self,
        r: &Reader<'a>,
        number: u32,
        b: &'a [u8],
    ) -> Result<(), WireError> {
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
pub(super) struct DataView<'a> {
    pub(super) data_type: i32,
    pub(super) charset: &'a str,
    pub(super) sv: &'a str,
    pub(super) bv: &'a [u8],
}

impl<'a> DataView<'a> {
    /// The common encoding, read without the general field loop: each field at most once,
    /// in field-number order, a one-byte `dataType`, lengths of one or two bytes, strings
    /// UTF-8 (as every serializer writes values up to 16 KiB). `None` for anything else, which the general loop
    /// then reads (and rejects, if it must), so both paths accept the same bytes.
    #[inline(always)]
    pub(super) fn canonical(b: &'a [u8]) -> Option<Self> {
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
pub(super) fn read_data<'a>(depth: u32, b: &'a [u8]) -> Result<DataView<'a>> {
    match DataView::canonical(b) {
        Some(data) => Ok(data),
        None => read_data_generally(depth, b),
    }
}

#[cold]
pub(super) fn read_data_generally<'a>(depth: u32, b: &'a [u8]) -> Result<DataView<'a>> {
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

pub(super) fn check_unique(names: &[&str]) -> Result<()> {
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
