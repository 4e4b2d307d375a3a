//! Avro object-container files, read with bounds: the header and its schema, blocks and
//! their codecs, and a datum cursor. The rules (docs/formats/datastream-avro.md) are the
//! ones the Python fallback applies around fastavro, so both engines accept and refuse the
//! same files:
//! - a varint is read as fastavro reads one (any length, 7 bits a byte, shifts past 63
//!   wrapping as on x86-64), an `int` as a `long`, a boolean byte other than 0 as true;
//! - a length below zero or beyond the bytes left, a block count beyond the bytes left
//!   in its block, and bytes left over after a block's records are errors, checked before
//!   anything is allocated for them;
//! - the bytes a file inflates to are capped ([`crate::limits::Limits::inflate_limit`]).
//!
//! The schema is compiled into a graph of [`Node`]s (named types referring back to
//! themselves make cycles: PostgreSQL arrays).

use std::collections::HashMap;
use std::io::Read;

use miniz_oxide::inflate::TINFLStatus;

use crate::error::{Error, Result};
use crate::json::{Kind as JsonKind, Value};
use crate::limits::{grouped, Limits, OverLimit};

fn err(text: impl Into<String>) -> Error {
    Error::Avro(text.into())
}

/// A reader over a byte slice, with fastavro's varint rules.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not read yet.
    #[inline(always)]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The offset of the next byte.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// A zigzag varint. Any number of bytes, as fastavro reads them: each byte's 7 bits go
    /// in at a shift that grows by 7 and wraps past 63.
    #[inline(always)]
    pub fn long(&mut self) -> Result<i64> {
        let mut n: u64 = 0;
        let mut shift: u32 = 0;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(err(format!("truncated at byte {}", self.pos)));
            };
            self.pos += 1;
            n |= u64::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Ok(((n >> 1) as i64) ^ -((n & 1) as i64));
            }
            shift = shift.wrapping_add(7);
        }
    }

    /// `n` raw bytes.
    #[inline(always)]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(err(format!(
                "{n} bytes at byte {} run past the end ({} left)",
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A length-prefixed `bytes` or `string` value.
    #[inline(always)]
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let at = self.pos;
        let len = self.long()?;
        if len < 0 {
            return Err(err(format!("negative length {len} at byte {at}")));
        }
        self.take(len as usize)
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
}

/// A type's logical type, where the type may carry it (others are ignored, as the Avro
/// specification says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    /// No logical type (or one this project does not render).
    None,
    /// `decimal` on `bytes` or `fixed`: the unscaled two's complement value, big-endian.
    Decimal { scale: u32 },
    /// `date` on `int`: days since 1970-01-01.
    Date,
    /// `time-millis` on `int`, `time-micros` on `long`, Datastream's `time-interval-micros`
    /// on `long`: a time of day or a duration, as `[-]HH:MM:SS.fff[fff]`.
    Time { digits: u8 },
    /// `timestamp-*` (`zoned`) and `local-timestamp-*` on `long`: `digits` fraction digits.
    Timestamp { digits: u8, zoned: bool },
}

/// The shapes of Datastream's unified record types, told by the record's name and fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Any other record: compact JSON of its fields.
    Plain,
    /// Legacy `varchar` {value, length}: the value.
    Varchar { value: usize },
    /// `datetime` {date, time}.
    Datetime { date: usize, time: usize },
    /// `timestampTz` {timestamp (µs), offset (ms)}.
    TimestampTz { timestamp: usize, offset: usize },
    /// `timeTz` {time (µs), offset (ms)}.
    TimeTz { time: usize, offset: usize },
    /// `interval` {months, hours, micros}.
    Interval {
        months: usize,
        hours: usize,
        micros: usize,
    },
    /// A PostgreSQL array level {nestedArray, elementValue}.
    PgArray { nested: usize, element: usize },
}

/// One record field.
#[derive(Debug, Clone)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its type.
    pub node: usize,
}

