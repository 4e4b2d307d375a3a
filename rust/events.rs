//! The change-event batch: the one output schema (`docs/events.md`) and the builder every
//! decoder writes into.
//!
//! The builder is column-wise and append-only like Arrow's own builders, with one addition
//! they lack: [`EventBuilder::truncate`], so a message that fails half-way leaves no rows
//! behind (a message gives all its events or one error row, never both).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_buffer::Buffer;
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef, TimeUnit};

use crate::columns::{list_item_field, map_entries_field, offsets};
pub use crate::columns::{BytesColumn, ListColumn, MapColumn, TimestampColumn};
use crate::schemas::WireSchema;
use crate::typed::{TypedImages, TypedSpec};

/// The output schema, column order included.
pub fn event_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let text = || DataType::Utf8;
            let ts = || DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
            let map = || DataType::Map(map_entries_field(), false);
            Arc::new(Schema::new(vec![
                Field::new("format", text(), true),
                Field::new("op", text(), false),
                Field::new("source_op", text(), true),
                Field::new("source_db", text(), true),
                Field::new("source_schema", text(), true),
                Field::new("source_table", text(), true),
                Field::new("event_time", ts(), true),
                Field::new("capture_time", ts(), true),
                Field::new("tx_id", text(), true),
                Field::new("position", text(), true),
                Field::new("sequence", DataType::Binary, true),
                Field::new("event_id", text(), true),
                Field::new("primary_key", DataType::List(list_item_field()), true),
                Field::new("before", map(), true),
                Field::new("after", map(), true),
                Field::new("ddl", text(), true),
                Field::new("metadata", map(), true),
                Field::new("error", text(), true),
                Field::new("raw", DataType::Binary, true),
            ]))
        })
        .clone()
}

/// A column of `rows` copies of `value`, built in one pass.
fn constant(value: &str, rows: usize) -> StringArray {
    let data = value.as_bytes().repeat(rows);
    let offsets = (0..=rows).map(|i| (i * value.len()) as i32).collect();
    // SAFETY: repeated whole copies of a `&str`, split at their boundaries.
    unsafe { StringArray::new_unchecked(self::offsets(offsets), Buffer::from_vec(data), None) }
}

/// Column builders for one batch of events, one public field per output column but
/// `format`, which is the builder's own and the same on every row.
///
/// A decoder appends exactly one value to every column for each event, then calls
/// [`EventBuilder::end_row`].
#[derive(Debug)]
pub struct EventBuilder {
    format: &'static str,
    pub op: BytesColumn,
    pub source_op: BytesColumn,
    pub source_db: BytesColumn,
    pub source_schema: BytesColumn,
    pub source_table: BytesColumn,
    pub event_time: TimestampColumn,
    pub capture_time: TimestampColumn,
    pub tx_id: BytesColumn,
    pub position: BytesColumn,
    pub sequence: BytesColumn,
    pub event_id: BytesColumn,
    pub primary_key: ListColumn,
    pub before: MapColumn,
    pub after: MapColumn,
    pub ddl: BytesColumn,
    pub metadata: MapColumn,
    pub error: BytesColumn,
    pub raw: BytesColumn,
    rows: usize,
    /// Typed mode: the struct images, converted from `before`/`after` as each row ends.
    typed: Option<Box<TypedImages>>,
    /// The schema pass (`crate::schemas`): each row's wire schema.
    schemas: Option<SchemaRows>,
}

/// The schema pass's rows: the wire schema of each row ended, and of the rows being
/// written now ([`EventBuilder::observe`]).
#[derive(Debug, Default)]
struct SchemaRows {
    current: Option<Arc<WireSchema>>,
    rows: Vec<Option<Arc<WireSchema>>>,
    widening: crate::schemas::widen::Widening,
}

impl EventBuilder {
    /// An empty builder for events of one format.
    pub fn new(format: &'static str) -> Self {
        Self::with_typed(format, None)
    }

