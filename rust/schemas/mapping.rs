//! The one mapping from source column types, as each format spells them, to the Spark type
//! typed mode converts their values to (docs/types.md, whose tables the tests read; the
//! Python engine's twin is `python/cdc_decode/fallback/_source_types.py`).
//!
//! A type this does not know maps to `None`: the column's type is then reported as
//! unknown, never guessed.

/// Whose spelling a column's source type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// MySQL and MariaDB (Tencent DTS `originalType`, TDSQL).
    Mysql,
    /// PostgreSQL (Tencent DTS `originalType` of a PGSQL source).
    Postgresql,
    /// Oracle (Tencent DTS `originalType` of an ORACLE source).
    Oracle,
    /// SQL Server.
    Sqlserver,
    /// Kafka Connect schema types and logical names (Debezium with `schemas.enable`).
    Connect,
    /// Avro types and logical types (Datastream's writer schema).
    Avro,
    /// DataHub field types (DataHub BLOB's `schema.dataColumn`).
    Datahub,
    /// Arrow types, as pyarrow prints them (DataHub TUPLE records).
    Arrow,
}

impl Dialect {
    /// The dialect's name in the schema pass's output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mysql => "mysql",
            Self::Postgresql => "postgresql",
            Self::Oracle => "oracle",
            Self::Sqlserver => "sqlserver",
            Self::Connect => "connect",
            Self::Avro => "avro",
            Self::Datahub => "datahub",
            Self::Arrow => "arrow",
        }
    }
}

/// The largest decimal precision Spark holds; a wider decimal is a `string` of its text.
const MAX_PRECISION: i64 = 38;

/// `decimal(p,s)` when it fits Spark, else `string` (the exact text).
fn decimal(p: i64, s: i64) -> String {
    if (1..=MAX_PRECISION).contains(&p) && (0..=p).contains(&s) {
        format!("decimal({p},{s})")
    } else {
        "string".into()
    }
}

/// A SQL type text taken apart: lowercase words before the parentheses, the arguments
/// inside them, the words after (`decimal(10,2) unsigned` → `decimal`, `[10, 2]`,
/// `unsigned`). An argument that is not an integer (`enum('a','b')`, `number(*,2)`) is
/// `None`.
struct SqlType {
    base: String,
    args: Vec<Option<i64>>,
    tail: String,
}

