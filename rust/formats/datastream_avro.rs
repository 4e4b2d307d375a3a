//! `datastream-avro`: one Google Cloud Datastream Avro object-container file per input
//! value, many events. Every rule is written down in docs/formats/datastream-avro.md, which
//! the Python fallback follows too. The container and datum rules are [`crate::avro`]'s; the
//! event columns are those of `datastream-json` (docs/formats/datastream-json.md).
//!
//! A file gives all of its events or one error row: the whole file is read before any of
//! its rows are kept.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::TimeUnit;
use bytes::Bytes;

use crate::avro::{self, Codec, Cursor, Logical, Node, Schema, Shape};
use crate::error::{Error, Result};
use crate::events::EventBuilder;
use crate::formats::datastream_json::lsn_halves;
use crate::formats::FormatDecoder;
use crate::json;
use crate::limits::{grouped, Limits, OverLimit};
use crate::sequence::OrderKey;
use crate::sink::Sink;
use crate::text;

/// The format's name.
pub const FORMAT: &str = "datastream-avro";

/// PostgreSQL's `infinity` and `-infinity` as the JDBC driver writes timestamps.
const INFINITY: i64 = 9_223_372_036_825_200_000;
const NEG_INFINITY: i64 = -9_223_372_036_832_400_000;

/// Compiled schemas kept, by their JSON text (files of one table share one).
const CACHED_SCHEMAS: usize = 64;

/// Decodes Datastream Avro files. Keeps compiled schemas and its buffers between files.
#[derive(Debug, Default)]
pub struct DatastreamAvro {
    parser: json::Parser,
    /// Compiled schemas by their text's [`schema_key`], with the text (compared on a hit).
    plans: HashMap<u64, (Vec<u8>, Arc<Plan>)>,
    inflated: Vec<u8>,
    record: Record,
    limits: Limits,
}

impl DatastreamAvro {
    /// A decoder whose files are held to `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            parser: json::Parser::default().limited(limits),
            limits: *limits,
            ..Self::default()
        }
    }
}

impl FormatDecoder for DatastreamAvro {
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        _key: Option<&str>,
    ) -> Result<()> {
        let Self {
            parser,
            plans,
            inflated,
            record,
            limits,
        } = self;
        sink.events(ordinal, &value, |rows| {
            let mut cursor = Cursor::new(&value);
            let header = avro::header(&mut cursor)?;
            let key = schema_key(header.schema);
            let plan = match plans.get(&key) {
                Some((text, plan)) if text.as_slice() == header.schema => plan.clone(),
                _ => {
                    let json = parser
                        .parse(header.schema)
                        .map_err(|e| Error::Avro(format!("avro.schema: {e}")))?;
                    let mut schema = Schema::compile(json)?;
                    schema.max_depth = limits.max_avro_depth;
                    let plan = Arc::new(Plan::compile(schema)?);
                    if plans.len() >= CACHED_SCHEMAS {
                        plans.clear();
                    }
                    plans.insert(key, (header.schema.to_vec(), plan.clone()));
                    plan
                }
            };
            let output_limit = limits.output_limit(value.len());
            TEXT_LIMIT.set((output_limit, limits.max_output_ratio));
            let output_start = rows.output_bytes();
            let mut budget = limits.inflate_limit(value.len());
            let mut index = 0usize;
            let mut records = 0usize;
            while let Some((count, data)) = avro::block(&mut cursor, header.sync)? {
                let data = if header.codec == Codec::Null {
                    data
                } else {
                    avro::decompress(header.codec, data, inflated, &mut budget, limits)?;
                    &inflated[..]
                };
                if count as u64 > data.len() as u64 {
                    return Err(Error::Avro(format!(
                        "block {index}: {count} records in {} bytes",
                        data.len()
                    )));
                }
                records = records.saturating_add(count as usize);
                if records > limits.max_items {
                    return Err(OverLimit::new(
                        format!(
                            "the file has more than {} records",
                            grouped(limits.max_items)
                        ),
                        "max_items",
                        limits.max_items,
                    )
                    .into());
                }
                let mut datum = Cursor::new(data);
                for _ in 0..count {
                    record.read(&plan, &mut datum)?;
                    record.write(&plan, rows);
                    // Checked per record: a block of tiny records under long field names
                    // would otherwise write its whole output before the check.
                    if rows.output_bytes() - output_start > output_limit {
                        return Err(over_output(output_limit, limits.max_output_ratio));
                    }
                }
                if datum.remaining() != 0 {
                    return Err(Error::Avro(format!(
                        "block {index}: {} bytes left after its {count} records",
                        datum.remaining()
                    )));
                }
                index += 1;
            }
            Ok(())
        })
    }
}

/// A schema text's cache key: its CRC-32 (SIMD, a fraction of SipHash's cost on the few KB
/// of every file's schema) and its length.
fn schema_key(text: &[u8]) -> u64 {
    u64::from(crc32fast::hash(text)) | (text.len() as u64) << 32
}

thread_local! {
    /// The output limit of the file being read, and the `max_output_ratio` it comes from
    /// (set for each file before its records are read): one value's text (an array's
    /// compact JSON, whose items may repeat long field names or enum symbols) may not pass
    /// it either.
    static TEXT_LIMIT: std::cell::Cell<(usize, usize)> =
        const { std::cell::Cell::new((usize::MAX, 0)) };
}

fn over_output(limit: usize, ratio: usize) -> Error {
    OverLimit::new(
        format!(
            "the file's events take more than {} bytes (max_output_ratio times its size, or \
             output_floor_bytes if more)",
            grouped(limit)
        ),
        "max_output_ratio",
        ratio,
    )
    .into()
}