/// A compiled type.
#[derive(Debug, Clone)]
pub enum Node {
    Null,
    Boolean,
    /// `int` or `long` (read alike); `int` tells the logical types that `int` carries.
    Integer {
        int: bool,
        logical: Logical,
    },
    Float,
    Double,
    Bytes(Logical),
    String,
    Fixed {
        size: usize,
        logical: Logical,
    },
    Enum(Vec<String>),
    Array(usize),
    Union(Vec<usize>),
    Record {
        name: String,
        fields: Vec<Field>,
        shape: Shape,
    },
}

/// A compiled schema: nodes, the root, and the records that encode in no bytes.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Every type, named ones once.
    pub nodes: Vec<Node>,
    /// The top-level type.
    pub root: usize,
    /// Records and arrays nested deeper than this in a datum are an error
    /// (`Limits::max_avro_depth`).
    pub max_depth: usize,
}

const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

struct Compiler {
    nodes: Vec<Node>,
    names: HashMap<String, usize>,
}

impl Schema {
    /// Compiles a schema from its JSON (docs/formats/datastream-avro.md, "Schemas").
    pub fn compile(json: Value<'_>) -> Result<Self> {
        let mut compiler = Compiler {
            nodes: Vec::new(),
            names: HashMap::new(),
        };
        let root = compiler.node(json, "")?;
        let mut schema = Self {
            nodes: compiler.nodes,
            root,
            max_depth: crate::limits::Limits::default().max_avro_depth,
        };
        schema.check_arrays()?;
        Ok(schema)
    }

