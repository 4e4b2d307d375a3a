//! The schema pass (docs/schemas.md): what a stream's messages say of their tables' columns,
//! read by the decoder in a mode of its own ([`crate::formats::Options::schemas`]).
//!
//! Each format reads a message exactly as it does to decode it (the same checks, the same
//! errors), and for each event row tells the builder the wire schema of its table
//! ([`WireSchema`]: the columns in order, each with its source type as sent and the Spark
//! type [`mapping`] gives it, the key columns where the wire names them). It writes no
//! row images or metadata. As a batch ends, [`aggregate`] turns the rows into one row per
//! table and schema seen (where in the stream it was seen first and last), and one row per
//! message that did not decode; [`schema_batch_schema`] is its Arrow schema.
//!
//! `python/cdc_decode/fallback/_schemas.py` is the Python engine's twin.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_array::{
    Array, ArrayRef, BinaryArray, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

pub mod mapping;
pub mod widen;

pub use mapping::{spark_type, Dialect};

/// One column as the wire describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WireColumn {
    pub name: String,
    /// The source type as the format spells it; `None` where the wire carries no types.
    pub source_type: Option<String>,
    /// The Spark type ([`mapping::spark_type`]); `None` without a source type, or for one
    /// the mapping does not know.
    pub spark_type: Option<String>,
}

/// A table's columns and key as one message (or event) describes them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WireSchema {
    /// Whose spelling the source types are; `None` when the wire carries no types.
    pub dialect: Option<Dialect>,
    pub columns: Vec<WireColumn>,
    /// The key columns, in key order; `None` where the wire does not say.
    pub key: Option<Vec<String>>,
}

impl WireSchema {
    /// Columns with types in `dialect`, their Spark types mapped.
    pub fn typed(
        dialect: Dialect,
        columns: impl IntoIterator<Item = (String, String)>,
        key: Option<Vec<String>>,
    ) -> Self {
        let columns = columns
            .into_iter()
            .map(|(name, source_type)| WireColumn {
                spark_type: spark_type(dialect, &source_type),
                source_type: Some(source_type),
                name,
            })
            .collect();
        Self {
            dialect: Some(dialect),
            columns,
            key,
        }
    }

    /// Column names only: the wire carries no types.
    pub fn names(names: impl IntoIterator<Item = String>, key: Option<Vec<String>>) -> Self {
        let columns = names
            .into_iter()
            .map(|name| WireColumn {
                name,
                source_type: None,
                spark_type: None,
            })
            .collect();
        Self {
            dialect: None,
            columns,
            key,
        }
    }

    /// Whether its columns are `columns` (names and source types), in order: a cached
    /// schema's check before a format reuses it.
    pub fn has_columns(&self, columns: &[(String, String)]) -> bool {
        self.columns.len() == columns.len()
            && self
                .columns
                .iter()
                .zip(columns)
                .all(|(h, (name, t))| h.name == *name && h.source_type.as_deref() == Some(t))
    }
}

/// Wire schemas built once per distinct description, as formats come across them: a format
/// looks one up by a hash of the parts it has borrowed from the message, and builds (and
/// allocates) it only when it is new. Every message of a table then shares one schema
/// object, which [`aggregate`] groups by without comparing contents.
#[derive(Debug, Default)]
pub struct SchemaCache {
    by_hash: HashMap<u64, Vec<Arc<WireSchema>>>,
    by_bytes: HashMap<u64, Vec<ByBytes>>,
    held: usize,
}

/// A schema known by the bytes that describe it: the caller's tag, the bytes, and the schema
/// (none where they describe no table).
type ByBytes = (u64, Vec<u8>, Option<Arc<WireSchema>>);

impl SchemaCache {
    /// Schemas held before the cache starts again (a stream of a few thousand tables at
    /// most keeps every one).
    const MAX: usize = 4096;