/// Fails once `out`, an array's text so far, passes the file's output limit.
fn within_limit(out: &[u8]) -> Result<()> {
    let (limit, ratio) = TEXT_LIMIT.get();
    if out.len() > limit {
        return Err(over_output(limit, ratio));
    }
    Ok(())
}

/// What a top-level field is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    Uuid,
    ReadTimestamp,
    SourceTimestamp,
    SourceMetadata,
    Payload,
    /// `stream_name`, `read_method`, `object`, `schema_key`: metadata first, in this order.
    Leading(u8),
    SortKeys,
    Other,
}

/// What a `source_metadata` field is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    Database,
    Schema,
    Table,
    Collection,
    ObjectName,
    ChangeType,
    TxId,
    PrimaryKeys,
    LogFile,
    LogPosition,
    Scn,
    RsId,
    Ssn,
    Lsn,
    Other,
}

const LEADING: [&str; 4] = ["stream_name", "read_method", "object", "schema_key"];

/// A schema compiled for events: the roles of the top-level and `source_metadata` fields.
#[derive(Debug)]
struct Plan {
    schema: Schema,
    /// The top-level fields and their roles.
    top: Vec<(Top, usize)>,
    /// The `source_metadata` record node, and its fields' roles.
    meta: Vec<Meta>,
    meta_record: Option<usize>,
    payload_record: Option<usize>,
}

impl Plan {
    fn compile(schema: Schema) -> Result<Self> {
        let bad =
            |field: &str, wanted: &str| Error::Avro(format!("schema: {field}: expected {wanted}"));
        let Node::Record { fields, .. } = schema.node(schema.root) else {
            return Err(Error::Avro(
                "schema: the top-level type is not a record".into(),
            ));
        };
        let mut top = Vec::new();
        let mut meta = Vec::new();
        let mut meta_record = None;
        let mut payload_record = None;
        for field in fields {
            let role = match field.name.as_str() {
                "uuid" => Top::Uuid,
                "read_timestamp" => Top::ReadTimestamp,
                "source_timestamp" => Top::SourceTimestamp,
                "source_metadata" => Top::SourceMetadata,
                "payload" => Top::Payload,
                "sort_keys" => Top::SortKeys,
                name => match LEADING.iter().position(|l| *l == name) {
                    Some(i) => Top::Leading(i as u8),
                    None => Top::Other,
                },
            };
            match role {
                Top::ReadTimestamp | Top::SourceTimestamp if !integer(&schema, field.node) => {
                    return Err(bad(&field.name, "a long"));
                }
                Top::SourceMetadata | Top::Payload => {
                    let record = nullable_record(&schema, field.node)
                        .ok_or_else(|| bad(&field.name, "a record"))?;
                    if role == Top::Payload {
                        payload_record = Some(record);
                    } else {
                        meta_record = Some(record);
                        let Node::Record { fields, .. } = schema.node(record) else {
                            unreachable!("a record")
                        };
                        for f in fields {
                            let role = meta_role(&f.name);
                            let path = format!("source_metadata.{}", f.name);
                            match role {
                                Meta::LogPosition | Meta::Scn | Meta::Ssn
                                    if !integer(&schema, f.node) =>
                                {
                                    return Err(bad(&path, "a long"));
                                }
                                Meta::PrimaryKeys if !string_array(&schema, f.node) => {
                                    return Err(bad(&path, "an array of strings"));
                                }
                                _ => {}
                            }
                            meta.push(role);
                        }
                    }
                }
                _ => {}
            }
            top.push((role, field.node));
        }
        Ok(Self {
            schema,
            top,
            meta,
            meta_record,
            payload_record,
        })
    }
}

fn meta_role(name: &str) -> Meta {
    match name {
        "database" => Meta::Database,
        "schema" => Meta::Schema,
        "table" => Meta::Table,
        "collection" => Meta::Collection,
        "object_name" => Meta::ObjectName,
        "change_type" => Meta::ChangeType,
        "tx_id" => Meta::TxId,
        "primary_keys" => Meta::PrimaryKeys,
        "log_file" => Meta::LogFile,
        "log_position" => Meta::LogPosition,
        "scn" => Meta::Scn,
        "rs_id" => Meta::RsId,
        "ssn" => Meta::Ssn,
        "lsn" => Meta::Lsn,
        _ => Meta::Other,
    }
}

/// `node` is `int`/`long`, or a union of those and `null`.
fn integer(schema: &Schema, node: usize) -> bool {
    nullable(schema, node, |n| matches!(n, Node::Integer { .. }))
}

/// `node` is an array of strings, or a union of that and `null`.
fn string_array(schema: &Schema, node: usize) -> bool {
    nullable(
        schema,
        node,
        |n| matches!(n, Node::Array(items) if matches!(schema.node(*items), Node::String)),
    )
}

fn nullable(schema: &Schema, node: usize, ok: impl Fn(&Node) -> bool) -> bool {
    match schema.node(node) {
        Node::Union(branches) => branches
            .iter()
            .all(|&b| matches!(schema.node(b), Node::Null) || ok(schema.node(b))),
        other => ok(other),
    }
}

/// The record of a record field, or of a union of one record and `null`.
fn nullable_record(schema: &Schema, node: usize) -> Option<usize> {
    match schema.node(node) {
        Node::Record { .. } => Some(node),
        Node::Union(branches) => {
            let mut records = branches
                .iter()
                .filter(|&&b| matches!(schema.node(b), Node::Record { .. }));
            let record = *records.next()?;
            let rest_null = branches
                .iter()
                .all(|&b| b == record || matches!(schema.node(b), Node::Null));
            rest_null.then_some(record)
        }
        _ => None,
    }
}