impl SqlType {
    fn parse(text: &str) -> Self {
        let lower = text.trim().to_ascii_lowercase();
        let (head, rest) = match lower.find('(') {
            Some(at) => (&lower[..at], &lower[at..]),
            None => (lower.as_str(), ""),
        };
        let mut args = Vec::new();
        let mut tail = rest;
        if let Some(inner) = rest.strip_prefix('(') {
            // The first closing parenthesis outside quotes ends the arguments.
            let mut quoted = false;
            let mut end = None;
            for (i, c) in inner.char_indices() {
                match c {
                    '\'' => quoted = !quoted,
                    ')' if !quoted => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.unwrap_or(inner.len());
            args = inner[..end]
                .split(',')
                .map(|a| a.trim().parse::<i64>().ok())
                .collect();
            tail = inner.get(end + 1..).unwrap_or("");
        }
        Self {
            base: words(head),
            args,
            tail: words(tail),
        }
    }

    fn arg(&self, i: usize) -> Option<i64> {
        self.args.get(i).copied().flatten()
    }

    fn has(&self, word: &str) -> bool {
        self.tail.split(' ').any(|w| w == word)
    }
}

/// Words separated by single spaces.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The Spark type of a column whose source type is `text` in `dialect`.
pub fn spark_type(dialect: Dialect, text: &str) -> Option<String> {
    match dialect {
        Dialect::Mysql => mysql(&SqlType::parse(text)),
        Dialect::Postgresql => postgresql(text),
        Dialect::Oracle => oracle(&SqlType::parse(text)),
        Dialect::Sqlserver => sqlserver(&SqlType::parse(text)),
        Dialect::Connect => connect(text),
        Dialect::Avro => avro(text),
        Dialect::Datahub => datahub(&SqlType::parse(text)),
        Dialect::Arrow => arrow(text),
    }
    .map(str::to_string)
    .or_else(|| parametric(dialect, text))
}

/// The types whose Spark type depends on their arguments.
fn parametric(dialect: Dialect, text: &str) -> Option<String> {
    match dialect {
        Dialect::Mysql => {
            let t = SqlType::parse(text);
            match t.base.as_str() {
                "decimal" | "numeric" | "dec" | "fixed" => {
                    Some(decimal(t.arg(0).unwrap_or(10), t.arg(1).unwrap_or(0)))
                }
                _ => None,
            }
        }
        Dialect::Postgresql => {
            let t = SqlType::parse(text);
            match t.base.as_str() {
                "numeric" | "decimal" if !t.args.is_empty() => {
                    Some(decimal(t.arg(0)?, t.arg(1).unwrap_or(0)))
                }
                _ => None,
            }
        }
        Dialect::Oracle => {
            let t = SqlType::parse(text);
            match t.base.as_str() {
                "number" | "numeric" | "decimal" | "dec" if !t.args.is_empty() => {
                    // NUMBER(*,s) is 38 digits; a negative scale rounds to tens, hundreds …
                    let p = t.arg(0).unwrap_or(MAX_PRECISION);
                    match t.arg(1).unwrap_or(0) {
                        s if s < 0 => Some(decimal(p - s, 0)),
                        s => Some(decimal(p, s)),
                    }
                }
                _ => None,
            }
        }
        Dialect::Sqlserver => {
            let t = SqlType::parse(text);
            match t.base.as_str() {
                "decimal" | "numeric" => {
                    Some(decimal(t.arg(0).unwrap_or(18), t.arg(1).unwrap_or(0)))
                }
                _ => None,
            }
        }
        Dialect::Connect => connect_decimal(text),
        Dialect::Avro => {
            let (base, logical) = text.split_once(' ').unwrap_or((text, ""));
            match (base, logical.split_once('(')) {
                ("bytes" | "fixed", Some(("decimal", args))) => {
                    // A decimal the reader ignores (precision outside 1..=1000, scale
                    // outside 0..=precision) is read as the bytes it is.
                    let parsed = args
                        .strip_suffix(')')
                        .and_then(|a| a.split_once(','))
                        .and_then(|(p, s)| {
                            Some((p.trim().parse::<i64>().ok()?, s.trim().parse::<i64>().ok()?))
                        });
                    Some(match parsed {
                        Some((p, s)) if (1..=1000).contains(&p) && (0..=p).contains(&s) => {
                            decimal(p, s)
                        }
                        _ => "binary".into(),
                    })
                }
                _ => None,
            }
        }
        Dialect::Datahub => {
            let t = SqlType::parse(text);
            (t.base == "decimal" && t.args.len() == 2)
                .then(|| decimal(t.arg(0).unwrap_or(0), t.arg(1).unwrap_or(-1)))
        }
        Dialect::Arrow => {
            let rest = ["decimal32(", "decimal64(", "decimal128(", "decimal256("]
                .iter()
                .find_map(|prefix| text.strip_prefix(prefix))?;
            let (p, s) = rest.strip_suffix(')')?.split_once(',')?;
            Some(decimal(p.trim().parse().ok()?, s.trim().parse().ok()?))
        }
    }
}

fn mysql(t: &SqlType) -> Option<&'static str> {
    let unsigned = t.has("unsigned");
    Some(match t.base.as_str() {
        "tinyint" | "bool" | "boolean" if unsigned => "smallint",
        "tinyint" | "bool" | "boolean" => "tinyint",
        "smallint" if unsigned => "int",
        "smallint" => "smallint",
        "mediumint" => "int",
        "int" | "integer" if unsigned => "bigint",
        "int" | "integer" => "int",
        "bigint" if unsigned => "decimal(20,0)",
        "bigint" => "bigint",
        "serial" => "decimal(20,0)",
        "float" => match t.args.len() {
            1 if t.arg(0)? > 24 => "double",
            _ => "float",
        },
        "double" | "double precision" | "real" => "double",
        "bit" if t.arg(0).unwrap_or(1) > 63 => "decimal(20,0)",
        "bit" => "bigint",
        "year" => "int",
        "date" => "date",
        "time" => "string",
        "datetime" => "timestamp_ntz",
        "timestamp" => "timestamp",
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "nchar"
        | "nvarchar" | "national char" | "national varchar" | "character" | "character varying"
        | "long" | "long varchar" | "enum" | "set" | "json" => "string",
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob"
        | "long varbinary" | "geometry" | "point" | "linestring" | "polygon" | "multipoint"
        | "multilinestring" | "multipolygon" | "geometrycollection" | "geomcollection" => "binary",
        _ => return None,
    })
}

fn postgresql(text: &str) -> Option<&'static str> {
    let trimmed = text.trim();
    // Arrays: `integer[]`, or the catalog's `_int4`.
    if trimmed.ends_with(']') || trimmed.starts_with('_') {
        return Some("string");
    }
    let t = SqlType::parse(trimmed);
    let zone = t.tail.contains("with time zone") || t.base.ends_with("with time zone");
    let base = t
        .base
        .trim_end_matches(" with time zone")
        .trim_end_matches(" without time zone");
    Some(match base {
        "smallint" | "int2" | "smallserial" | "serial2" => "smallint",
        "integer" | "int" | "int4" | "serial" | "serial4" => "int",
        "bigint" | "int8" | "bigserial" | "serial8" | "oid" => "bigint",
        "numeric" | "decimal" if t.args.is_empty() => "string",
        "real" | "float4" => "float",
        "double precision" | "float8" => "double",
        "float" => match t.arg(0) {
            Some(p) if p <= 24 => "float",
            _ => "double",
        },
        "money" => "decimal(19,2)",
        "boolean" | "bool" => "boolean",
        "bytea" => "binary",
        "date" => "date",
        "timestamp" if zone => "timestamp",
        "timestamp" => "timestamp_ntz",
        "timestamptz" => "timestamp",
        "char" | "character" | "varchar" | "character varying" | "text" | "bpchar" | "name"
        | "citext" | "time" | "timetz" | "interval" | "uuid" | "json" | "jsonb" | "xml"
        | "inet" | "cidr" | "macaddr" | "macaddr8" | "bit" | "bit varying" | "varbit"
        | "tsvector" | "tsquery" | "hstore" | "ltree" | "point" | "line" | "lseg" | "box"
        | "path" | "polygon" | "circle" | "int4range" | "int8range" | "numrange" | "tsrange"
        | "tstzrange" | "daterange" | "enum" => "string",
        _ => return None,
    })
}