    /// The node a union-free reference resolves to is the node itself; a union has branches.
    pub fn node(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    /// The fields of record node `record` (compiled as a record: anything else is a bug).
    pub fn fields(&self, record: usize) -> &[Field] {
        let Node::Record { fields, .. } = &self.nodes[record] else {
            unreachable!("node {record} is not a record")
        };
        fields
    }

    /// Refuses arrays whose items can encode in no bytes: their block counts could not be
    /// checked against the bytes left. A record encodes in no bytes when all of its fields
    /// do (the greatest fixed point, so a record made only of itself counts as empty).
    fn check_arrays(&mut self) -> Result<()> {
        let mut empty: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| matches!(n, Node::Record { .. }))
            .collect();
        loop {
            let mut changed = false;
            for i in 0..self.nodes.len() {
                if let Node::Record { fields, .. } = &self.nodes[i] {
                    let now = fields.iter().all(|f| self.is_empty(f.node, &empty));
                    if empty[i] && !now {
                        empty[i] = false;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for node in &self.nodes {
            if let Node::Array(items) = node {
                if self.is_empty(*items, &empty) {
                    return Err(err("schema: an array's items encode in no bytes"));
                }
            }
        }
        Ok(())
    }

    fn is_empty(&self, node: usize, empty: &[bool]) -> bool {
        match &self.nodes[node] {
            Node::Null => true,
            Node::Fixed { size, .. } => *size == 0,
            Node::Record { .. } => empty[node],
            _ => false,
        }
    }
}

impl Compiler {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn node(&mut self, json: Value<'_>, namespace: &str) -> Result<usize> {
        match json.kind() {
            JsonKind::String => {
                let name = json.as_str().map(|s| s.text()).unwrap_or_default();
                self.named(&name, namespace, Logical::None)
            }
            JsonKind::Array => {
                let mut branches = Vec::new();
                let mut seen: Vec<String> = Vec::new();
                for item in json.items() {
                    let branch = self.node(item, namespace)?;
                    let key = match &self.nodes[branch] {
                        Node::Union(_) => return Err(err("schema: a union inside a union")),
                        Node::Record { name, .. } => name.clone(),
                        Node::Enum(_) | Node::Fixed { .. } => format!("#{branch}"),
                        other => kind_name(other).to_string(),
                    };
                    if seen.contains(&key) {
                        return Err(err(format!("schema: union has {key} twice")));
                    }
                    seen.push(key);
                    branches.push(branch);
                }
                Ok(self.push(Node::Union(branches)))
            }
            JsonKind::Object => self.object(json, namespace),
            _ => Err(err(format!(
                "schema: expected a type, got {}",
                json.describe()
            ))),
        }
    }

    fn object(&mut self, json: Value<'_>, namespace: &str) -> Result<usize> {
        let Some(kind) = json.get("type").and_then(|t| t.as_str()) else {
            return Err(err("schema: a type object without a string \"type\""));
        };
        let kind = kind.text();
        let logical = json
            .get("logicalType")
            .and_then(|l| l.as_str())
            .map(|l| l.text().into_owned());
        match &*kind {
            "record" | "error" => self.record(json, namespace),
            "enum" => {
                let (full, _) = full_name(json, namespace)?;
                let mut symbols = Vec::new();
                let Some(list) = json.get("symbols").filter(|s| s.kind() == JsonKind::Array) else {
                    return Err(err(format!("schema: enum {full} without symbols")));
                };
                for symbol in list.items() {
                    let Some(s) = symbol.as_str() else {
                        return Err(err(format!("schema: enum {full}: a symbol not a string")));
                    };
                    symbols.push(s.text().into_owned());
                }
                let index = self.push(Node::Enum(symbols));
                self.define(full, index)?;
                Ok(index)
            }
            "fixed" => {
                let (full, _) = full_name(json, namespace)?;
                let size = json
                    .get("size")
                    .and_then(|s| s.number())
                    .and_then(|s| s.parse::<usize>().ok())
                    .ok_or_else(|| err(format!("schema: fixed {full} without a size")))?;
                let logical = match logical.as_deref() {
                    Some("decimal") => decimal(json, Some(size)),
                    _ => Logical::None,
                };
                let index = self.push(Node::Fixed { size, logical });
                self.define(full, index)?;
                Ok(index)
            }
            "array" => {
                let items = json
                    .get("items")
                    .ok_or_else(|| err("schema: an array without items"))?;
                let slot = self.push(Node::Null);
                let items = self.node(items, namespace)?;
                self.nodes[slot] = Node::Array(items);
                Ok(slot)
            }
            "map" => Err(err(
                "schema: map types are not read (Datastream writes none)",
            )),
            primitive => {
                let logical = primitive_logical(primitive, logical.as_deref(), json);
                self.named(primitive, namespace, logical)
            }
        }
    }

    fn record(&mut self, json: Value<'_>, namespace: &str) -> Result<usize> {
        let (full, inner) = full_name(json, namespace)?;
        let index = self.push(Node::Null);
        self.define(full.clone(), index)?;
        let Some(list) = json.get("fields").filter(|f| f.kind() == JsonKind::Array) else {
            return Err(err(format!("schema: record {full} without fields")));
        };
        let mut fields: Vec<Field> = Vec::new();
        for field in list.items() {
            let Some(name) = field.get("name").and_then(|n| n.as_str()) else {
                return Err(err(format!(
                    "schema: record {full}: a field without a name"
                )));
            };
            let name = name.text().into_owned();
            if fields.iter().any(|f| f.name == name) {
                return Err(err(format!("schema: record {full} has field {name} twice")));
            }
            let Some(kind) = field.get("type") else {
                return Err(err(format!("schema: {full}.{name} without a type")));
            };
            let node = match field_logical(field, kind) {
                Some((primitive, logical)) => self.named(primitive, &inner, logical)?,
                None => self.node(kind, &inner)?,
            };
            fields.push(Field { name, node });
        }
        let simple = full.rsplit('.').next().unwrap_or(&full).to_string();
        let shape = self.shape(&simple, &fields);
        self.nodes[index] = Node::Record {
            name: full,
            fields,
            shape,
        };
        Ok(index)
    }

    /// Datastream's unified records, by name and fields (fields of other types make a plain
    /// record).
    fn shape(&self, name: &str, fields: &[Field]) -> Shape {
        let find = |wanted: &str| fields.iter().position(|f| f.name == wanted);
        let integer = |wanted: &str| {
            find(wanted).filter(|&i| matches!(self.nodes[fields[i].node], Node::Integer { .. }))
        };
        match name {
            "varchar" => find("value").map_or(Shape::Plain, |value| Shape::Varchar { value }),
            "datetime" => match (integer("date"), integer("time")) {
                (Some(date), Some(time)) => Shape::Datetime { date, time },
                _ => Shape::Plain,
            },
            "timestampTz" => match (integer("timestamp"), integer("offset")) {
                (Some(timestamp), Some(offset)) => Shape::TimestampTz { timestamp, offset },
                _ => Shape::Plain,
            },
            "timeTz" => match (integer("time"), integer("offset")) {
                (Some(time), Some(offset)) => Shape::TimeTz { time, offset },
                _ => Shape::Plain,
            },
            "interval" => match (integer("months"), integer("hours"), integer("micros")) {
                (Some(months), Some(hours), Some(micros)) => Shape::Interval {
                    months,
                    hours,
                    micros,
                },
                _ => Shape::Plain,
            },
            _ => match (fields.len(), find("nestedArray"), find("elementValue")) {
                (2, Some(nested), Some(element)) => Shape::PgArray { nested, element },
                _ => Shape::Plain,
            },
        }
    }

    fn named(&mut self, name: &str, namespace: &str, logical: Logical) -> Result<usize> {
        let node = match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Integer { int: true, logical },
            "long" => Node::Integer {
                int: false,
                logical,
            },
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes(logical),
            "string" => Node::String,
            _ => {
                let qualified = if name.contains('.') || namespace.is_empty() {
                    None
                } else {
                    self.names.get(&format!("{namespace}.{name}")).copied()
                };
                return qualified
                    .or_else(|| self.names.get(name).copied())
                    .ok_or_else(|| err(format!("schema: unknown type {name}")));
            }
        };
        Ok(self.push(node))
    }

    fn define(&mut self, full: String, index: usize) -> Result<()> {
        let simple = full.rsplit('.').next().unwrap_or(&full);
        if PRIMITIVES.contains(&simple) {
            return Err(err(format!("schema: a named type called {simple}")));
        }
        if self.names.insert(full.clone(), index).is_some() {
            return Err(err(format!("schema: type {full} defined twice")));
        }
        Ok(())
    }
}

/// The logical type `name` gives a primitive type, its parameters (a decimal's precision and
/// scale) read from `props`; one the primitive cannot carry is ignored.
fn primitive_logical(primitive: &str, name: Option<&str>, props: Value<'_>) -> Logical {
    match (primitive, name) {
        ("bytes", Some("decimal")) => decimal(props, None),
        ("int", Some("date")) => Logical::Date,
        ("int", Some("time-millis")) => Logical::Time { digits: 3 },
        ("long", Some("time-micros" | "time-interval-micros")) => Logical::Time { digits: 6 },
        ("long", Some(name)) => timestamp(name),
        _ => Logical::None,
    }
}

/// A `logicalType` written on a field rather than its type (old Datastream Oracle files:
/// `{"name": "t", "type": "long", "logicalType": "timestamp-millis"}`) counts as if it
/// were inside the type, with the field's `precision` and `scale`, when the field's type is
/// a primitive without a logical type of its own. Returns that primitive and its logical
/// type; `None` when the field has no such `logicalType` (the type is compiled as usual).
fn field_logical<'j>(field: Value<'j>, kind: Value<'j>) -> Option<(&'static str, Logical)> {
    let name = field.get("logicalType")?.as_str()?.text();
    let primitive = match kind.kind() {
        JsonKind::String => kind.as_str()?.text(),
        JsonKind::Object if kind.get("logicalType").and_then(|l| l.as_str()).is_none() => {
            kind.get("type")?.as_str()?.text()
        }
        _ => return None,
    };
    let primitive = *PRIMITIVES.iter().find(|p| **p == primitive)?;
    Some((primitive, primitive_logical(primitive, Some(&name), field)))
}

/// A named type's full name, and the namespace its inner types inherit.
fn full_name(json: Value<'_>, namespace: &str) -> Result<(String, String)> {
    let Some(name) = json.get("name").and_then(|n| n.as_str()) else {
        return Err(err("schema: a named type without a name"));
    };
    let name = name.text();
    if name.is_empty() {
        return Err(err("schema: a named type without a name"));
    }
    let full = if name.contains('.') {
        name.into_owned()
    } else {
        let space = match json.get("namespace").and_then(|n| n.as_str()) {
            Some(space) => space.text().into_owned(),
            None => namespace.to_string(),
        };
        if space.is_empty() {
            name.into_owned()
        } else {
            format!("{space}.{name}")
        }
    };
    let inner = full
        .rsplit_once('.')
        .map_or("", |(space, _)| space)
        .to_string();
    Ok((full, inner))
}

/// `decimal`'s scale, when precision (1 to 1000) and scale (0 to precision) are valid;
/// otherwise the logical type is ignored.
fn decimal(json: Value<'_>, _size: Option<usize>) -> Logical {
    let int = |key: &str| json.get(key).and_then(|v| v.number()?.parse::<i64>().ok());
    let precision = int("precision");
    let scale = match json.get("scale") {
        None => Some(0),
        Some(_) => int("scale"),
    };
    match (precision, scale) {
        (Some(p), Some(s)) if (1..=1000).contains(&p) && (0..=p).contains(&s) => {
            Logical::Decimal { scale: s as u32 }
        }
        _ => Logical::None,
    }
}

fn timestamp(name: &str) -> Logical {
    let (digits, zoned) = match name {
        "timestamp-millis" => (3, true),
        "timestamp-micros" => (6, true),
        "timestamp-nanos" => (9, true),
        "local-timestamp-millis" => (3, false),
        "local-timestamp-micros" => (6, false),
        "local-timestamp-nanos" => (9, false),
        _ => return Logical::None,
    };
    Logical::Timestamp { digits, zoned }
}

fn kind_name(node: &Node) -> &'static str {
    match node {
        Node::Null => "null",
        Node::Boolean => "boolean",
        Node::Integer { int: true, .. } => "int",
        Node::Integer { .. } => "long",
        Node::Float => "float",
        Node::Double => "double",
        Node::Bytes(_) => "bytes",
        Node::String => "string",
        Node::Fixed { .. } => "fixed",
        Node::Enum(_) => "enum",
        Node::Array(_) => "array",
        Node::Union(_) => "union",
        Node::Record { .. } => "record",
    }
}

/// A codec a file may name in `avro.codec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Null,
    Deflate,
    Snappy,
    Zstandard,
}