type Span = std::ops::Range<usize>;

/// One record's values, read before its row is written (its op decides which side the
/// payload goes to, and the payload may come before `source_metadata`).
#[derive(Debug, Default)]
struct Record {
    text: Vec<u8>,
    uuid: Option<Span>,
    read_method: Option<Span>,
    read_timestamp: Option<i64>,
    source_timestamp: Option<i64>,
    change: Option<Span>,
    database: Option<Span>,
    schema: Option<Span>,
    table: Option<Span>,
    collection: Option<Span>,
    object_name: Option<Span>,
    tx_id: Option<Span>,
    keys: Vec<Span>,
    log_file: Option<Span>,
    log_position: Option<u64>,
    scn: Option<u64>,
    rs_id: Option<Span>,
    ssn: Option<u64>,
    lsn: Option<Span>,
    /// `sort_keys`' integers, when it is an array of integers only.
    sort_numbers: Option<Vec<u64>>,
    /// The payload's fields (index in the payload record, value); `None` for a null payload.
    image: Option<Vec<(usize, Option<Span>)>>,
    /// (rank, top-level field, source_metadata field, value).
    metadata: Vec<(u8, usize, usize, Span)>,
}

const NO_FIELD: usize = usize::MAX;

impl Record {
    fn clear(&mut self) {
        // Keep the buffers' capacity from record to record.
        let mut keys = std::mem::take(&mut self.keys);
        let mut metadata = std::mem::take(&mut self.metadata);
        let mut text = std::mem::take(&mut self.text);
        keys.clear();
        metadata.clear();
        text.clear();
        *self = Self {
            keys,
            metadata,
            text,
            ..Self::default()
        };
    }

    /// Renders a value as text into the arena; `None` for null. `depth`: 1 for the
    /// top-level record's fields, 2 for those of `source_metadata` and `payload`.
    fn value(
        &mut self,
        schema: &Schema,
        cur: &mut Cursor,
        node: usize,
        depth: usize,
    ) -> Result<Option<Span>> {
        let start = self.text.len();
        let present = text_value(schema, cur, node, &mut self.text, depth)?;
        if !present {
            self.text.truncate(start);
        }
        Ok(present.then_some(start..self.text.len()))
    }

    fn read(&mut self, plan: &Plan, cur: &mut Cursor) -> Result<()> {
        self.clear();
        let schema = &plan.schema;
        for (i, &(role, node)) in plan.top.iter().enumerate() {
            match role {
                Top::Uuid => self.uuid = self.value(schema, cur, node, 1)?,
                Top::ReadTimestamp => {
                    self.read_timestamp = millis(schema, cur, node, "read_timestamp")?
                }
                Top::SourceTimestamp => {
                    self.source_timestamp = millis(schema, cur, node, "source_timestamp")?
                }
                Top::SourceMetadata => {
                    if resolve(schema, cur, node)?.is_some() {
                        self.read_meta(plan, cur)?;
                    }
                }
                Top::Payload => {
                    if resolve(schema, cur, node)?.is_some() {
                        self.read_payload(plan, cur)?;
                    }
                }
                Top::Leading(rank) => {
                    let value = self.value(schema, cur, node, 1)?;
                    if rank == 1 {
                        self.read_method = value.clone();
                    }
                    if let Some(value) = value {
                        self.metadata.push((rank, i, NO_FIELD, value));
                    }
                }
                Top::SortKeys => {
                    let start = self.text.len();
                    let mut numbers = Some(Vec::new());
                    sort_keys(schema, cur, node, &mut self.text, &mut numbers)?;
                    if self.text[start..] != *b"null" {
                        self.metadata.push((4, i, NO_FIELD, start..self.text.len()));
                    }
                    self.sort_numbers = numbers.filter(|n| !n.is_empty());
                }
                Top::Other => {
                    if let Some(value) = self.value(schema, cur, node, 1)? {
                        self.metadata.push((6, i, NO_FIELD, value));
                    }
                }
            }
        }
        Ok(())
    }

    fn read_meta(&mut self, plan: &Plan, cur: &mut Cursor) -> Result<()> {
        let schema = &plan.schema;
        let record = plan.meta_record.expect("a source_metadata record");
        let Node::Record { fields, .. } = schema.node(record) else {
            unreachable!("a record")
        };
        let top = plan
            .top
            .iter()
            .position(|(r, _)| *r == Top::SourceMetadata)
            .unwrap_or(NO_FIELD);
        for (j, (field, &role)) in fields.iter().zip(&plan.meta).enumerate() {
            let node = field.node;
            let path = |name: &str| format!("source_metadata.{name}");
            let value = match role {
                Meta::LogPosition | Meta::Scn | Meta::Ssn => {
                    let start = self.text.len();
                    let n = unsigned(schema, cur, node, &path(&field.name))?;
                    match role {
                        Meta::LogPosition => self.log_position = n,
                        Meta::Scn => self.scn = n,
                        _ => self.ssn = n,
                    }
                    n.map(|n| {
                        self.text
                            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                        start..self.text.len()
                    })
                }
                Meta::PrimaryKeys => {
                    self.read_keys(schema, cur, node)?;
                    None
                }
                _ => self.value(schema, cur, node, 2)?,
            };
            let slot = match role {
                Meta::Database => &mut self.database,
                Meta::Schema => &mut self.schema,
                Meta::Table => &mut self.table,
                Meta::Collection => &mut self.collection,
                Meta::ObjectName => &mut self.object_name,
                Meta::ChangeType => &mut self.change,
                Meta::TxId => &mut self.tx_id,
                Meta::PrimaryKeys => continue,
                Meta::LogFile => &mut self.log_file,
                Meta::RsId => &mut self.rs_id,
                Meta::Lsn => &mut self.lsn,
                Meta::LogPosition | Meta::Scn | Meta::Ssn | Meta::Other => {
                    if let Some(value) = value {
                        self.metadata.push((5, top, j, value));
                    }
                    continue;
                }
            };
            *slot = value.clone();
            if matches!(role, Meta::LogFile | Meta::RsId | Meta::Lsn) {
                if let Some(value) = value {
                    self.metadata.push((5, top, j, value));
                }
            }
        }
        Ok(())
    }

