//! One Datastream Avro record: its values read as text into one arena ([`Record::read`]),
//! then written as an event ([`Record::write`]), its op deciding which image the payload is.

use std::borrow::Cow;

use crate::avro::{array_items, branch, deeper, resolve, Cursor, Logical, Node, Schema};
use crate::error::{Error, Result};
use crate::events::EventBuilder;
use crate::formats::datastream::LogPlace;
use crate::render::avro::{json_array, json_value, text_value, within_limit};
use crate::text;

use super::plan::{Meta, Plan, Top};

type Span = std::ops::Range<usize>;

/// One record's values, read before its row is written (its op decides which side the
/// payload goes to, and the payload may come before `source_metadata`).
#[derive(Debug, Default)]
pub(super) struct Record {
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

    pub(super) fn read(&mut self, plan: &Plan, cur: &mut Cursor) -> Result<()> {
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
        let fields = schema.fields(record);
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
        let fields = schema.fields(record);
        let mut image = self.image.take().unwrap_or_default();
        image.clear();
        for (j, field) in fields.iter().enumerate() {
            let value = self.value(schema, cur, field.node, 2)?;
            image.push((j, value));
        }
        self.image = Some(image);
        Ok(())
    }

    /// Whether the record's payload is there (not null).
    pub(super) fn has_payload(&self) -> bool {
        self.image.is_some()
    }

    /// The schema pass: the payload's values that may widen their column's type
    /// ([`Plan::widening_fields`]), as name and text.
    pub(super) fn widening_values<'s>(
        &'s self,
        plan: &'s Plan,
    ) -> impl Iterator<Item = (Cow<'s, str>, Option<Cow<'s, str>>)> + 's {
        let types = plan.payload_types.as_deref().unwrap_or_default();
        let image = self.image.as_deref().unwrap_or_default();
        plan.widening_fields.iter().filter_map(move |&j| {
            let ((name, _), (_, value)) = (types.get(j)?, image.get(j)?);
            let value = value
                .as_ref()
                .map(|s| Cow::Borrowed(text::utf8(&self.text[s.clone()]).unwrap_or_default()));
            Some((Cow::Borrowed(name.as_str()), value))
        })
    }

    /// `source_metadata.primary_keys`, as read.
    pub(super) fn keys(&self) -> Vec<&str> {
        self.keys
            .iter()
            .map(|span| text::utf8(&self.text[span.clone()]).unwrap_or_default())
            .collect()
    }

    pub(super) fn write(&self, plan: &Plan, rows: &mut EventBuilder) {
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
        let change = text(&self.change);
        let place = LogPlace {
            event_time: self.source_timestamp,
            log_file: text(&self.log_file),
            log_position: self.log_position,
            scn: self.scn,
            rs_id: text(&self.rs_id),
            ssn: self.ssn,
            lsn: text(&self.lsn),
            sort_numbers: self.sort_numbers.as_deref(),
            ..LogPlace::new(method)
        };
        let op = place.op(change);
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

        place.write_position(&mut rows.position);
        place.write_sequence(&mut rows.sequence, &mut Vec::new());
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
        if rows.schema_pass() {
            rows.before.push_null();
            rows.after.push_null();
        } else if let Some(typed) = rows.typed().filter(|typed| typed.direct()) {
            // One schema: the values convert as they are read, with no text map written
            // (render::convert_image does the same for the JSON formats).
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
        if rows.schema_pass() {
            rows.metadata.push_null();
        } else {
            self.write_metadata(plan, rows);
        }
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, plan: &Plan, rows: &mut EventBuilder) {
        let top = plan.schema.fields(plan.schema.root);
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
    json_array(cur, out, |cur, out| {
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
    })
}