/// The header of an object-container file.
#[derive(Debug)]
pub struct Header<'a> {
    /// `avro.schema`, the writer's schema as JSON text.
    pub schema: &'a [u8],
    /// `avro.codec`.
    pub codec: Codec,
    /// The 16-byte sync marker that ends every block.
    pub sync: &'a [u8],
}

/// Reads the header: the magic, the metadata map, the sync marker. Leaves `cursor` at the
/// first block.
pub fn header<'a>(cursor: &mut Cursor<'a>) -> Result<Header<'a>> {
    if cursor.take(4).ok() != Some(b"Obj\x01".as_slice()) {
        return Err(err("not an Avro object-container file (no Obj\\x01 magic)"));
    }
    let mut schema = None;
    let mut codec = None;
    loop {
        let at = cursor.position();
        let mut count = cursor.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = count
                .checked_neg()
                .ok_or_else(|| err(format!("header: bad map block count at byte {at}")))?;
            cursor.long()?;
        }
        if count as u64 > cursor.remaining() as u64 {
            return Err(err(format!(
                "header: {count} metadata entries at byte {at} in {} bytes",
                cursor.remaining()
            )));
        }
        for _ in 0..count {
            let key = cursor.bytes()?;
            let value = cursor.bytes()?;
            // The first of repeated keys wins, as it does everywhere in this project.
            match key {
                b"avro.schema" if schema.is_none() => schema = Some(value),
                b"avro.codec" if codec.is_none() => codec = Some(value),
                _ => {}
            }
        }
    }
    let sync = cursor
        .take(16)
        .map_err(|_| err("header: truncated before the sync marker"))?;
    let schema = schema.ok_or_else(|| err("header: no avro.schema"))?;
    let codec = match codec.unwrap_or(b"null") {
        b"null" => Codec::Null,
        b"deflate" => Codec::Deflate,
        b"snappy" => Codec::Snappy,
        b"zstandard" => Codec::Zstandard,
        other => {
            return Err(err(format!(
                "unsupported codec {:?}: null, deflate, snappy and zstandard are read",
                String::from_utf8_lossy(&other[..other.len().min(40)])
            )))
        }
    };
    Ok(Header {
        schema,
        codec,
        sync,
    })
}