    fn read_keys(&mut self, schema: &Schema, cur: &mut Cursor, node: usize) -> Result<()> {
        let Some(array) = resolve(schema, cur, node)? else {
            return Ok(());
        };
        let Node::Array(items) = schema.node(array) else {
            unreachable!("checked at compile")
        };
        let items = *items;
        array_items(cur, |cur| {
            let start = self.text.len();
            text_value(schema, cur, items, &mut self.text, 3)?;
            self.keys.push(start..self.text.len());
            Ok(())
        })
    }

    fn read_payload(&mut self, plan: &Plan, cur: &mut Cursor) -> Result<()> {
        let schema = &plan.schema;
        let record = plan.payload_record.expect("a payload record");
        let Node::Record { fields, .. } = schema.node(record) else {
            unreachable!("a record")
        };
        let mut image = self.image.take().unwrap_or_default();
        image.clear();
        for (j, field) in fields.iter().enumerate() {
            let value = self.value(schema, cur, field.node, 2)?;
            image.push((j, value));
        }
        self.image = Some(image);
        Ok(())
    }

    fn write(&self, plan: &Plan, rows: &mut EventBuilder) {
        let text = |span: &Option<Span>| -> Option<&str> {
            span.as_ref().map(|s| {
                // SAFETY-free: every span was rendered as UTF-8 text.
                text::utf8(&self.text[s.clone()]).unwrap_or_default()
            })
        };
        let method = text(&self.read_method).unwrap_or("");
        if let Some(typed) = rows.typed() {
            // MySQL BLOB/BINARY values are hex text in Datastream's files (docs/typed.md).
            typed.hints.hex = method.starts_with("mysql");
        }
        let backfill = method.contains("backfill") || method == "oracle_dump";
        let change = text(&self.change);
        let op = if backfill {
            "read"
        } else {
            match change {
                Some("INSERT") => "insert",
                Some("UPDATE") => "update",
                Some("UPDATE-INSERT") => "update_after",
                Some("UPDATE-DELETE") => "update_before",
                Some("DELETE") => "delete",
                _ => "other",
            }
        };
        rows.op.push_str(op);
        push(&mut rows.source_op, change);
        push(&mut rows.source_db, text(&self.database));
        push(&mut rows.source_schema, text(&self.schema));
        let table = text(&self.table)
            .or(text(&self.collection))
            .or(text(&self.object_name));
        push(&mut rows.source_table, table);
        rows.event_time.push(self.source_timestamp);
        rows.capture_time.push(self.read_timestamp);
        push(&mut rows.tx_id, text(&self.tx_id));

        let event_time = self.source_timestamp;
        let mut key = Vec::new();
        let mut sequence = false;
        match method.split('-').next().unwrap_or("") {
            "mysql" => {
                let file = text(&self.log_file);
                if file.is_some() || self.log_position.is_some() {
                    let position = self.log_position.unwrap_or(0);
                    rows.position.push_with(|out| {
                        out.extend_from_slice(file.unwrap_or("").as_bytes());
                        out.push(b':');
                        out.extend_from_slice(itoa::Buffer::new().format(position).as_bytes());
                    });
                } else {
                    rows.position.push_null();
                }
                if let Some(ts) = event_time {
                    OrderKey(&mut key)
                        .u64(u64::from(!backfill))
                        .str(file.unwrap_or("").as_bytes())
                        .u64(self.log_position.unwrap_or(0))
                        .i64(ts);
                    sequence = true;
                }
            }
            "oracle" => {
                match self.scn {
                    Some(scn) => rows.position.push_str(itoa::Buffer::new().format(scn)),
                    None => rows.position.push_null(),
                }
                if let Some(ts) = event_time {
                    OrderKey(&mut key)
                        .i64(ts)
                        .u64(self.scn.unwrap_or(0))
                        .str(text(&self.rs_id).unwrap_or("").as_bytes())
                        .u64(self.ssn.unwrap_or(0));
                    sequence = true;
                }
            }
            "postgres" | "postgresql" => {
                let lsn = text(&self.lsn);
                push(&mut rows.position, lsn);
                if let Some(ts) = event_time {
                    let (hi, lo) = lsn.and_then(lsn_halves).unwrap_or((0, 0));
                    OrderKey(&mut key).i64(ts).u64(hi).u64(lo);
                    sequence = true;
                }
            }
            "sqlserver" => {
                let lsn = text(&self.lsn);
                push(&mut rows.position, lsn);
                if let Some(ts) = event_time {
                    OrderKey(&mut key).i64(ts).str(lsn.unwrap_or("").as_bytes());
                    sequence = true;
                }
            }
            _ => {
                rows.position.push_null();
                if let Some(numbers) = &self.sort_numbers {
                    let mut order = OrderKey(&mut key);
                    for &n in numbers {
                        order.u64(n);
                    }
                    sequence = true;
                } else if let Some(ts) = event_time {
                    OrderKey(&mut key).i64(ts);
                    sequence = true;
                }
            }
        }
        if sequence {
            rows.sequence.push_bytes(&key);
        } else {
            rows.sequence.push_null();
        }
        push(&mut rows.event_id, text(&self.uuid));
        if self.keys.is_empty() {
            rows.primary_key.push_null();
        } else {
            for span in &self.keys {
                rows.primary_key
                    .item(text(&Some(span.clone())).unwrap_or(""));
            }
            rows.primary_key.close();
        }
        let before_side = matches!(op, "delete" | "update_before");
        let image = match (
            &self.image,
            plan.payload_record.map(|r| plan.schema.node(r)),
        ) {
            (Some(image), Some(Node::Record { fields, .. })) => Some((image, fields)),
            _ => None,
        };
        if let Some(typed) = rows.typed().filter(|typed| typed.direct()) {
            // One schema: the values convert as they are read, with no text map written
            // (json::convert_image does the same for the JSON formats).
            typed.close_image(before_side, false);
            match image {
                Some((image, fields)) => {
                    typed.open_image(!before_side);
                    for (j, value) in image {
                        typed.image_value(!before_side, &fields[*j].name, text(value));
                    }
                    typed.close_image(!before_side, true);
                }
                None => typed.close_image(!before_side, false),
            }
            rows.before.push_null();
            rows.after.push_null();
        } else {
            let (image_map, other) = if before_side {
                (&mut rows.before, &mut rows.after)
            } else {
                (&mut rows.after, &mut rows.before)
            };
            other.push_null();
            match image {
                Some((image, fields)) => {
                    for (j, value) in image {
                        image_map.entry(&fields[*j].name, text(value));
                    }
                    image_map.close();
                }
                None => image_map.push_null(),
            }
        }
        rows.ddl.push_null();
        self.write_metadata(plan, rows);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, plan: &Plan, rows: &mut EventBuilder) {
        let Node::Record { fields: top, .. } = plan.schema.node(plan.schema.root) else {
            unreachable!("a record")
        };
        let meta_fields = match plan.meta_record.map(|r| plan.schema.node(r)) {
            Some(Node::Record { fields, .. }) => &fields[..],
            _ => &[],
        };
        let map = &mut rows.metadata;
        for rank in [0u8, 1, 2, 3, 4, 5, 6] {
            for (r, i, j, value) in &self.metadata {
                if *r != rank {
                    continue;
                }
                let name = if *j == NO_FIELD {
                    &top[*i].name
                } else {
                    &meta_fields[*j].name
                };
                let value = text::utf8(&self.text[value.clone()]).unwrap_or_default();
                map.insert(name, value);
            }
        }
        map.close_or_null();
    }
}

