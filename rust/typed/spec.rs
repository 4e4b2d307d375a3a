//! The schemas typed mode converts to: one table's checked columns ([`Table`]), one schema
//! or one per table ([`TypedSpec`]), and the table a row of a multi-table stream belongs to.

use std::collections::HashMap;

use arrow_schema::{DataType, Field, Fields, SchemaRef, TimeUnit};

use crate::error::{Error, Result};

/// The Spark SQL name of a supported type, as error messages and the DDL spell it.
pub fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Utf8 => "string".into(),
        DataType::Binary => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp_ntz".into(),
        other => other.to_string(),
    }
}

const SUPPORTED: &str = "boolean, tinyint, smallint, int, bigint, float, double, \
decimal(p,s) with 1 <= p <= 38 and 0 <= s <= p, string, binary, date, timestamp \
(timestamp[us, tz=UTC]), timestamp_ntz (timestamp[us])";

fn supported(data_type: &DataType) -> bool {
    match data_type {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::Binary
        | DataType::Date32 => true,
        DataType::Decimal128(p, s) => (1..=38).contains(p) && *s >= 0 && (*s as u8) <= *p,
        DataType::Timestamp(TimeUnit::Microsecond, None) => true,
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) => tz.as_ref() == "UTC",
        _ => false,
    }
}

/// One table's columns.
#[derive(Debug)]
pub struct Table {
    /// The name a multi-table stream routes by (`db.table`), empty for a single schema.
    pub name: String,
    /// The struct fields of `before` and `after`.
    pub fields: Fields,
    index: HashMap<String, usize>,
}

impl Table {
    /// The field of image key `key`: `guess` first (images usually list the columns in the
    /// table's order, as the schema does), then by hashing the key.
    #[inline(always)]
    pub(super) fn find(&self, key: &str, guess: usize) -> Option<usize> {
        match self.fields.get(guess) {
            Some(field) if same_name(field.name(), key) => Some(guess),
            _ => self.index.get(key).copied(),
        }
    }

    fn new(name: String, schema: &SchemaRef) -> Result<Self> {
        let mut index = HashMap::new();
        let label = if name.is_empty() {
            "schema".to_string()
        } else {
            format!("tables[{name:?}]")
        };
        if schema.fields().is_empty() {
            // As Python's `as_schema`: structs of no field hold nothing, surely a mistake
            // (and arrow's StructArray::new cannot give them a length).
            return Err(Error::Schema(format!("{label}: no column")));
        }
        for (i, field) in schema.fields().iter().enumerate() {
            if !supported(field.data_type()) {
                return Err(Error::Schema(format!(
                    "{label}: column '{}' has type {}, which typed mode does not convert to; \
                     supported: {SUPPORTED}",
                    field.name(),
                    field.data_type()
                )));
            }
            if index.insert(field.name().clone(), i).is_some() {
                return Err(Error::Schema(format!(
                    "{label}: column '{}' is named twice",
                    field.name()
                )));
            }
        }
        // Every field nullable: a column missing from an image is null.
        let fields: Fields = schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect();
        Ok(Self {
            name,
            fields,
            index,
        })
    }
}

/// What typed mode converts to: one schema for every row, or one per table.
#[derive(Debug)]
pub struct TypedSpec {
    pub(super) tables: Vec<Table>,
    pub(super) multi: bool,
    by_name: HashMap<String, usize>,
    /// The source's time zone (docs/typed.md, "The source's time zone"): wall clocks the
    /// wire sends without an offset are read in it, instants shown in it; UTC when `None`.
    pub(super) zone: Option<jiff::tz::TimeZone>,
}

impl TypedSpec {
    /// `before`/`after` of every row become structs of `schema`'s columns.
    pub fn single(schema: &SchemaRef) -> Result<Self> {
        Ok(Self {
            tables: vec![Table::new(String::new(), schema)?],
            multi: false,
            by_name: HashMap::new(),
            zone: None,
        })
    }