/// The next block's record count and data, or `None` at the end of the file.
pub fn block<'a>(cursor: &mut Cursor<'a>, sync: &[u8]) -> Result<Option<(i64, &'a [u8])>> {
    if cursor.remaining() == 0 {
        return Ok(None);
    }
    let at = cursor.position();
    let count = cursor.long()?;
    let size = cursor.long()?;
    if count < 0 || size < 0 {
        return Err(err(format!(
            "block at byte {at}: negative count {count} or size {size}"
        )));
    }
    let data = cursor.take(size as usize)?;
    let marker = cursor.take(16).map_err(|_| {
        err(format!(
            "block at byte {at}: truncated before its sync marker"
        ))
    })?;
    if marker != sync {
        return Err(err(format!(
            "block at byte {at}: sync marker does not match the header's"
        )));
    }
    Ok(Some((count, data)))
}

/// The largest zstandard context kept for the next block (a context grows to its frames'
/// window).
const KEPT_CONTEXT_BYTES: usize = 8 << 20;

/// Decompresses a block's data into `out` (replacing what it held), spending at most `budget`
/// bytes of output (reduced by what was written); `limits` names the limit when it is
/// spent.
pub fn decompress(
    codec: Codec,
    data: &[u8],
    out: &mut Vec<u8>,
    budget: &mut usize,
    limits: &Limits,
) -> Result<()> {
    let over = |limit: usize| -> Error {
        OverLimit::new(
            format!(
                "the file inflates past {} bytes (max_inflate_ratio times its size, or \
                 inflate_floor_bytes if more)",
                grouped(limit)
            ),
            "max_inflate_ratio",
            limits.max_inflate_ratio,
        )
        .into()
    };
    match codec {
        Codec::Null => unreachable!("null blocks are read in place"),
        Codec::Deflate => inflate(data, out, *budget).map_err(|status| match status {
            TINFLStatus::HasMoreOutput => over(*budget),
            status => err(format!("deflate: {status:?}")),
        })?,
        Codec::Snappy => {
            let Some(body_len) = data.len().checked_sub(4) else {
                return Err(err("snappy: a block shorter than its checksum"));
            };
            let (body, crc) = data.split_at(body_len);
            let len = snappy_len(body)?;
            if len > *budget {
                return Err(over(*budget));
            }
            out.clear();
            out.resize(len, 0);
            snap::raw::Decoder::new()
                .decompress(body, out)
                .map_err(|e| err(format!("snappy: {e}")))?;
            let expected = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
            if crc32fast::hash(out) != expected {
                return Err(err("snappy: checksum does not match"));
            }
        }
        Codec::Zstandard => {
            // The context (some 100 KB, its creation a tenth of decoding a file of small
            // blocks) is kept per thread; each frame resets its session.
            thread_local! {
                static CONTEXT: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
                    const { std::cell::RefCell::new(None) };
            }
            CONTEXT.with(|context| -> Result<()> {
                let mut held = context.borrow_mut();
                let context = match &mut *held {
                    Some(context) => context,
                    none => none.insert(
                        zstd::zstd_safe::DCtx::try_create()
                            .ok_or_else(|| err("zstandard: no memory for a context"))?,
                    ),
                };
                let mut decoder =
                    zstd::stream::read::Decoder::with_context(data, context).single_frame();
                out.clear();
                (&mut decoder)
                    .take(*budget as u64 + 1)
                    .read_to_end(out)
                    .map_err(|e| err(format!("zstandard: {e}")))?;
                if out.len() > *budget {
                    return Err(over(*budget));
                }
                // One frame and nothing after it (the fallback's zstandard refuses the rest).
                let rest = decoder.finish().is_empty();
                // A frame of a wide window leaves the context that big: not kept.
                if held
                    .as_ref()
                    .is_some_and(|c| c.sizeof() > KEPT_CONTEXT_BYTES)
                {
                    *held = None;
                }
                if !rest {
                    return Err(err("zstandard: bytes after the frame"));
                }
                Ok(())
            })?;
        }
    }
    *budget -= out.len();
    Ok(())
}