fn push(column: &mut crate::events::BytesColumn, value: Option<&str>) {
    match value {
        Some(v) => column.push_str(v),
        None => column.push_null(),
    }
}

/// Resolves a union (Python's negative indexing included, as fastavro reads one): the
/// branch taken, or `None` for null. A node that is not a union is itself.
fn resolve(schema: &Schema, cur: &mut Cursor, node: usize) -> Result<Option<usize>> {
    let node = branch(schema, cur, node)?;
    Ok((!matches!(schema.node(node), Node::Null)).then_some(node))
}

#[inline(always)]
fn branch(schema: &Schema, cur: &mut Cursor, node: usize) -> Result<usize> {
    let Node::Union(branches) = schema.node(node) else {
        return Ok(node);
    };
    let at = cur.position();
    let index = cur.long()?;
    let n = branches.len() as i64;
    // fastavro indexes a Python list: -1 is the last branch.
    let i = if index < 0 { index + n } else { index };
    if !(0..n).contains(&i) {
        return Err(Error::Avro(format!(
            "union index {index} at byte {at}: the union has {n} branches"
        )));
    }
    Ok(branches[i as usize])
}

/// A nullable long of epoch milliseconds as microseconds.
fn millis(schema: &Schema, cur: &mut Cursor, node: usize, path: &str) -> Result<Option<i64>> {
    let Some(node) = resolve(schema, cur, node)? else {
        return Ok(None);
    };
    debug_assert!(matches!(schema.node(node), Node::Integer { .. }));
    let ms = cur.long()?;
    const MAX_MS: i64 = i64::MAX / 1000;
    if !(-MAX_MS..=MAX_MS).contains(&ms) {
        return Err(Error::Avro(format!(
            "{path}: {ms} milliseconds is out of range"
        )));
    }
    Ok(Some(ms * 1000))
}

/// A nullable non-negative long (a log position).
fn unsigned(schema: &Schema, cur: &mut Cursor, node: usize, path: &str) -> Result<Option<u64>> {
    let Some(_) = resolve(schema, cur, node)? else {
        return Ok(None);
    };
    let n = cur.long()?;
    u64::try_from(n)
        .map(Some)
        .map_err(|_| Error::Avro(format!("{path}: expected a non-negative integer, got {n}")))
}

/// Reads an array's blocks, calling `item` for each item. A negative count (the block's
/// byte size follows, and is not needed) counts as its absolute value; a count beyond the
/// bytes left is an error (every item takes a byte or more: [`Schema::compile`]).
fn array_items(cur: &mut Cursor, mut item: impl FnMut(&mut Cursor) -> Result<()>) -> Result<()> {
    loop {
        let at = cur.position();
        let mut count = cur.long()?;
        if count == 0 {
            return Ok(());
        }
        if count < 0 {
            count = count
                .checked_neg()
                .ok_or_else(|| Error::Avro(format!("bad array block count at byte {at}")))?;
            cur.long()?;
        }
        if count as u64 > cur.remaining() as u64 {
            return Err(Error::Avro(format!(
                "array block of {count} items at byte {at} in {} bytes",
                cur.remaining()
            )));
        }
        for _ in 0..count {
            item(cur)?;
        }
    }
}

