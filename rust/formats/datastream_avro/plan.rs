//! A Datastream Avro schema compiled for events ([`Plan`]): the role of each top-level and
//! `source_metadata` field, and the checks of the fields with a column of their own.

use std::collections::HashMap;
use std::sync::Arc;

use crate::avro::{Node, Schema};
use crate::error::{Error, Result};
use crate::json::{Kind, Value};

/// What a top-level field is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Top {
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
pub(super) enum Meta {
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

pub(super) const LEADING: [&str; 4] = ["stream_name", "read_method", "object", "schema_key"];

/// A schema compiled for events: the roles of the top-level and `source_metadata` fields.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) schema: Schema,
    /// The top-level fields and their roles.
    pub(super) top: Vec<(Top, usize)>,
    /// The `source_metadata` record node, and its fields' roles.
    pub(super) meta: Vec<Meta>,
    pub(super) meta_record: Option<usize>,
    pub(super) payload_record: Option<usize>,
    /// The schema pass: the payload's fields and their types as the schema spells them
    /// ([`payload_types`]).
    pub(super) payload_types: Option<Arc<[(String, String)]>>,
    /// The schema pass: the payload fields whose values may widen their column's type
    /// (Datastream's `number`, decimals), by index ([`widening_fields`]).
    pub(super) widening_fields: Vec<usize>,
}

impl Plan {
    pub(super) fn compile(schema: Schema) -> Result<Self> {
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
                        let fields = schema.fields(record);
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
            payload_types: None,
            widening_fields: Vec::new(),
        })
    }
}

/// The fields of the schema's `payload` record (`json` is the schema's JSON) and their
/// types as sent, for the schema pass: a nullable union as its other branch, then the
/// base type, then its logical type or record name: `long`, `long timestamp-micros`,
/// `bytes decimal(10,2)`, `string number`, `record timestampTz`, `enum`, `array`
/// (docs/types.md). A `logicalType` on the field counts as on its type, as the reader
/// has it. `None` when the schema has no payload record.
pub(super) fn payload_types(json: Value<'_>) -> Option<Vec<(String, String)>> {
    let mut named: HashMap<String, String> = HashMap::new();
    let fields = json.get("fields").filter(|f| f.kind() == Kind::Array)?;
    let mut payload = None;
    for field in fields.items() {
        // Named types are defined in order; those before `payload` may be used in it.
        let is_payload = field
            .get("name")
            .and_then(|n| n.as_str())
            .is_some_and(|n| n.eq_str("payload"));
        let Some(ty) = field.get("type") else {
            continue;
        };
        if is_payload {
            payload = Some(ty);
            break;
        }
        spell(ty, None, &mut named);
    }
    let payload = non_null(payload?)?;
    if payload.kind() != Kind::Object || text(payload.get("type"))?.as_str() != "record" {
        return None;
    }
    if let Some(name) = text(payload.get("name")) {
        named.insert(short(&name), "record".into());
    }
    payload
        .get("fields")
        .filter(|f| f.kind() == Kind::Array)?
        .items()
        .map(|field| {
            let name = text(field.get("name"))?;
            let spelled = spell(field.get("type")?, Some(field), &mut named);
            Some((name, spelled))
        })
        .collect()
}

fn text(value: Option<Value<'_>>) -> Option<String> {
    Some(value?.as_str()?.text().into_owned())
}

/// A name without its namespace.
fn short(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).to_string()
}