/// Raw deflate into `out`, growing it up to `limit` bytes; the state is kept per thread
/// (some 11 KB, zeroed for each block by miniz_oxide's one-shot API).
fn inflate(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), TINFLStatus> {
    use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
    thread_local! {
        static STATE: std::cell::RefCell<Box<DecompressorOxide>> =
            std::cell::RefCell::new(Box::default());
    }
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        state.init();
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        // Not cleared: the inflater writes from the start, and zeroing the buffer again for
        // every block cost more than a tenth of the inflating.
        let want = limit.min(data.len().saturating_mul(4).max(4096));
        if out.len() > limit {
            out.truncate(limit);
        } else if out.len() < want {
            out.resize(want, 0);
        }
        let (mut read, mut written) = (0, 0);
        loop {
            let (status, used, made) = decompress(&mut state, &data[read..], out, written, flags);
            read += used;
            written += made;
            match status {
                TINFLStatus::Done => {
                    out.truncate(written);
                    return Ok(());
                }
                TINFLStatus::HasMoreOutput if out.len() < limit => {
                    let grown = limit.min(out.len().saturating_mul(2));
                    out.resize(grown, 0);
                }
                status => return Err(status),
            }
        }
    })
}

/// The uncompressed length a raw snappy block starts with: a varint of at most 32 bits.
pub fn snappy_len(body: &[u8]) -> Result<usize> {
    let mut n: u64 = 0;
    for (i, &b) in body.iter().take(5).enumerate() {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return u32::try_from(n)
                .map(|n| n as usize)
                .map_err(|_| err("snappy: bad length"));
        }
    }
    Err(err("snappy: bad length"))
}