fn deeper(schema: &Schema, depth: usize, at: usize) -> Result<usize> {
    if depth >= schema.max_depth {
        return Err(OverLimit::new(
            format!(
                "values nested more than {} records and arrays deep at byte {at}",
                schema.max_depth
            ),
            "max_avro_depth",
            schema.max_depth,
        )
        .into());
    }
    Ok(depth + 1)
}

/// `sort_keys`: compact JSON into `out`, and its items as integers while they all are.
fn sort_keys(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    numbers: &mut Option<Vec<u64>>,
) -> Result<()> {
    let resolved = branch(schema, cur, node)?;
    let Node::Array(items) = schema.node(resolved) else {
        *numbers = None;
        return json_value(schema, cur, resolved, out, 1);
    };
    let items = *items;
    let depth = deeper(schema, 1, cur.position())?;
    out.push(b'[');
    let mut first = true;
    array_items(cur, |cur| {
        if !first {
            out.push(b',');
        }
        first = false;
        let item = branch(schema, cur, items)?;
        if let Node::Integer {
            logical: Logical::None,
            ..
        } = schema.node(item)
        {
            let n = cur.long()?;
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            match (numbers.as_mut(), u64::try_from(n)) {
                (Some(list), Ok(n)) => list.push(n),
                _ => *numbers = None,
            }
            Ok(())
        } else {
            *numbers = None;
            json_value(schema, cur, item, out, depth)?;
            within_limit(out)
        }
    })?;
    out.push(b']');
    Ok(())
}