/// A union of `null` and one other type as that type; any other value as itself.
fn non_null(ty: Value<'_>) -> Option<Value<'_>> {
    if ty.kind() != Kind::Array {
        return Some(ty);
    }
    let mut others = ty
        .items()
        .filter(|b| !(b.as_str().is_some_and(|s| s.eq_str("null"))));
    let first = others.next();
    match (first, others.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// The indexes of the payload fields (of [`payload_types`]) whose values may need a wider
/// type than their own (docs/types.md, "Values wider than the wire's type"): Datastream's
/// `number` and decimals. Avro's `int` and `long` values always fit their types.
pub(super) fn widening_fields(types: &[(String, String)]) -> Vec<usize> {
    types
        .iter()
        .enumerate()
        .filter(|(_, (_, ty))| ty == "string number" || ty.contains(" decimal("))
        .map(|(j, _)| j)
        .collect()
}

/// The spelling of a type (see [`payload_types`]); `field` carries a field-level
/// `logicalType`. Records, enums and fixed types it defines are added to `named`.
fn spell(ty: Value<'_>, field: Option<Value<'_>>, named: &mut HashMap<String, String>) -> String {
    if ty.kind() == Kind::Array {
        return match non_null(ty) {
            // A field-level logical type does not reach into a union.
            Some(only) => spell(only, None, named),
            None if ty
                .items()
                .all(|b| b.as_str().is_some_and(|s| s.eq_str("null"))) =>
            {
                "null".into()
            }
            None => {
                for branch in ty.items() {
                    spell(branch, None, named);
                }
                "union".into()
            }
        };
    }
    let (base, holder) = match ty.as_str() {
        Some(name) => (name.text().into_owned(), None),
        None if ty.kind() == Kind::Object => match text(ty.get("type")) {
            Some(base) => (base, Some(ty)),
            None => return "union".into(),
        },
        None => return "union".into(),
    };
    if let Some(kind) = named.get(&short(&base)) {
        return match kind.as_str() {
            "record" => format!("record {}", short(&base)),
            kind => kind.to_string(),
        };
    }
    match base.as_str() {
        "record" | "error" => {
            let name = holder.and_then(|h| text(h.get("name"))).unwrap_or_default();
            named.insert(short(&name), "record".into());
            for f in holder
                .and_then(|h| h.get("fields"))
                .iter()
                .flat_map(|f| f.items())
            {
                if let Some(t) = f.get("type") {
                    spell(t, Some(f), named);
                }
            }
            format!("record {}", short(&name))
        }
        "enum" | "fixed" => {
            if let Some(name) = holder.and_then(|h| text(h.get("name"))) {
                named.insert(short(&name), base.clone());
            }
            with_logical(&base, holder, None)
        }
        "array" => {
            if let Some(items) = holder.and_then(|h| h.get("items")) {
                spell(items, None, named);
            }
            "array".into()
        }
        "map" => "map".into(),
        _ => with_logical(&base, holder, field),
    }
}

/// `base` and the logical type of `holder` (the type's object), else of `field` (given for
/// a primitive only).
fn with_logical(base: &str, holder: Option<Value<'_>>, field: Option<Value<'_>>) -> String {
    let source = match holder.filter(|h| h.get("logicalType").is_some()) {
        Some(holder) => Some(holder),
        None => field.filter(|f| f.get("logicalType").is_some()),
    };
    let Some(source) = source else {
        return base.to_string();
    };
    let Some(logical) = text(source.get("logicalType")) else {
        return base.to_string();
    };
    if logical == "decimal" {
        let number = |name: &str| {
            source
                .get(name)
                .and_then(|v| v.number().map(str::to_string))
        };
        let precision = number("precision").unwrap_or_default();
        let scale = number("scale").unwrap_or_else(|| "0".into());
        return format!("{base} decimal({precision},{scale})");
    }
    format!("{base} {logical}")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload's types as sent: nullable unions, logical types on the type or on the
    /// field (old files), decimals, named records defined before and inside the payload.
    #[test]
    fn payload_types_are_spelled_as_sent() {
        let schema = r#"{"type":"record","name":"e","fields":[
            {"name":"source_metadata","type":{"type":"record","name":"varchar","fields":[
                {"name":"value","type":"string"},{"name":"length","type":"int"}]}},
            {"name":"payload","type":["null",{"type":"record","name":"p","fields":[
                {"name":"a","type":["null","long"]},
                {"name":"b","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}]},
                {"name":"c","type":"long","logicalType":"timestamp-micros"},
                {"name":"d","type":["null","varchar"]},
                {"name":"e","type":["null",{"type":"record","name":"timestampTz","fields":[
                    {"name":"timestamp","type":"long"},{"name":"offset","type":"int"}]}]},
                {"name":"f","type":["null","int","string"]},
                {"name":"g","type":{"type":"string","logicalType":"number"}},
                {"name":"h","type":["null",{"type":"array","items":"int"}]}
            ]}]}
        ]}"#;
        let mut parser = crate::json::Parser::default();
        let json = parser.parse(schema.as_bytes()).unwrap();
        let types = payload_types(json).unwrap();
        let spelled: Vec<(&str, &str)> = types
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            spelled,
            [
                ("a", "long"),
                ("b", "bytes decimal(10,2)"),
                ("c", "long timestamp-micros"),
                ("d", "record varchar"),
                ("e", "record timestampTz"),
                ("f", "union"),
                ("g", "string number"),
                ("h", "array"),
            ]
        );
    }
}