fn oracle(t: &SqlType) -> Option<&'static str> {
    Some(match t.base.as_str() {
        "number" | "numeric" | "decimal" | "dec" if t.args.is_empty() => "string",
        "integer" | "int" | "smallint" => "decimal(38,0)",
        "float" | "real" | "double precision" | "binary_double" => "double",
        "binary_float" => "float",
        "char" | "nchar" | "varchar2" | "nvarchar2" | "varchar" | "clob" | "nclob" | "long"
        | "rowid" | "urowid" | "xmltype" | "json" | "character" | "character varying" => "string",
        "raw" | "long raw" | "blob" => "binary",
        "date" => "timestamp_ntz",
        "timestamp" if t.tail.contains("time zone") => "timestamp",
        "timestamp" => "timestamp_ntz",
        "boolean" => "boolean",
        base if base.starts_with("interval") => "string",
        _ => return None,
    })
}

fn sqlserver(t: &SqlType) -> Option<&'static str> {
    Some(match t.base.as_str() {
        "bit" => "boolean",
        "tinyint" | "smallint" => "smallint",
        "int" => "int",
        "bigint" => "bigint",
        "money" => "decimal(19,4)",
        "smallmoney" => "decimal(10,4)",
        "float" => match t.arg(0) {
            Some(n) if n <= 24 => "float",
            _ => "double",
        },
        "real" => "float",
        "char" | "varchar" | "nchar" | "nvarchar" | "text" | "ntext" | "xml"
        | "uniqueidentifier" | "sysname" | "sql_variant" | "time" => "string",
        "binary" | "varbinary" | "image" | "rowversion" | "timestamp" | "geometry"
        | "geography" | "hierarchyid" => "binary",
        "date" => "date",
        "datetime" | "datetime2" | "smalldatetime" => "timestamp_ntz",
        "datetimeoffset" => "timestamp",
        _ => return None,
    })
}