    /// The schema whose parts hash to `hash` and for which `same` holds, else the one
    /// `build` makes, kept for next time.
    pub fn get(
        &mut self,
        hash: u64,
        same: impl Fn(&WireSchema) -> bool,
        build: impl FnOnce() -> WireSchema,
    ) -> Arc<WireSchema> {
        if let Some(found) = self
            .by_hash
            .get(&hash)
            .and_then(|held| held.iter().find(|s| same(s)))
        {
            return Arc::clone(found);
        }
        if self.held >= Self::MAX {
            self.by_hash.clear();
            self.by_bytes.clear();
            self.held = 0;
        }
        let schema = Arc::new(build());
        self.by_hash
            .entry(hash)
            .or_default()
            .push(Arc::clone(&schema));
        self.held += 1;
        schema
    }

    /// The schema a format described with these exact bytes (and `tag`, for what the
    /// bytes do not say), built by `build` the first time: a CRC-32 of the bytes finds it,
    /// a comparison of them confirms it.
    pub fn by_bytes(
        &mut self,
        tag: u64,
        bytes: &[u8],
        build: impl FnOnce() -> Option<WireSchema>,
    ) -> Option<Arc<WireSchema>> {
        let hash = (u64::from(crc32fast::hash(bytes)) | (bytes.len() as u64) << 32) ^ tag;
        if let Some(found) = self.by_bytes.get(&hash).and_then(|held| {
            held.iter()
                .find(|(t, b, _)| *t == tag && b.as_slice() == bytes)
        }) {
            return found.2.clone();
        }
        if self.held >= Self::MAX {
            self.by_hash.clear();
            self.by_bytes.clear();
            self.held = 0;
        }
        let schema = build().map(Arc::new);
        self.by_bytes
            .entry(hash)
            .or_default()
            .push((tag, bytes.to_vec(), schema.clone()));
        self.held += 1;
        schema
    }

    /// The schema equal to `schema`, built or not.
    pub fn intern(&mut self, schema: WireSchema) -> Arc<WireSchema> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        schema.hash(&mut hasher);
        let hash = hasher.finish();
        self.get(hash, |held| *held == schema, || schema.clone())
    }
}

/// The schema pass's output columns, in order.
pub fn schema_batch_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let text = || DataType::Utf8;
            let column = Fields::from(vec![
                Field::new("name", text(), false),
                Field::new("source_type", text(), true),
                Field::new("type", text(), true),
            ]);
            let columns = DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(column),
                false,
            )));
            let key = DataType::List(Arc::new(Field::new("item", text(), true)));
            Arc::new(Schema::new(vec![
                Field::new("source_db", text(), true),
                Field::new("source_schema", text(), true),
                Field::new("source_table", text(), true),
                Field::new("dialect", text(), true),
                Field::new("columns", columns, true),
                Field::new("key", key, true),
                Field::new("events", DataType::Int64, false),
                Field::new("first_ordinal", DataType::Int64, false),
                Field::new("last_ordinal", DataType::Int64, false),
                Field::new("first_sequence", DataType::Binary, true),
                Field::new("last_sequence", DataType::Binary, true),
                Field::new("error", text(), true),
            ]))
        })
        .clone()
}

/// One output row being gathered.
struct Group {
    names: [Option<String>; 3],
    schema: Option<Arc<WireSchema>>,
    events: i64,
    first_ordinal: i64,
    last_ordinal: i64,
    first_sequence: Option<Vec<u8>>,
    last_sequence: Option<Vec<u8>>,
    error: Option<String>,
}

fn text_at(array: &StringArray, row: usize) -> Option<&str> {
    array.is_valid(row).then(|| array.value(row))
}

/// A group of [`aggregate`]: a row's db, schema and table, and its schema object's address.
type GroupKey<'a> = ([Option<&'a str>; 3], usize);

