//! `datastream-avro`: one Google Cloud Datastream Avro object-container file per input
//! value, many events. Every rule is written down in docs/formats/datastream-avro.md, which
//! the Python fallback follows too. The container and datum rules are [`crate::avro`]'s, a
//! value's text is [`crate::render::avro`]'s; the event columns are those of
//! `datastream-json` (docs/formats/datastream-json.md).
//!
//! A file gives all of its events or one error row: the whole file is read before any of
//! its rows are kept. The parts: this file reads the container; [`plan`] compiles a schema
//! into the roles of its fields; [`record`] reads one record and writes its event.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::avro::{self, Codec, Cursor, Schema};
use crate::error::{Error, Result};
use crate::formats::FormatDecoder;
use crate::json;
use crate::limits::{grouped, Limits, OverLimit};
use crate::render::avro::{limit_text, over_output};
use crate::schemas::{Dialect, SchemaCache, WireSchema};
use crate::sink::Sink;

mod plan;
mod record;

use plan::Plan;
use record::Record;

/// The format's name.
pub const FORMAT: &str = "datastream-avro";

/// Compiled schemas kept, by their JSON text (files of one table share one).
const CACHED_SCHEMAS: usize = 256;

/// Decodes Datastream Avro files. Keeps compiled schemas and its buffers between files.
#[derive(Debug, Default)]
pub struct DatastreamAvro {
    parser: json::Parser,
    /// Compiled schemas by their text's [`schema_key`], with the text (compared on a hit).
    plans: HashMap<u64, (Vec<u8>, Arc<Plan>)>,
    inflated: Vec<u8>,
    record: Record,
    limits: Limits,
    /// The schema pass's wire schemas.
    wire: Wire,
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
            wire,
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
                    let mut plan = Plan::compile(schema)?;
                    if rows.schema_pass() {
                        plan.payload_types = plan::payload_types(json).map(Arc::from);
                        if let Some(types) = &plan.payload_types {
                            plan.widening_fields = plan::widening_fields(types);
                        }
                    }
                    let plan = Arc::new(plan);
                    if plans.len() >= CACHED_SCHEMAS {
                        plans.clear();
                    }
                    plans.insert(key, (header.schema.to_vec(), plan.clone()));
                    plan
                }
            };
            let output_limit = limits.output_limit(value.len());
            limit_text(output_limit, limits.max_output_ratio);
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
                    if rows.schema_pass() {
                        rows.observe(wire.of(&plan, record));
                        rows.observe_values(record.widening_values(&plan));
                    }
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

/// The schema pass's memory: its wire schemas, and the last one given, with the plan and
/// key it was for (the records of a file share both).
#[derive(Debug, Default)]
struct Wire {
    schemas: SchemaCache,
    /// (Holding the plan keeps its address from being reused by another.)
    last: Option<(Arc<Plan>, Vec<String>, Arc<WireSchema>)>,
}

impl Wire {
    /// The wire schema of a record with a payload: its columns typed by the file's schema,
    /// its key `source_metadata.primary_keys` (`None` when empty).
    fn of(&mut self, plan: &Arc<Plan>, record: &Record) -> Option<Arc<WireSchema>> {
        use std::hash::{Hash, Hasher};
        if !record.has_payload() {
            return None;
        }
        let columns = plan.payload_types.as_ref()?;
        let keys = record.keys();
        if let Some((last_plan, last_keys, schema)) = &self.last {
            if Arc::ptr_eq(last_plan, plan)
                && last_keys
                    .iter()
                    .map(String::as_str)
                    .eq(keys.iter().copied())
            {
                return Some(Arc::clone(schema));
            }
        }
        let key = (!keys.is_empty()).then_some(keys);
        let mut hasher = std::hash::DefaultHasher::new();
        (&**columns, &key).hash(&mut hasher);
        let same = |held: &WireSchema| {
            let same_key = match (&held.key, &key) {
                (None, None) => true,
                (Some(h), Some(k)) => h.iter().map(String::as_str).eq(k.iter().copied()),
                _ => false,
            };
            same_key && held.has_columns(columns)
        };
        let owned_key: Option<Vec<String>> = key
            .as_ref()
            .map(|k| k.iter().map(|s| s.to_string()).collect());
        let schema = self.schemas.get(hasher.finish(), same, || {
            WireSchema::typed(Dialect::Avro, columns.iter().cloned(), owned_key.clone())
        });
        self.last = Some((
            Arc::clone(plan),
            owned_key.unwrap_or_default(),
            Arc::clone(&schema),
        ));
        Some(schema)
    }
}

/// A schema text's cache key: its CRC-32 (SIMD, a fraction of SipHash's cost on the few KB
/// of every file's schema) and its length.
fn schema_key(text: &[u8]) -> u64 {
    u64::from(crc32fast::hash(text)) | (text.len() as u64) << 32
}