/// A Connect type: its schema type, then its logical name with the parameters that matter
/// (`bytes org.apache.kafka.connect.data.Decimal(scale=2,connect.decimal.precision=10)`).
fn connect(text: &str) -> Option<&'static str> {
    let (base, logical) = text.split_once(' ').unwrap_or((text, ""));
    let name = logical.split('(').next().unwrap_or("");
    let by_name = match name {
        "org.apache.kafka.connect.data.Decimal" => return None, // parametric
        "io.debezium.data.VariableScaleDecimal" => Some("string"),
        "org.apache.kafka.connect.data.Date" | "io.debezium.time.Date" => Some("date"),
        "org.apache.kafka.connect.data.Timestamp"
        | "io.debezium.time.Timestamp"
        | "io.debezium.time.MicroTimestamp"
        | "io.debezium.time.NanoTimestamp" => Some("timestamp_ntz"),
        "io.debezium.time.ZonedTimestamp" => Some("timestamp"),
        "org.apache.kafka.connect.data.Time"
        | "io.debezium.time.Time"
        | "io.debezium.time.MicroTime"
        | "io.debezium.time.NanoTime"
        | "io.debezium.time.ZonedTime" => Some("string"),
        "io.debezium.data.Bits" => Some("binary"),
        "io.debezium.time.Year" => Some("int"),
        _ => None,
    };
    by_name.or(Some(match base {
        "int8" => "tinyint",
        "int16" => "smallint",
        "int32" => "int",
        "int64" => "bigint",
        // The JSON converter writes `float` and `double`; Connect's own names are these.
        "float" | "float32" => "float",
        "double" | "float64" => "double",
        "boolean" => "boolean",
        "string" => "string",
        "bytes" => "binary",
        "array" | "map" | "struct" => "string",
        _ => return None,
    }))
}

/// Connect's `Decimal`: `decimal(precision, scale)`, precision 38 when not sent.
fn connect_decimal(text: &str) -> Option<String> {
    let (_, logical) = text.split_once(' ')?;
    let params = logical
        .strip_prefix("org.apache.kafka.connect.data.Decimal(")?
        .strip_suffix(')')?;
    let mut scale = None;
    let mut precision = MAX_PRECISION;
    for param in params.split(',') {
        match param.split_once('=') {
            Some(("scale", v)) => scale = v.parse::<i64>().ok(),
            Some(("connect.decimal.precision", v)) => precision = v.parse().ok()?,
            _ => {}
        }
    }
    Some(decimal(precision, scale?))
}

/// An Avro type: its base type, then its logical type or record name (`long
/// timestamp-micros`, `bytes decimal(10,2)`, `record timestampTz`).
fn avro(text: &str) -> Option<&'static str> {
    let (base, logical) = text.split_once(' ').unwrap_or((text, ""));
    Some(match (base, logical) {
        ("bytes" | "fixed", logical) if logical.starts_with("decimal(") => return None, // parametric
        ("int", "date") => "date",
        ("long", "timestamp-millis" | "timestamp-micros" | "timestamp-nanos") => "timestamp",
        ("long", "local-timestamp-millis" | "local-timestamp-micros" | "local-timestamp-nanos") => {
            "timestamp_ntz"
        }
        ("record", "datetime") => "timestamp_ntz",
        ("record", "timestampTz") => "timestamp",
        // Datastream's `number`: MySQL `bigint unsigned`, Oracle `NUMBER` of no precision.
        // A decimal of an unsigned 64-bit value's 20 digits, widened by the schema pass to
        // what the values need (widen.rs), `string` past 38 digits.
        ("string", "number") => "decimal(20,0)",
        ("int", "time-millis") | ("long", "time-micros" | "time-interval-micros") => "string",
        ("int", _) => "int",
        ("long", _) => "bigint",
        ("float", _) => "float",
        ("double", _) => "double",
        ("boolean", _) => "boolean",
        ("bytes" | "fixed", _) => "binary",
        ("string" | "enum" | "array" | "record", _) => "string",
        _ => return None,
    })
}

fn datahub(t: &SqlType) -> Option<&'static str> {
    Some(match t.base.as_str() {
        "tinyint" => "tinyint",
        "smallint" => "smallint",
        "integer" | "int" => "int",
        "bigint" | "long" => "bigint",
        "float" => "float",
        "double" => "double",
        "decimal" if t.args.len() != 2 => "string",
        "boolean" => "boolean",
        "string" => "string",
        "date" | "timestamp" => "timestamp",
        "bytes" => "binary",
        _ => return None,
    })
}

