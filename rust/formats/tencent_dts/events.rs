//! The events of one Tencent DTS `Entries`: one per DML row change, one per control
//! message (BEGIN, COMMIT, DDL, ...), with their metadata, positions and row images.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::limits::{grouped, Limits, OverLimit};
use crate::proto::{DataType, DmlType, MessageType, SourceType};
use crate::schemas::{Dialect, SchemaCache, WireSchema};
use crate::sequence::OrderKey;
use crate::text::{base64_into, Charset};
use crate::typed::Hint;
use crate::wire::{Reader, Value};

use super::views::*;
use super::Kv;

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
pub(super) fn write_entries(
    rows: &mut EventBuilder,
    data: &[u8],
    envelope: &[Kv],
    columns: &mut ColumnCache,
    schemas: &mut SchemaCache,
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
            write_entry(rows, item, envelope, columns, schemas, &bounds).map_err(|source| {
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
    schemas: &mut SchemaCache,
    bounds: &Bounds,
) -> Result<()> {
    rows.observe(None);
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
        Ok(MessageType::Dml) => write_dml(rows, &context, schemas, bounds),
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
    if rows.schema_pass() {
        rows.metadata.push_null();
    } else {
        context.metadata(&mut rows.metadata, &[]);
    }
    rows.error.push_null();
    rows.raw.push_null();
    rows.end_row();
}

/// The schema pass: the entry's columns (`originalType`, `isKey`) as a wire schema, in the
/// dialect of the header's `sourceType`.
fn wire_schema(context: &Context, schemas: &mut SchemaCache) -> Arc<WireSchema> {
    let dialect = match SourceType::try_from(context.header.source_type) {
        Ok(SourceType::Pgsql) => Dialect::Postgresql,
        Ok(SourceType::Oracle) => Dialect::Oracle,
        _ => Dialect::Mysql,
    };
    let columns = &context.event.dml.columns;
    let key_names = || columns.iter().filter(|c| c.is_key).map(|c| c.name);
    let build = || {
        let key: Vec<String> = key_names().map(str::to_string).collect();
        WireSchema::typed(
            dialect,
            columns
                .iter()
                .map(|c| (c.name.to_string(), c.original_type.to_string())),
            (!key.is_empty()).then_some(key),
        )
    };
    if let Some(raw) = context.event.dml.columns_raw {
        // The common case: the list's bytes name it (each entry of a table repeats them).
        if let Some(schema) = schemas.by_bytes(dialect as u64, raw, || Some(build())) {
            return schema;
        }
    }
    let mut hasher = std::hash::DefaultHasher::new();
    dialect.hash(&mut hasher);
    for column in columns {
        (column.name, column.original_type, column.is_key).hash(&mut hasher);
    }
    let same =
        |held: &WireSchema| {
            held.dialect == Some(dialect)
                && held.columns.len() == columns.len()
                && held.columns.iter().zip(columns).all(|(h, c)| {
                    h.name == c.name && h.source_type.as_deref() == Some(c.original_type)
                })
                && match &held.key {
                    Some(key) => key.iter().map(String::as_str).eq(key_names()),
                    None => key_names().next().is_none(),
                }
        };
    schemas.get(hasher.finish(), same, build)
}

/// One event per `RowChange`.
fn write_dml(
    rows: &mut EventBuilder,
    context: &Context,
    schemas: &mut SchemaCache,
    bounds: &Bounds,
) -> Result<()> {
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
    let schema_pass = rows.schema_pass();
    if schema_pass {
        rows.observe(Some(wire_schema(context, schemas)));
    }
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
        if schema_pass {
            // The same checks as the images' (the message fails as it would decode), and
            // no text.
            check_images(columns, dml.depth + 1, row, index)?;
            rows.end_schema_row();
            continue;
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
            let charset = charset_of(name, data)?;
            let mut ok = true;
            map.entry_with(name, |out| ok = charset.decode_into(data.bv, out));
            if !ok {
                return Err(invalid_text(name, data));
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

/// A STRING `Data`'s charset (`charset`; empty is utf8), or the error naming its column.
fn charset_of(name: &str, data: &DataView) -> Result<Charset> {
    Charset::from_name(data.charset).ok_or_else(|| Error::UnsupportedCharset {
        charset: data.charset.to_string(),
        column: name.to_string(),
    })
}

/// The error of a STRING `Data` whose bytes are not text in its charset.
fn invalid_text(name: &str, data: &DataView) -> Error {
    let charset = if data.charset.is_empty() {
        "utf8"
    } else {
        data.charset
    };
    Error::InvalidText {
        charset: charset.to_string(),
        column: name.to_string(),
    }
}

/// Whether an `originalType` is MySQL's `json`.
fn is_json(original_type: &str) -> bool {
    original_type
        .get(..4)
        .is_some_and(|head| head.eq_ignore_ascii_case("json"))
}

/// One `Data` checked as [`write_value`] would write it, for the schema pass.
fn check_value(name: &str, data: &DataView) -> Result<()> {
    use DataType::*;
    match DataType::try_from(data.data_type) {
        Ok(String) => {
            if !charset_of(name, data)?.is_valid(data.bv) {
                return Err(invalid_text(name, data));
            }
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(_) => Err(Error::UnknownDataType {
            number: data.data_type,
            column: name.to_string(),
        }),
    }
}

/// The checks of [`write_images`] without the images, for the schema pass.
fn check_images(columns: &[ColumnView], depth: u32, bytes: &[u8], row: usize) -> Result<()> {
    let on_error = invalid("RowChange");
    let (mut old, mut new) = (0usize, 0usize);
    let mut reader = Reader::new(bytes, depth).map_err(&on_error)?;
    while let Some((number, value)) = reader.next().map_err(&on_error)? {
        match (number, value) {
            (1 | 2, Value::Len(b)) => {
                let data = read_data(depth + 1, b)?;
                let (count, image) = if number == 1 {
                    (&mut old, "old")
                } else {
                    (&mut new, "new")
                };
                let column = next_column(columns, count, row, image)?;
                check_value(column.name, &data)?;
            }
            (15, Value::Len(b)) => _ = read_kv(&reader, b).map_err(&on_error)?,
            _ => {}
        }
    }
    Ok(())
}

/// The column of an image's next value (`count` values of it read so far), else the error
/// of a row with more values than columns.
fn next_column<'c, 'a>(
    columns: &'c [ColumnView<'a>],
    count: &mut usize,
    row: usize,
    image: &'static str,
) -> Result<&'c ColumnView<'a>> {
    let Some(column) = columns.get(*count) else {
        return Err(Error::TooManyValues {
            row,
            values: *count + 1,
            image,
            columns: columns.len(),
        });
    };
    *count += 1;
    Ok(column)
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
    if let Some(typed) = rows.typed() {
        typed.hints.columns.clear();
    }
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
                let column = next_column(columns, count, row, image)?;
                write_value(map, column.name, &data)?;
                if data.data_type == DataType::Bytes as i32 && is_json(column.original_type) {
                    // MySQL `json` comes as BYTES: a string column gets its text.
                    if let Some(typed) = rows.typed() {
                        if !typed.hints.columns.contains_key(column.name) {
                            typed
                                .hints
                                .columns
                                .insert(column.name.to_string(), Hint::Base64Text);
                        }
                    }
                }
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
