//! A Datastream Avro schema compiled for events ([`Plan`]): the role of each top-level and
//! `source_metadata` field, and the checks of the fields with a column of their own.

use crate::avro::{Node, Schema};
use crate::error::{Error, Result};

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