/// Appends a value's text (docs/formats/datastream-avro.md, "Values"); false (and nothing
/// appended) for null. `depth` counts the records and arrays around the value.
pub fn text_value(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<bool> {
    match schema.node(node) {
        Node::Null => return Ok(false),
        Node::Boolean => {
            let b = cur.byte()?;
            out.extend_from_slice(if b != 0 { b"true" } else { b"false" });
        }
        Node::Integer { logical, .. } => {
            let v = cur.long()?;
            integer_text(v, *logical, out);
        }
        Node::Float => {
            let b = cur.take(4)?;
            text::f32_into(f32::from_le_bytes([b[0], b[1], b[2], b[3]]), out);
        }
        Node::Double => {
            let b = cur.take(8)?;
            let bits: [u8; 8] = b.try_into().expect("8 bytes");
            text::f64_into(f64::from_le_bytes(bits), out);
        }
        Node::Bytes(logical) => {
            let b = cur.bytes()?;
            bytes_text(b, *logical, out);
        }
        Node::Fixed { size, logical } => {
            let b = cur.take(*size)?;
            bytes_text(b, *logical, out);
        }
        Node::String => {
            let at = cur.position();
            let b = cur.bytes()?;
            let s = text::utf8(b)
                .ok_or_else(|| Error::Avro(format!("a string at byte {at} is not UTF-8")))?;
            out.extend_from_slice(s.as_bytes());
        }
        Node::Enum(symbols) => {
            let at = cur.position();
            let i = cur.long()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or_else(|| Error::Avro(format!("enum index {i} at byte {at}")))?;
            out.extend_from_slice(symbol.as_bytes());
        }
        Node::Array(_) => json_value(schema, cur, node, out, depth)?,
        Node::Union(_) => {
            let b = branch(schema, cur, node)?;
            return text_value(schema, cur, b, out, depth);
        }
        Node::Record { shape, fields, .. } => {
            let depth = deeper(schema, depth, cur.position())?;
            return match shape {
                Shape::Plain => {
                    json_record(schema, cur, fields, out, depth)?;
                    Ok(true)
                }
                Shape::PgArray { nested, element } => {
                    pg_array(schema, cur, fields, *nested, *element, out, depth, false)
                }
                Shape::Varchar { value } => {
                    let start = out.len();
                    let mut kept = None;
                    for (i, f) in fields.iter().enumerate() {
                        let at = out.len();
                        let present = text_value(schema, cur, f.node, out, depth)?;
                        if i == *value {
                            kept = Some((at..out.len(), present));
                        }
                    }
                    let (span, present) = kept.expect("varchar has its value field");
                    let len = span.len();
                    out.copy_within(span, start);
                    out.truncate(start + len);
                    Ok(present)
                }
                _ => {
                    shaped(schema, cur, fields, *shape, out, depth)?;
                    Ok(true)
                }
            };
        }
    }
    Ok(true)
}

/// Reads the fields of a unified date/time record and appends its text.
fn shaped(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    shape: Shape,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    let mut values = vec![0i64; fields.len()];
    let start = out.len();
    for (i, f) in fields.iter().enumerate() {
        if matches!(schema.node(f.node), Node::Integer { .. }) && used(shape, i) {
            values[i] = cur.long()?;
        } else {
            text_value(schema, cur, f.node, out, depth)?;
            out.truncate(start);
        }
    }
    match shape {
        Shape::Datetime { date, time } => {
            text::date_into(values[date], out);
            out.push(b'T');
            time_into(values[time], 6, out);
        }
        Shape::TimestampTz { timestamp, offset } => {
            let ts = values[timestamp];
            if ts == INFINITY || ts == NEG_INFINITY {
                out.extend_from_slice(if ts == INFINITY {
                    b"infinity"
                } else {
                    b"-infinity"
                });
                return Ok(());
            }
            let off = values[offset];
            let wall = off
                .checked_mul(1000)
                .and_then(|o| ts.checked_add(o))
                .ok_or_else(|| Error::Avro(format!("timestampTz {ts} {off} is out of range")))?;
            text::timestamp_into(wall, TimeUnit::Microsecond, false, out);
            offset_into(off, out);
        }
        Shape::TimeTz { time, offset } => {
            time_into(values[time], 6, out);
            offset_into(values[offset], out);
        }
        Shape::Interval {
            months,
            hours,
            micros,
        } => {
            let m = values[micros];
            out.push(b'P');
            out.extend_from_slice(itoa::Buffer::new().format(values[months]).as_bytes());
            out.extend_from_slice(b"MT");
            out.extend_from_slice(itoa::Buffer::new().format(values[hours]).as_bytes());
            out.push(b'H');
            if m < 0 {
                out.push(b'-');
            }
            let m = m.unsigned_abs();
            out.extend_from_slice(itoa::Buffer::new().format(m / 1_000_000).as_bytes());
            out.push(b'.');
            text::padded_into(m % 1_000_000, 6, out);
            out.push(b'S');
        }
        _ => unreachable!("the plain shapes are rendered elsewhere"),
    }
    Ok(())
}

fn used(shape: Shape, i: usize) -> bool {
    match shape {
        Shape::Datetime { date, time } => i == date || i == time,
        Shape::TimestampTz { timestamp, offset } => i == timestamp || i == offset,
        Shape::TimeTz { time, offset } => i == time || i == offset,
        Shape::Interval {
            months,
            hours,
            micros,
        } => i == months || i == hours || i == micros,
        _ => false,
    }
}

/// A PostgreSQL array level: the JSON array of `nestedArray` when it is not null, else the
/// `elementValue` (as text at the top, as a JSON value inside an array).
#[allow(clippy::too_many_arguments)]
fn pg_array(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    nested: usize,
    element: usize,
    out: &mut Vec<u8>,
    depth: usize,
    json: bool,
) -> Result<bool> {
    let start = out.len();
    let mut nested_span = start..start;
    let mut element_span = None;
    for (i, f) in fields.iter().enumerate() {
        let at = out.len();
        if i == nested {
            json_value(schema, cur, f.node, out, depth)?;
            nested_span = at..out.len();
        } else if i == element {
            let present = if json {
                json_value(schema, cur, f.node, out, depth)?;
                true
            } else {
                text_value(schema, cur, f.node, out, depth)?
            };
            element_span = Some((at..out.len(), present));
        }
    }
    let (span, present) = if out[nested_span.clone()] != *b"null" {
        (nested_span, true)
    } else {
        element_span.expect("both fields read")
    };
    let len = span.len();
    out.copy_within(span, start);
    out.truncate(start + len);
    Ok(present)
}

/// Appends a value as compact JSON (docs/formats/datastream-avro.md, "Values").
pub fn json_value(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    match schema.node(node) {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Boolean => {
            let b = cur.byte()?;
            out.extend_from_slice(if b != 0 { b"true" } else { b"false" });
        }
        Node::Integer {
            logical: Logical::None,
            ..
        } => {
            let v = cur.long()?;
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        }
        Node::Float | Node::Double => {
            let start = out.len();
            text_value(schema, cur, node, out, depth)?;
            if matches!(&out[start..], b"nan" | b"inf" | b"-inf") {
                out.insert(start, b'"');
                out.push(b'"');
            }
        }
        Node::String | Node::Enum(_) => {
            let mut rendered = Vec::new();
            text_value(schema, cur, node, &mut rendered, depth)?;
            // Rendered from checked UTF-8 (strings) or the schema's symbols.
            text::json_string_into(text::utf8(&rendered).unwrap_or_default(), out);
        }
        Node::Array(items) => {
            let items = *items;
            let depth = deeper(schema, depth, cur.position())?;
            out.push(b'[');
            let mut first = true;
            array_items(cur, |cur| {
                if !first {
                    out.push(b',');
                }
                first = false;
                json_value(schema, cur, items, out, depth)?;
                within_limit(out)
            })?;
            out.push(b']');
        }
        Node::Union(_) => {
            let b = branch(schema, cur, node)?;
            json_value(schema, cur, b, out, depth)?;
        }
        Node::Record { shape, fields, .. } => match shape {
            Shape::Plain => {
                let depth = deeper(schema, depth, cur.position())?;
                json_record(schema, cur, fields, out, depth)?;
            }
            Shape::PgArray { nested, element } => {
                let depth = deeper(schema, depth, cur.position())?;
                pg_array(schema, cur, fields, *nested, *element, out, depth, true)?;
            }
            Shape::Varchar { value } => {
                let depth = deeper(schema, depth, cur.position())?;
                let start = out.len();
                let mut kept = start..start;
                for (i, f) in fields.iter().enumerate() {
                    let at = out.len();
                    json_value(schema, cur, f.node, out, depth)?;
                    if i == *value {
                        kept = at..out.len();
                    }
                }
                let len = kept.len();
                out.copy_within(kept, start);
                out.truncate(start + len);
            }
            _ => string_of(schema, cur, node, out, depth)?,
        },
        // Logical integers, bytes and fixed: their text as a JSON string.
        _ => string_of(schema, cur, node, out, depth)?,
    }
    Ok(())
}

fn string_of(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    let mut rendered = Vec::new();
    text_value(schema, cur, node, &mut rendered, depth)?;
    text::json_string_into(text::utf8(&rendered).unwrap_or_default(), out);
    Ok(())
}

fn json_record(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    out.push(b'{');
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        text::json_string_into(&f.name, out);
        out.push(b':');
        json_value(schema, cur, f.node, out, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn integer_text(v: i64, logical: Logical, out: &mut Vec<u8>) {
    match logical {
        Logical::Date => text::date_into(v, out),
        Logical::Time { digits } => time_into(v, digits, out),
        Logical::Timestamp { digits, zoned } => {
            if v == INFINITY {
                out.extend_from_slice(b"infinity");
            } else if v == NEG_INFINITY {
                out.extend_from_slice(b"-infinity");
            } else {
                let unit = match digits {
                    3 => TimeUnit::Millisecond,
                    6 => TimeUnit::Microsecond,
                    _ => TimeUnit::Nanosecond,
                };
                text::timestamp_into(v, unit, zoned, out);
            }
        }
        _ => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
    }
}

fn bytes_text(b: &[u8], logical: Logical, out: &mut Vec<u8>) {
    match logical {
        Logical::Decimal { scale } => decimal_into(b, scale as usize, out),
        _ => text::base64_into(b, out),
    }
}

/// `[-]HH:MM:SS.f…` of `value` units (`digits` 3: ms, 6: µs), hours as many as needed.
fn time_into(value: i64, digits: u8, out: &mut Vec<u8>) {
    let per_second: u64 = if digits == 3 { 1_000 } else { 1_000_000 };
    if value < 0 {
        out.push(b'-');
    }
    let v = value.unsigned_abs();
    let seconds = v / per_second;
    text::padded_into(seconds / 3600, 2, out);
    out.push(b':');
    text::padded_into(seconds / 60 % 60, 2, out);
    out.push(b':');
    text::padded_into(seconds % 60, 2, out);
    out.push(b'.');
    text::padded_into(v % per_second, digits as usize, out);
}

/// An offset in milliseconds as `±HH:MM`, with `:SS` and `.mmm` when not zero.
fn offset_into(ms: i64, out: &mut Vec<u8>) {
    out.push(if ms < 0 { b'-' } else { b'+' });
    let v = ms.unsigned_abs();
    let seconds = v / 1000;
    text::padded_into(seconds / 3600, 2, out);
    out.push(b':');
    text::padded_into(seconds / 60 % 60, 2, out);
    if v % 60_000 != 0 {
        out.push(b':');
        text::padded_into(seconds % 60, 2, out);
        if v % 1000 != 0 {
            out.push(b'.');
            text::padded_into(v % 1000, 3, out);
        }
    }
}

/// A big-endian two's complement unscaled value (any length) as plain decimal text with
/// exactly `scale` fraction digits.
fn decimal_into(bytes: &[u8], scale: usize, out: &mut Vec<u8>) {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut digits = Vec::new();
    if bytes.len() <= 16 {
        let mut v: i128 = if negative { -1 } else { 0 };
        for &b in bytes {
            v = (v << 8) | i128::from(b);
        }
        digits.extend_from_slice(itoa::Buffer::new().format(v.unsigned_abs()).as_bytes());
    } else {
        // Magnitude in base 2^32 limbs, divided down by 10^9.
        let mut magnitude: Vec<u8> = bytes.to_vec();
        if negative {
            for b in magnitude.iter_mut() {
                *b = !*b;
            }
            for b in magnitude.iter_mut().rev() {
                let (v, carry) = b.overflowing_add(1);
                *b = v;
                if !carry {
                    break;
                }
            }
        }
        let mut limbs: Vec<u32> = Vec::new();
        let pad = (4 - magnitude.len() % 4) % 4;
        let mut padded = vec![0u8; pad];
        padded.extend_from_slice(&magnitude);
        for chunk in padded.chunks(4) {
            limbs.push(u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
        }
        let mut groups = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem: u64 = 0;
            for limb in limbs.iter_mut() {
                let cur = (rem << 32) | u64::from(*limb);
                *limb = (cur / 1_000_000_000) as u32;
                rem = cur % 1_000_000_000;
            }
            groups.push(rem as u32);
        }
        match groups.split_last() {
            None => digits.push(b'0'),
            Some((top, rest)) => {
                digits.extend_from_slice(itoa::Buffer::new().format(*top).as_bytes());
                for g in rest.iter().rev() {
                    let mut text = Vec::new();
                    text::padded_into(u64::from(*g), 9, &mut text);
                    digits.extend_from_slice(&text);
                }
            }
        }
    }
    if negative && digits != b"0" {
        out.push(b'-');
    }
    if scale == 0 {
        out.extend_from_slice(&digits);
    } else if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + scale - digits.len(), b'0');
        out.extend_from_slice(&digits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(bytes: &[u8], scale: usize) -> String {
        let mut out = Vec::new();
        decimal_into(bytes, scale, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(&[0x01, 0x00], 2), "2.56");
        assert_eq!(decimal(&[0xff], 2), "-0.01");
        assert_eq!(decimal(&[], 0), "0");
        assert_eq!(decimal(&[0x00], 3), "0.000");
        let mut big = vec![0u8; 20];
        big[19] = 5;
        assert_eq!(decimal(&big, 1), "0.5");
        let minus = vec![0xffu8; 20];
        assert_eq!(decimal(&minus, 0), "-1");
        let mut large = vec![0u8; 17];
        large[0] = 1; // 2^128
        assert_eq!(
            decimal(&large, 0),
            "340282366920938463463374607431768211456"
        );
    }

    #[test]
    fn times() {
        let text = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            f(&mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(&|o| time_into(29_730_000_000, 6, o)),
            "08:15:30.000000"
        );
        assert_eq!(
            text(&|o| time_into(-3_020_399_000_000, 6, o)),
            "-838:59:59.000000"
        );
        assert_eq!(text(&|o| offset_into(3_600_000, o)), "+01:00");
        assert_eq!(text(&|o| offset_into(-19_800_000, o)), "-05:30");
        assert_eq!(
            text(&|o| integer_text(
                INFINITY,
                Logical::Timestamp {
                    digits: 6,
                    zoned: true
                },
                o
            )),
            "infinity"
        );
    }
}