    /// Rows of each named table get that table's structs, in columns of their own.
    pub fn tables(tables: Vec<(String, SchemaRef)>) -> Result<Self> {
        if tables.is_empty() {
            return Err(Error::Schema("tables names no table".into()));
        }
        let mut by_name = HashMap::new();
        let mut out = Vec::new();
        for (i, (name, schema)) in tables.into_iter().enumerate() {
            if name.is_empty() || by_name.insert(name.clone(), i).is_some() {
                return Err(Error::Schema(format!(
                    "tables: bad or repeated name {name:?}"
                )));
            }
            out.push(Table::new(name, &schema)?);
        }
        Ok(Self {
            tables: out,
            multi: true,
            by_name,
            zone: None,
        })
    }

    /// The spec with the source's time zone, an IANA name (`Asia/Shanghai`) spelled as the
    /// time zone database spells it.
    pub fn with_time_zone(mut self, name: &str) -> Result<Self> {
        let unknown = || {
            Error::Schema(format!(
                "source_time_zone: unknown time zone {name:?}: give an IANA name such as \
                 'Asia/Shanghai' or 'UTC'"
            ))
        };
        let zone = jiff::tz::TimeZone::get(name).map_err(|_| unknown())?;
        // The database matches names in any case; Python's zoneinfo does not.
        if zone.iana_name() != Some(name) {
            return Err(unknown());
        }
        self.zone = Some(zone);
        Ok(self)
    }

    /// True for a multi-table spec.
    pub fn is_multi(&self) -> bool {
        self.multi
    }

    /// The table a row belongs to: the first of `db.schema.table`, `db.table`,
    /// `schema.table` and `table` that names one (`key` is a reused buffer).
    pub(super) fn route(&self, names: [Option<&str>; 3], key: &mut String) -> Option<usize> {
        if !self.multi {
            return Some(0);
        }
        let [db, schema, table] = names;
        let table = table?;
        let candidates = [
            db.zip(schema).map(|(d, s)| [Some(d), Some(s)]),
            db.map(|d| [Some(d), None]),
            schema.map(|s| [Some(s), None]),
            Some([None, None]),
        ];
        candidates.into_iter().flatten().find_map(|prefix| {
            key.clear();
            for part in prefix.into_iter().flatten() {
                key.push_str(part);
                key.push('.');
            }
            key.push_str(table);
            self.by_name.get(key.as_str()).copied()
        })
    }
}

/// `a == b` for column names, inline: most are 3 to 16 bytes, compared as two overlapping
/// words, where a call to `memcmp` per image entry was 5% of the typed DTS decode.
#[inline(always)]
pub(super) fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap());
    let half = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap());
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        0..=3 => (0..n).all(|i| a[i] == b[i]),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn schemas_with_unsupported_types_are_refused() {
        use arrow_schema::Schema;
        let schema = Arc::new(Schema::new(vec![Field::new("u", DataType::UInt64, true)]));
        let error = TypedSpec::single(&schema).unwrap_err().to_string();
        assert!(error.contains("column 'u' has type UInt64"), "{error}");
    }

    /// Found by the typed fuzz target: a schema of no column reached arrow's
    /// `StructArray::new`, which panics on structs without fields.
    #[test]
    fn schemas_without_columns_are_refused() {
        use arrow_schema::Schema;
        let empty = Arc::new(Schema::empty());
        let error = TypedSpec::single(&empty).unwrap_err().to_string();
        assert!(error.contains("schema: no column"), "{error}");
        let error = TypedSpec::tables(vec![("shop.orders".into(), empty)]).unwrap_err();
        assert!(error.to_string().contains("no column"), "{error}");
    }

    #[test]
    fn names_compare_as_strings_do() {
        let names: Vec<String> = (0..=20)
            .map(|n| "abcdefghijklmnopqrstu"[..n].to_string())
            .collect();
        for a in &names {
            for b in &names {
                assert_eq!(same_name(a, b), a == b, "{a:?} {b:?}");
                // The same length, one byte different, anywhere.
                for i in 0..b.len() {
                    let mut c = b.clone().into_bytes();
                    c[i] = b'_';
                    let c = String::from_utf8(c).unwrap();
                    assert_eq!(same_name(a, &c), *a == c, "{a:?} {c:?}");
                }
            }
        }
    }
}