/// An Arrow type as pyarrow prints it (`int64`, `timestamp[us, tz=UTC]`).
fn arrow(text: &str) -> Option<&'static str> {
    Some(match text {
        "int8" => "tinyint",
        "int16" | "uint8" => "smallint",
        "int32" | "uint16" => "int",
        "int64" | "uint32" => "bigint",
        "uint64" => "decimal(20,0)",
        "float" => "float",
        "double" => "double",
        "bool" => "boolean",
        "string" | "large_string" | "string_view" | "null" => "string",
        "binary" | "large_binary" | "binary_view" => "binary",
        "date32[day]" | "date64[ms]" => "date",
        t if t.starts_with("fixed_size_binary[") => "binary",
        t if t.starts_with("timestamp[") && t.contains(", tz=") => "timestamp",
        t if t.starts_with("timestamp[") => "timestamp_ntz",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(dialect: Dialect, text: &str) -> Option<String> {
        spark_type(dialect, text)
    }

    #[test]
    fn mysql_types() {
        let cases = [
            ("bigint(20) unsigned", "decimal(20,0)"),
            ("BIGINT", "bigint"),
            ("int(10) unsigned zerofill", "bigint"),
            ("tinyint(1)", "tinyint"),
            ("tinyint(3) unsigned", "smallint"),
            ("mediumint(8) unsigned", "int"),
            ("decimal(10,2)", "decimal(10,2)"),
            ("decimal(65,30)", "string"),
            ("decimal", "decimal(10,0)"),
            ("numeric(12)", "decimal(12,0)"),
            ("float", "float"),
            ("float(30)", "double"),
            ("bit(8)", "bigint"),
            ("bit(64)", "decimal(20,0)"),
            ("datetime(6)", "timestamp_ntz"),
            ("timestamp(3)", "timestamp"),
            ("enum('a','b)c')", "string"),
            ("varchar(255)", "string"),
            ("mediumblob", "binary"),
            ("point", "binary"),
            ("json", "string"),
            ("time(3)", "string"),
            ("year(4)", "int"),
        ];
        for (text, spark) in cases {
            assert_eq!(map(Dialect::Mysql, text).as_deref(), Some(spark), "{text}");
        }
        assert_eq!(map(Dialect::Mysql, "vector(3)"), None);
    }

    #[test]
    fn other_dialects() {
        let cases = [
            (Dialect::Postgresql, "numeric", "string"),
            (Dialect::Postgresql, "numeric(12,3)", "decimal(12,3)"),
            (
                Dialect::Postgresql,
                "timestamp(6) with time zone",
                "timestamp",
            ),
            (
                Dialect::Postgresql,
                "timestamp without time zone",
                "timestamp_ntz",
            ),
            (Dialect::Postgresql, "integer[]", "string"),
            (Dialect::Postgresql, "_int4", "string"),
            (Dialect::Oracle, "NUMBER(10,2)", "decimal(10,2)"),
            (Dialect::Oracle, "NUMBER(5,-2)", "decimal(7,0)"),
            (Dialect::Oracle, "NUMBER(*,2)", "decimal(38,2)"),
            (Dialect::Oracle, "NUMBER", "string"),
            (Dialect::Oracle, "DATE", "timestamp_ntz"),
            (
                Dialect::Oracle,
                "TIMESTAMP(6) WITH LOCAL TIME ZONE",
                "timestamp",
            ),
            (Dialect::Oracle, "INTERVAL DAY(2) TO SECOND(6)", "string"),
            (Dialect::Sqlserver, "datetime2(7)", "timestamp_ntz"),
            (Dialect::Sqlserver, "datetimeoffset", "timestamp"),
            (Dialect::Sqlserver, "money", "decimal(19,4)"),
            (Dialect::Sqlserver, "timestamp", "binary"),
            (Dialect::Sqlserver, "tinyint", "smallint"),
            (
                Dialect::Connect,
                "bytes org.apache.kafka.connect.data.Decimal(scale=2,connect.decimal.precision=10)",
                "decimal(10,2)",
            ),
            (
                Dialect::Connect,
                "bytes org.apache.kafka.connect.data.Decimal(scale=0)",
                "decimal(38,0)",
            ),
            (
                Dialect::Connect,
                "int64 io.debezium.time.MicroTimestamp",
                "timestamp_ntz",
            ),
            (Dialect::Connect, "string io.debezium.data.Json", "string"),
            (Dialect::Connect, "int16", "smallint"),
            (Dialect::Avro, "bytes decimal(10,2)", "decimal(10,2)"),
            (Dialect::Avro, "long timestamp-micros", "timestamp"),
            (Dialect::Avro, "string number", "decimal(20,0)"),
            (Dialect::Avro, "long", "bigint"),
            (Dialect::Datahub, "DOUBLE", "double"),
            (Dialect::Datahub, "DATE", "timestamp"),
            (Dialect::Datahub, "DECIMAL(12,2)", "decimal(12,2)"),
            (Dialect::Arrow, "decimal128(20, 0)", "decimal(20,0)"),
            (Dialect::Arrow, "timestamp[us, tz=UTC]", "timestamp"),
            (Dialect::Arrow, "uint64", "decimal(20,0)"),
        ];
        for (dialect, text, spark) in cases {
            assert_eq!(map(dialect, text).as_deref(), Some(spark), "{text}");
        }
    }
}