    /// An empty builder that, given a spec, converts `before`/`after` to typed structs
    /// (`docs/typed.md`).
    pub fn with_typed(format: &'static str, typed: Option<Arc<TypedSpec>>) -> Self {
        Self {
            format,
            op: BytesColumn::new(),
            source_op: BytesColumn::new(),
            source_db: BytesColumn::new(),
            source_schema: BytesColumn::new(),
            source_table: BytesColumn::new(),
            event_time: TimestampColumn::default(),
            capture_time: TimestampColumn::default(),
            tx_id: BytesColumn::new(),
            position: BytesColumn::new(),
            sequence: BytesColumn::new(),
            event_id: BytesColumn::new(),
            primary_key: ListColumn::default(),
            before: MapColumn::default(),
            after: MapColumn::default(),
            ddl: BytesColumn::new(),
            metadata: MapColumn::default(),
            error: BytesColumn::new(),
            raw: BytesColumn::new(),
            rows: 0,
            typed: typed.map(|spec| Box::new(TypedImages::new(spec))),
            schemas: None,
        }
    }

    /// An empty builder for the schema pass (`crate::schemas`): formats report each row's
    /// wire schema ([`EventBuilder::observe`]) and leave its images and metadata null.
    pub fn for_schemas(format: &'static str) -> Self {
        Self {
            schemas: Some(SchemaRows::default()),
            ..Self::new(format)
        }
    }

    /// True in the schema pass: the rows' images and metadata are not wanted (a format
    /// writes nulls there), their wire schemas are.
    #[inline(always)]
    pub fn schema_pass(&self) -> bool {
        self.schemas.is_some()
    }

    /// The schema pass: the wire schema of the rows ended from now on, until the next call
    /// (or the next message). Nothing outside the schema pass.
    pub fn observe(&mut self, schema: Option<Arc<WireSchema>>) {
        if let Some(schemas) = self.schemas.as_mut() {
            schemas.current = schema;
        }
    }