/// Resolves a union (Python's negative indexing included, as fastavro reads one): the
/// branch taken, or `None` for null. A node that is not a union is itself.
pub fn resolve(schema: &Schema, cur: &mut Cursor, node: usize) -> Result<Option<usize>> {
    let node = branch(schema, cur, node)?;
    Ok((!matches!(schema.node(node), Node::Null)).then_some(node))
}

/// The node of the union branch a datum takes (fastavro's negative indexing included); a
/// node that is not a union is itself.
#[inline(always)]
pub fn branch(schema: &Schema, cur: &mut Cursor, node: usize) -> Result<usize> {
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

/// Reads an array's blocks, calling `item` for each item. A negative count (the block's
/// byte size follows, and is not needed) counts as its absolute value; a count beyond the
/// bytes left is an error (every item takes a byte or more: [`Schema::compile`]).
pub fn array_items(
    cur: &mut Cursor,
    mut item: impl FnMut(&mut Cursor) -> Result<()>,
) -> Result<()> {
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

/// `depth` plus one for a record or array read at byte `at`; an error past the schema's
/// `max_depth` (`Limits::max_avro_depth`).
pub fn deeper(schema: &Schema, depth: usize, at: usize) -> Result<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_as_fastavro_reads_them() {
        let read = |bytes: &[u8]| Cursor::new(bytes).long().ok();
        assert_eq!(read(&[0x00]), Some(0));
        assert_eq!(read(&[0x01]), Some(-1));
        assert_eq!(read(&[0x02]), Some(1));
        assert_eq!(read(&[0xac, 0x02]), Some(150));
        // Past ten bytes the shift wraps: fastavro gives 32 here, and i64::MIN below.
        let mut long = vec![0x80; 10];
        long.push(0x01);
        assert_eq!(read(&long), Some(32));
        let mut ones = vec![0xff; 11];
        ones.push(0x01);
        assert_eq!(read(&ones), Some(i64::MIN));
        assert_eq!(read(&[0x80]), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn lengths_are_checked() {
        assert!(Cursor::new(&[0x03, b'a']).bytes().is_err());
        assert!(Cursor::new(&[0x08, b'a']).bytes().is_err());
        assert_eq!(Cursor::new(&[0x02, b'a']).bytes().ok(), Some(&b"a"[..]));
    }

    fn compile(text: &str) -> Result<Schema> {
        let mut parser = crate::json::Parser::default();
        let json = parser.parse(text.as_bytes())?;
        Schema::compile(json)
    }

    #[test]
    fn schemas() {
        assert!(compile(r#"{"type":"record","name":"A","fields":[{"name":"a","type":["null",{"type":"array","items":"A"}]}]}"#).is_ok());
        assert!(compile(r#"{"type":"array","items":"null"}"#).is_err());
        assert!(
            compile(r#"{"type":"array","items":{"type":"record","name":"E","fields":[]}}"#)
                .is_err()
        );
        assert!(compile(r#"["null",["long"]]"#).is_err());
        assert!(compile(r#"["long","long"]"#).is_err());
        assert!(compile(r#""nope""#).is_err());
        assert!(compile(r#"{"type":"map","values":"long"}"#).is_err());
        let decimal =
            compile(r#"{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}"#).unwrap();
        assert!(matches!(
            decimal.nodes[decimal.root],
            Node::Bytes(Logical::Decimal { scale: 2 })
        ));
        let bad =
            compile(r#"{"type":"bytes","logicalType":"decimal","precision":1,"scale":2}"#).unwrap();
        assert!(matches!(bad.nodes[bad.root], Node::Bytes(Logical::None)));
    }

    #[test]
    fn field_level_logical_types_count_as_the_types() {
        let schema = compile(
            r#"{"type":"record","name":"r","fields":[
                {"name":"a","type":"long","logicalType":"timestamp-millis"},
                {"name":"b","type":{"type":"bytes"},"logicalType":"decimal","precision":4,"scale":2},
                {"name":"c","type":{"type":"long","logicalType":"date"},"logicalType":"time-micros"},
                {"name":"d","type":["null","long"],"logicalType":"timestamp-millis"}]}"#,
        )
        .unwrap();
        let Node::Record { fields, .. } = &schema.nodes[schema.root] else {
            panic!("a record")
        };
        let logical = |i: usize| match &schema.nodes[fields[i].node] {
            Node::Integer { logical, .. } | Node::Bytes(logical) => Some(*logical),
            _ => None,
        };
        let millis = Logical::Timestamp {
            digits: 3,
            zoned: true,
        };
        assert_eq!(logical(0), Some(millis));
        assert_eq!(logical(1), Some(Logical::Decimal { scale: 2 }));
        // The type's own (here one `long` cannot carry) wins; a union takes none.
        assert_eq!(logical(2), Some(Logical::None));
        assert_eq!(logical(3), None);
    }
}