/// The schema pass's batch of one call: a row per (table, schema) of the event rows that
/// carry a schema, and a row per error row, ordered by their first ordinal. `events` is the
/// call's event batch, `ordinals` each row's input ordinal and `schemas` each row's schema.
///
/// A (table, schema) row counts its events and keeps the least and greatest ordinal and
/// `sequence` (byte order, nulls aside) of them: aggregates that do not depend on the order
/// rows come in, so the rows of two calls or of two Spark partitions merge the same way.
pub fn aggregate(
    events: &RecordBatch,
    ordinals: &[i64],
    schemas: &[Option<Arc<WireSchema>>],
) -> (RecordBatch, Vec<i64>) {
    let column = |name: &str| {
        events
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .expect("an event column")
    };
    let (op, db, schema, table, error) = (
        column("op"),
        column("source_db"),
        column("source_schema"),
        column("source_table"),
        column("error"),
    );
    let sequence = events
        .column_by_name("sequence")
        .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
        .expect("the sequence column");
    let mut groups: Vec<Group> = Vec::new();
    // Rows of one table and one schema object: the common case, found without hashing the
    // schema; equal schemas held by different objects are joined below.
    let mut by_pointer: HashMap<GroupKey, usize> = HashMap::new();
    let mut last: Option<(GroupKey, usize)> = None;
    for (row, &ordinal) in ordinals.iter().enumerate().take(events.num_rows()) {
        if op.value(row) == "error" {
            groups.push(Group {
                names: [None, None, None],
                schema: None,
                events: 0,
                first_ordinal: ordinal,
                last_ordinal: ordinal,
                first_sequence: None,
                last_sequence: None,
                error: text_at(error, row).map(str::to_string),
            });
            continue;
        }
        let Some(wire) = schemas.get(row).and_then(|s| s.as_ref()) else {
            continue;
        };
        let names = [text_at(db, row), text_at(schema, row), text_at(table, row)];
        let key = (names, Arc::as_ptr(wire) as usize);
        // Rows come in runs of one table: the last row's group first, without hashing.
        let at = match last {
            Some((last_key, at)) if last_key == key => at,
            _ => *by_pointer.entry(key).or_insert_with(|| {
                groups.push(Group {
                    names: names.map(|n| n.map(str::to_string)),
                    schema: Some(Arc::clone(wire)),
                    events: 0,
                    first_ordinal: ordinal,
                    last_ordinal: ordinal,
                    first_sequence: None,
                    last_sequence: None,
                    error: None,
                });
                groups.len() - 1
            }),
        };
        last = Some((key, at));
        let group = &mut groups[at];
        group.events += 1;
        group.first_ordinal = group.first_ordinal.min(ordinal);
        group.last_ordinal = group.last_ordinal.max(ordinal);
        if sequence.is_valid(row) {
            let value = sequence.value(row);
            if group.first_sequence.as_deref().is_none_or(|s| value < s) {
                group.first_sequence = Some(value.to_vec());
            }
            if group.last_sequence.as_deref().is_none_or(|s| value > s) {
                group.last_sequence = Some(value.to_vec());
            }
        }
    }
    let groups = join_equal(groups);
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| groups[i].first_ordinal);
    let ordered: Vec<&Group> = order.iter().map(|&i| &groups[i]).collect();
    let ordinals = ordered.iter().map(|g| g.first_ordinal).collect();
    (build(&ordered), ordinals)
}

/// Groups of one table whose schemas are equal but held by different objects, as one.
fn join_equal(groups: Vec<Group>) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::with_capacity(groups.len());
    let mut by_content: HashMap<([Option<String>; 3], Arc<WireSchema>), usize> = HashMap::new();
    for group in groups {
        let Some(schema) = group.schema.clone() else {
            out.push(group);
            continue;
        };
        match by_content.get(&(group.names.clone(), Arc::clone(&schema))) {
            Some(&at) => {
                let into = &mut out[at];
                into.events += group.events;
                into.first_ordinal = into.first_ordinal.min(group.first_ordinal);
                into.last_ordinal = into.last_ordinal.max(group.last_ordinal);
                if let Some(s) = group.first_sequence {
                    if into.first_sequence.as_ref().is_none_or(|f| s < *f) {
                        into.first_sequence = Some(s);
                    }
                }
                if let Some(s) = group.last_sequence {
                    if into.last_sequence.as_ref().is_none_or(|l| s > *l) {
                        into.last_sequence = Some(s);
                    }
                }
            }
            None => {
                by_content.insert((group.names.clone(), schema), out.len());
                out.push(group);
            }
        }
    }
    out
}