    /// The schema pass: the current wire schema widened to what the values of one of the
    /// row's images need (`values`: its entries, name and text; docs/types.md, "Values
    /// wider than the wire's type"). Called after [`EventBuilder::observe`], once per
    /// image; nothing outside the schema pass or without a current schema.
    pub fn observe_values<'v>(
        &mut self,
        values: impl IntoIterator<Item = (Cow<'v, str>, Option<Cow<'v, str>>)>,
    ) {
        if let Some(schemas) = self.schemas.as_mut() {
            if let Some(current) = &schemas.current {
                let wider = schemas.widening.image(current, values);
                schemas.current = Some(wider);
            }
        }
    }

    /// The schema pass: each row's wire schema, taken out of the builder.
    pub fn take_schemas(&mut self) -> Vec<Option<Arc<WireSchema>>> {
        self.schemas
            .as_mut()
            .map(|s| std::mem::take(&mut s.rows))
            .unwrap_or_default()
    }

    /// Rows ended so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Bytes of keys and values in `before`, `after` and `metadata` so far (and those typed
    /// mode converted without writing them): what an output budget measures
    /// (docs/formats/datastream-avro.md).
    pub fn output_bytes(&self) -> usize {
        let typed = self.typed.as_ref().map_or(0, |t| t.converted_bytes());
        self.before.data_bytes() + self.after.data_bytes() + self.metadata.data_bytes() + typed
    }

    /// True when no row was ended.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Pre-sizes the columns for `bytes` of input, so they do not grow (and copy) by
    /// doubling. The estimate is generous, since only address space is reserved: pages are
    /// touched as rows are written.
    pub fn reserve_for_input(&mut self, bytes: usize) {
        // CDC rows take a hundred bytes or more on the wire; a map entry, 16 or more.
        let rows = bytes / 100 + 16;
        let entries = bytes / 16;
        if let Some(typed) = self.typed.as_mut() {
            typed.reserve(rows);
        }
        for column in [
            &mut self.op,
            &mut self.source_op,
            &mut self.source_db,
            &mut self.source_table,
            &mut self.tx_id,
            &mut self.position,
            &mut self.sequence,
            &mut self.event_id,
        ] {
            column.offsets.reserve(rows);
            column.data.reserve(rows * 16);
        }
        for column in [&mut self.event_time, &mut self.capture_time] {
            column.values.reserve(rows);
        }
        for map in [&mut self.before, &mut self.after, &mut self.metadata] {
            map.offsets.reserve(rows);
            for part in [&mut map.keys, &mut map.values] {
                part.offsets.reserve(entries);
                part.data.reserve(bytes / 2);
            }
        }
    }

    /// Typed mode's images, where a format sets the hints of the message it writes
    /// (`None` in generic mode).
    pub fn typed(&mut self) -> Option<&mut TypedImages> {
        self.typed.as_deref_mut()
    }

    /// The schema pass: ends a row whose names, op and sequence are written, with no
    /// images, DDL, metadata, error or raw bytes.
    pub fn end_schema_row(&mut self) {
        self.before.push_null();
        self.after.push_null();
        self.ddl.push_null();
        self.metadata.push_null();
        self.error.push_null();
        self.raw.push_null();
        self.end_row();
    }

    /// Ends the row every column has just received a value for.
    pub fn end_row(&mut self) {
        if let Some(typed) = self.typed.as_mut() {
            // Only a multi-table spec routes rows by their source names.
            let names = if typed.spec().is_multi() {
                [
                    self.source_db.last_text(),
                    self.source_schema.last_text(),
                    self.source_table.last_text(),
                ]
            } else {
                [None; 3]
            };
            if typed.end_row(names, &self.before, &self.after) {
                self.before.null_last_row();
                self.after.null_last_row();
            }
        }
        if let Some(schemas) = self.schemas.as_mut() {
            schemas.rows.push(schemas.current.clone());
        }
        self.rows += 1;
        debug_assert!(
            self.op.len() == self.rows
                && self.source_op.len() == self.rows
                && self.source_db.len() == self.rows
                && self.source_schema.len() == self.rows
                && self.source_table.len() == self.rows
                && self.event_time.values.len() == self.rows
                && self.capture_time.values.len() == self.rows
                && self.tx_id.len() == self.rows
                && self.position.len() == self.rows
                && self.sequence.len() == self.rows
                && self.event_id.len() == self.rows
                && self.primary_key.offsets.len() == self.rows + 1
                && self.before.offsets.len() == self.rows + 1
                && self.after.offsets.len() == self.rows + 1
                && self.ddl.len() == self.rows
                && self.metadata.offsets.len() == self.rows + 1
                && self.error.len() == self.rows
                && self.raw.len() == self.rows,
            "a decoder wrote a ragged row"
        );
    }

    /// Drops every row after the first `rows`, and any row not yet ended.
    pub fn truncate(&mut self, rows: usize) {
        self.op.truncate(rows);
        self.source_op.truncate(rows);
        self.source_db.truncate(rows);
        self.source_schema.truncate(rows);
        self.source_table.truncate(rows);
        self.event_time.truncate(rows);
        self.capture_time.truncate(rows);
        self.tx_id.truncate(rows);
        self.position.truncate(rows);
        self.sequence.truncate(rows);
        self.event_id.truncate(rows);
        self.primary_key.truncate(rows);
        self.before.truncate(rows);
        self.after.truncate(rows);
        self.ddl.truncate(rows);
        self.metadata.truncate(rows);
        self.error.truncate(rows);
        self.raw.truncate(rows);
        if let Some(typed) = self.typed.as_mut() {
            typed.truncate(rows);
        }
        if let Some(schemas) = self.schemas.as_mut() {
            schemas.rows.truncate(rows);
        }
        self.rows = rows;
    }

    /// A row that is `op` and nothing else (tombstones), or with `error` and `raw` set, an
    /// error row.
    pub fn push_bare(&mut self, op: &str, error: Option<(&str, &[u8])>) {
        self.observe(None);
        self.op.push_str(op);
        for column in [
            &mut self.source_op,
            &mut self.source_db,
            &mut self.source_schema,
            &mut self.source_table,
            &mut self.tx_id,
            &mut self.position,
            &mut self.sequence,
            &mut self.event_id,
            &mut self.ddl,
        ] {
            column.push_null();
        }
        self.event_time.push(None);
        self.capture_time.push(None);
        self.primary_key.push_null();
        self.before.push_null();
        self.after.push_null();
        self.metadata.push_null();
        match error {
            Some((message, raw)) => {
                self.error.push_str(message);
                self.raw.push_bytes(raw);
            }
            None => {
                self.error.push_null();
                self.raw.push_null();
            }
        }
        self.end_row();
    }

    /// The finished batch.
    pub fn finish(self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(constant(self.format, self.rows)),
            Arc::new(self.op.finish_utf8()),
            Arc::new(self.source_op.finish_utf8()),
            Arc::new(self.source_db.finish_utf8()),
            Arc::new(self.source_schema.finish_utf8()),
            Arc::new(self.source_table.finish_utf8()),
            Arc::new(self.event_time.finish()),
            Arc::new(self.capture_time.finish()),
            Arc::new(self.tx_id.finish_utf8()),
            Arc::new(self.position.finish_utf8()),
            Arc::new(self.sequence.finish_binary()),
            Arc::new(self.event_id.finish_utf8()),
            Arc::new(self.primary_key.finish()),
            Arc::new(self.before.finish()),
            Arc::new(self.after.finish()),
            Arc::new(self.ddl.finish_utf8()),
            Arc::new(self.metadata.finish()),
            Arc::new(self.error.finish_utf8()),
            Arc::new(self.raw.finish_binary()),
        ];
        let Some(typed) = self.typed else {
            // The columns are built to the schema's types by construction.
            return RecordBatch::try_new(event_schema(), columns)
                .expect("event columns match the schema");
        };
        let multi = typed.spec().is_multi();
        let mut fields: Vec<FieldRef> = event_schema().fields().iter().cloned().collect();
        let typed = typed.finish();
        if multi {
            for (field, array) in typed {
                fields.push(Arc::new(field));
                columns.push(array);
            }
        } else {
            // `before` and `after` in place of the text maps; `after_absent` last.
            let mut typed = typed.into_iter();
            // (The positions first: zip stops on them without taking `after_absent`.)
            for (at, (field, array)) in [13, 14].into_iter().zip(typed.by_ref()) {
                fields[at] = Arc::new(field);
                columns[at] = array;
            }
            for (field, array) in typed {
                fields.push(Arc::new(field));
                columns.push(array);
            }
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .expect("typed columns match their fields")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn truncate_drops_half_written_rows() {
        let mut b = EventBuilder::new("f");
        b.push_bare("tombstone", None);
        let mark = b.len();
        b.op.push_str("insert");
        b.after.entry("id", Some("1"));
        b.after.close();
        b.truncate(mark);
        b.push_bare("error", Some(("bad", b"\x00")));
        let batch = b.finish();
        assert_eq!(batch.num_rows(), 2);
        let after = batch.column_by_name("after").unwrap();
        assert_eq!(after.null_count(), 2);
        let raw = batch.column_by_name("raw").unwrap();
        assert!(raw.is_null(0) && raw.is_valid(1));
    }

    #[test]
    fn insert_keeps_the_first_key() {
        let mut m = MapColumn::default();
        m.insert("a", "1");
        m.insert("a", "2");
        m.close();
        m.insert("a", "3");
        m.close();
        let map = m.finish();
        assert_eq!(map.value(0).len(), 1);
        assert_eq!(map.value(1).len(), 1);
    }
}