fn build(groups: &[&Group]) -> RecordBatch {
    let names = |i: usize| -> ArrayRef {
        Arc::new(StringArray::from_iter(
            groups.iter().map(|g| g.names[i].as_deref()),
        ))
    };
    let dialect: StringArray = groups
        .iter()
        .map(|g| g.schema.as_ref().and_then(|s| s.dialect).map(Dialect::name))
        .collect();
    let schema = schema_batch_schema();
    let DataType::List(column_item) = schema.field_with_name("columns").unwrap().data_type() else {
        unreachable!("columns is a list")
    };
    let DataType::List(key_item) = schema.field_with_name("key").unwrap().data_type() else {
        unreachable!("key is a list")
    };
    let DataType::Struct(column_fields) = column_item.data_type() else {
        unreachable!("columns holds structs")
    };
    // columns: list<struct<name, source_type, type>>
    let mut offsets = vec![0i32];
    let (mut name, mut source_type, mut spark) = (Vec::new(), Vec::new(), Vec::new());
    let mut valid = Vec::with_capacity(groups.len());
    for group in groups {
        if let Some(schema) = &group.schema {
            for column in &schema.columns {
                name.push(column.name.as_str());
                source_type.push(column.source_type.as_deref());
                spark.push(column.spark_type.as_deref());
            }
        }
        valid.push(group.schema.is_some());
        offsets.push(name.len() as i32);
    }
    let structs = StructArray::new(
        column_fields.clone(),
        vec![
            Arc::new(StringArray::from(name)) as ArrayRef,
            Arc::new(StringArray::from(source_type)),
            Arc::new(StringArray::from(spark)),
        ],
        None,
    );
    let columns = ListArray::new(
        column_item.clone(),
        OffsetBuffer::new(offsets.into()),
        Arc::new(structs),
        Some(NullBuffer::from(valid)),
    );
    // key: list<string>
    let mut offsets = vec![0i32];
    let mut items: Vec<&str> = Vec::new();
    let mut valid = Vec::with_capacity(groups.len());
    for group in groups {
        let key = group.schema.as_ref().and_then(|s| s.key.as_ref());
        if let Some(key) = key {
            items.extend(key.iter().map(String::as_str));
        }
        valid.push(key.is_some());
        offsets.push(items.len() as i32);
    }
    let key = ListArray::new(
        key_item.clone(),
        OffsetBuffer::new(offsets.into()),
        Arc::new(StringArray::from(items)),
        Some(NullBuffer::from(valid)),
    );
    let int = |f: &dyn Fn(&Group) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(groups.iter().map(|g| f(g))))
    };
    let bytes = |f: &dyn Fn(&Group) -> Option<&[u8]>| -> ArrayRef {
        Arc::new(BinaryArray::from_iter(groups.iter().map(|g| f(g))))
    };
    let error: StringArray = groups.iter().map(|g| g.error.as_deref()).collect();
    RecordBatch::try_new(
        schema,
        vec![
            names(0),
            names(1),
            names(2),
            Arc::new(dialect),
            Arc::new(columns),
            Arc::new(key),
            int(&|g| g.events),
            int(&|g| g.first_ordinal),
            int(&|g| g.last_ordinal),
            bytes(&|g| g.first_sequence.as_deref()),
            bytes(&|g| g.last_sequence.as_deref()),
            Arc::new(error),
        ],
    )
    .expect("schema pass columns match their schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::{Decoder, Mode};
    use crate::formats::Options;
    use arrow_array::{ArrayRef, BinaryArray, StringArray};

    fn pass(format: &str, messages: &[&str], keys: Option<Vec<Option<&str>>>) -> RecordBatch {
        let options = Options {
            schemas: true,
            ..Options::default()
        };
        let mut decoder = Decoder::with_options(format, Mode::Permissive, &options).unwrap();
        let values: ArrayRef = Arc::new(BinaryArray::from(
            messages
                .iter()
                .map(|m| Some(m.as_bytes()))
                .collect::<Vec<_>>(),
        ));
        let keys = keys.map(StringArray::from);
        decoder.decode(&values, keys.as_ref(), true).unwrap().batch
    }

    fn debezium(table: &str, columns: &[(&str, &str)], id: u64) -> String {
        let fields: Vec<String> = columns
            .iter()
            .map(|(name, t)| format!(r#"{{"type":"{t}","field":"{name}"}}"#))
            .collect();
        let after: Vec<String> = columns
            .iter()
            .map(|(name, _)| format!(r#""{name}":{id}"#))
            .collect();
        format!(
            r#"{{"schema":{{"type":"struct","fields":[{{"type":"struct","field":"after","fields":[{}]}}]}},"payload":{{"op":"c","after":{{{}}},"source":{{"db":"d","table":"{table}","file":"f","pos":{id}}}}}}}"#,
            fields.join(","),
            after.join(",")
        )
    }

    /// Rows per table and schema, in order of their first message; a schema change is a
    /// second row of its table; the key from the message key; an error row per bad message.
    #[test]
    fn tables_and_versions_of_a_batch() {
        let one = [("id", "int64"), ("a", "int32")];
        let two = [("id", "int64"), ("a", "int64"), ("b", "string")];
        let messages = [
            debezium("t", &one, 1),
            debezium("u", &one, 2),
            "not json".to_string(),
            debezium("t", &one, 3),
            debezium("t", &two, 4),
        ];
        let refs: Vec<&str> = messages.iter().map(String::as_str).collect();
        let key = r#"{"id":1}"#;
        let batch = pass(
            "debezium-json",
            &refs,
            Some(vec![Some(key), None, None, Some(key), Some(key)]),
        );
        let rows: Vec<(Option<String>, i64, i64, Option<String>)> = (0..batch.num_rows())
            .map(|i| {
                let text = |name: &str| {
                    let c = batch.column_by_name(name).unwrap();
                    let c = c.as_any().downcast_ref::<StringArray>().unwrap();
                    c.is_valid(i).then(|| c.value(i).to_string())
                };
                let int = |name: &str| {
                    let c = batch.column_by_name(name).unwrap();
                    c.as_any().downcast_ref::<Int64Array>().unwrap().value(i)
                };
                (
                    text("source_table"),
                    int("events"),
                    int("first_ordinal"),
                    text("error"),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (Some("t".into()), 2, 0, None),
                (Some("u".into()), 1, 1, None),
                (
                    None,
                    0,
                    2,
                    Some("invalid JSON: expected a value at byte 0".into())
                ),
                (Some("t".into()), 1, 4, None),
            ]
        );
        let columns = batch.column_by_name("columns").unwrap();
        let columns = columns.as_any().downcast_ref::<ListArray>().unwrap();
        let last = columns.value(3);
        let last = last.as_any().downcast_ref::<StructArray>().unwrap();
        let types = last
            .column(2)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            types.iter().collect::<Vec<_>>(),
            [Some("bigint"), Some("bigint"), Some("string")]
        );
        let keys = batch.column_by_name("key").unwrap();
        let keys = keys.as_any().downcast_ref::<ListArray>().unwrap();
        // `t`'s first rows had a key from the message key, `u`'s none.
        assert!(keys.is_valid(0) && keys.is_null(1));
    }

    /// Equal schemas held by different objects join into one row.
    #[test]
    fn equal_schemas_join() {
        let schema = |key: &str| {
            Arc::new(WireSchema::typed(
                Dialect::Mysql,
                [("id".to_string(), "int".to_string())],
                Some(vec![key.to_string()]),
            ))
        };
        let mut cache = SchemaCache::default();
        let a = cache.intern((*schema("id")).clone());
        let b = cache.intern((*schema("id")).clone());
        assert!(Arc::ptr_eq(&a, &b));
        let c = cache.by_bytes(1, b"columns", || Some((*schema("id")).clone()));
        let d = cache.by_bytes(1, b"columns", || unreachable!("known by its bytes"));
        assert!(Arc::ptr_eq(c.as_ref().unwrap(), d.as_ref().unwrap()));
        assert!(cache.by_bytes(2, b"columns", || None).is_none());
        let messages = [
            debezium("t", &[("id", "int64")], 1),
            debezium("t", &[("id", "int64")], 2),
        ];
        let refs: Vec<&str> = messages.iter().map(String::as_str).collect();
        assert_eq!(pass("debezium-json", &refs, None).num_rows(), 1);
    }
}
