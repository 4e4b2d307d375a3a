//! The schema pass's second look (docs/types.md, "Values wider than the wire's type"): a
//! column whose values do not fit the Spark type its wire type maps to gets the type they
//! need. DataWorks declares MySQL's `bigint unsigned` as DataHub `LONG`, whose values above
//! 2⁶³−1 fit no `bigint`: the column becomes `decimal(20,0)`, so the value the wire
//! carried lands in the table instead of making its message an error.
//!
//! Only integer and decimal columns are looked at: every other type either holds what the
//! wire's type holds, or its values fail conversion for a reason no wider type cures (text
//! in a number column), and stay errors. `python/cdc_decode/fallback/_schemas.py` is the
//! Python engine's twin, held to the same results by the parity tests.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::WireSchema;

/// Decimal digits Spark keeps at most.
const MAX_DIGITS: u32 = 38;

/// What a column's type holds, for the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// An integer type: its range, and the digits of the decimal it widens to (`bigint`:
    /// 20, the digits of an unsigned 64-bit value).
    Integer { min: i128, max: i128, digits: u32 },
    /// `decimal(p,s)`: digits before the point (`p - s`) and after it (`s`).
    Decimal { whole: u32, scale: u32 },
}

impl Holds {
    fn of(spark_type: &str) -> Option<Self> {
        let integer = |bits: u32, digits: u32| Holds::Integer {
            min: -(1i128 << (bits - 1)),
            max: (1i128 << (bits - 1)) - 1,
            digits,
        };
        Some(match spark_type {
            "tinyint" => integer(8, 3),
            "smallint" => integer(16, 5),
            "int" => integer(32, 10),
            "bigint" => integer(64, 20),
            _ => {
                let args = spark_type.strip_prefix("decimal(")?.strip_suffix(')')?;
                let (p, s) = args.split_once(',')?;
                let (p, s): (u32, u32) = (p.trim().parse().ok()?, s.trim().parse().ok()?);
                if s > p {
                    return None;
                }
                Holds::Decimal {
                    whole: p - s,
                    scale: s,
                }
            }
        })
    }
}

/// The widest value of a column seen so far: digits before and after the point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Need {
    pub whole: u32,
    pub scale: u32,
}

/// A number as text: optional sign, digits, optional fraction and exponent (`12.5`,
/// `-0.05`, `1.5E+2`): its digits before and after the point once the exponent is applied,
/// leading and trailing zeros aside, and whether it is an integer as written (no point,
/// no exponent). `None` for anything else.
fn digits(text: &str) -> Option<(u64, u64, bool)> {
    let bytes = text.as_bytes();
    let mut at = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let start = at;
    while at < bytes.len() && bytes[at].is_ascii_digit() {
        at += 1;
    }
    let whole = &bytes[start..at];
    let mut fraction: &[u8] = &[];
    let mut plain = true;
    if bytes.get(at) == Some(&b'.') {
        plain = false;
        at += 1;
        let from = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        fraction = &bytes[from..at];
    }
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        plain = false;
        at += 1;
        let negative = bytes.get(at) == Some(&b'-');
        at += usize::from(matches!(bytes.get(at), Some(b'+' | b'-')));
        let from = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            // Saturates: an exponent of a million digits needs no more than "many".
            exponent = exponent
                .saturating_mul(10)
                .saturating_add(i64::from(bytes[at] - b'0'));
            at += 1;
        }
        if at == from {
            return None;
        }
        if negative {
            exponent = -exponent;
        }
    }
    if at != bytes.len() {
        return None;
    }
    // The significant digits: the whole part without leading zeros, the fraction without
    // trailing ones; the point then moves by the exponent.
    let whole = &whole[whole.iter().position(|&d| d != b'0').unwrap_or(whole.len())..];
    let fraction = &fraction[..fraction
        .iter()
        .rposition(|&d| d != b'0')
        .map_or(0, |i| i + 1)];
    let (mut left, mut right) = (whole.len() as i64, fraction.len() as i64);
    if left == 0 {
        // 0.00123: the leading zeros of the fraction are not significant before the point.
        let zeros = fraction.iter().take_while(|&&d| d == b'0').count() as i64;
        if zeros as usize == fraction.len() {
            return Some((0, 0, plain)); // zero
        }
        left = -zeros;
    }
    left = left.saturating_add(exponent);
    right = right.saturating_sub(exponent);
    Some((left.max(0) as u64, right.max(0) as u64, plain))
}

/// What `text`, a value of a column of type `holds`, needs beyond it (`None`: it fits, or
/// no wider number type would take it: text, a fraction in an integer column).
fn need(holds: Holds, text: &str) -> Option<Need> {
    let (whole, scale, plain) = digits(text)?;
    let clip = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    match holds {
        Holds::Integer { min, max, .. } => {
            if !plain || scale != 0 {
                return None;
            }
            if whole <= 38 {
                let value: i128 = text.parse().ok()?;
                if (min..=max).contains(&value) {
                    return None;
                }
            }
            Some(Need {
                whole: clip(whole),
                scale: 0,
            })
        }
        Holds::Decimal {
            whole: room,
            scale: kept,
        } => (whole > u64::from(room) || scale > u64::from(kept)).then(|| Need {
            whole: clip(whole),
            scale: clip(scale),
        }),
    }
}

/// The Spark type a column of `spark_type` takes to hold values needing `need` as well:
/// `decimal(p,s)` of the wider whole part and scale, or `string` past 38 digits.
pub fn widened(spark_type: &str, need: Need) -> String {
    let (whole, scale) = match Holds::of(spark_type) {
        Some(Holds::Integer { digits, .. }) => (digits.max(need.whole), need.scale),
        Some(Holds::Decimal { whole, scale }) => (whole.max(need.whole), scale.max(need.scale)),
        None => return spark_type.to_string(),
    };
    match whole.checked_add(scale) {
        Some(p) if p <= MAX_DIGITS => format!("decimal({p},{scale})"),
        _ => "string".to_string(),
    }
}

/// The schema pass's memory of widened schemas: for each wire schema, its integer and
/// decimal columns, and each widening made (so every row that needs one shares one
/// schema object, as rows of one wire schema do).
#[derive(Debug, Default)]
pub struct Widening {
    /// By a schema's address: the schema (held, so the address names it) and its integer
    /// and decimal columns.
    checked: HashMap<usize, Checked>,
    /// By a schema's address and the needs of its columns: the widened schema.
    made: HashMap<Made, Arc<WireSchema>>,
}

/// A schema held (so that its address names it) and its integer and decimal columns.
type Checked = (Arc<WireSchema>, Vec<(usize, Holds)>);

/// A widening made: the schema's address, and each widened column's index and need.
type Made = (usize, Vec<(usize, Need)>);

impl Widening {
    /// Schemas remembered before it starts again.
    const MAX: usize = 4096;

    /// `schema` widened to what the values of one image need (`values`: its entries, name
    /// and text, the first of a name counting, as in typed mode), or `schema` itself when
    /// every value fits. A row's two images are two calls, the second on the first's result.
    pub fn image<'v>(
        &mut self,
        schema: &Arc<WireSchema>,
        values: impl IntoIterator<Item = (Cow<'v, str>, Option<Cow<'v, str>>)>,
    ) -> Arc<WireSchema> {
        if self.checked.len() + self.made.len() >= Self::MAX {
            self.checked.clear();
            self.made.clear();
        }
        let address = Arc::as_ptr(schema) as usize;
        let (_, columns) = self.checked.entry(address).or_insert_with(|| {
            let columns = schema
                .columns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((i, Holds::of(c.spark_type.as_deref()?)?)))
                .collect();
            (Arc::clone(schema), columns)
        });
        if columns.is_empty() {
            return Arc::clone(schema);
        }
        let mut needs: Vec<(usize, Need)> = Vec::new();
        let mut seen: Vec<usize> = Vec::new();
        for (name, text) in values {
            let Some(&(at, holds)) = columns
                .iter()
                .find(|(i, _)| schema.columns[*i].name == name)
            else {
                continue;
            };
            if seen.contains(&at) {
                continue; // the first entry of a name is the value (typed mode's rule)
            }
            seen.push(at);
            let Some(found) = text.and_then(|t| need(holds, &t)) else {
                continue;
            };
            match needs.iter_mut().find(|(i, _)| *i == at) {
                Some((_, n)) => {
                    n.whole = n.whole.max(found.whole);
                    n.scale = n.scale.max(found.scale);
                }
                None => needs.push((at, found)),
            }
        }
        if needs.is_empty() {
            return Arc::clone(schema);
        }
        needs.sort_unstable_by_key(|(i, _)| *i);
        Arc::clone(
            self.made
                .entry((address, needs.clone()))
                .or_insert_with(|| {
                    let mut wider = (**schema).clone();
                    for (at, n) in needs {
                        let column = &mut wider.columns[at];
                        if let Some(t) = column.spark_type.as_deref() {
                            column.spark_type = Some(widened(t, n));
                        }
                    }
                    Arc::new(wider)
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::Dialect;

    fn need_of(t: &str, text: &str) -> Option<String> {
        need(Holds::of(t).unwrap(), text).map(|n| widened(t, n))
    }

    #[test]
    fn integers_past_their_type_become_decimals() {
        assert_eq!(need_of("bigint", "9223372036854775807"), None);
        assert_eq!(need_of("bigint", "-9223372036854775808"), None);
        assert_eq!(
            need_of("bigint", "9223372036854775808").as_deref(),
            Some("decimal(20,0)")
        );
        assert_eq!(
            need_of("bigint", "18446744073709551615").as_deref(),
            Some("decimal(20,0)")
        );
        assert_eq!(
            need_of("bigint", "123456789012345678901234").as_deref(),
            Some("decimal(24,0)")
        );
        assert_eq!(
            need_of("bigint", &"9".repeat(39)).as_deref(),
            Some("string")
        );
        assert_eq!(
            need_of("int", "2147483648").as_deref(),
            Some("decimal(10,0)")
        );
        assert_eq!(need_of("tinyint", "+255").as_deref(), Some("decimal(3,0)"));
        assert_eq!(need_of("tinyint", "-0"), None);
        assert_eq!(need_of("int", "007"), None);
        // Not an integer: no number type cures it (typed mode reports it).
        for text in ["1.0", "1e3", "abc", "", "-", "1 ", "0x10"] {
            assert_eq!(need_of("bigint", text), None, "{text:?}");
        }
    }

    #[test]
    fn decimals_wider_than_declared_widen_on_either_side() {
        assert_eq!(need_of("decimal(10,2)", "12345678.99"), None);
        assert_eq!(need_of("decimal(10,2)", "12.500"), None);
        assert_eq!(
            need_of("decimal(10,2)", "123456789.5").as_deref(),
            Some("decimal(11,2)")
        );
        assert_eq!(
            need_of("decimal(10,2)", "1.125").as_deref(),
            Some("decimal(11,3)")
        );
        assert_eq!(
            need_of("decimal(10,2)", "1.5E+9").as_deref(),
            Some("decimal(12,2)")
        );
        assert_eq!(need_of("decimal(10,2)", "-0.05"), None);
        assert_eq!(
            need_of("decimal(10,2)", "0.00123").as_deref(),
            Some("decimal(13,5)")
        );
        assert_eq!(need_of("decimal(10,2)", "1e-2"), None);
        assert_eq!(need_of("decimal(10,2)", "0e999999999999999999999"), None);
        assert_eq!(
            need_of("decimal(10,2)", "1e999999999999999999999").as_deref(),
            Some("string")
        );
        assert_eq!(need_of("decimal(10,2)", "1.2.3"), None);
    }

    #[test]
    fn a_row_widens_its_schema_once_and_shares_it() {
        let schema = Arc::new(WireSchema::typed(
            Dialect::Datahub,
            [
                ("id".to_string(), "LONG".to_string()),
                ("account_no".to_string(), "LONG".to_string()),
                ("name".to_string(), "STRING".to_string()),
            ],
            Some(vec!["id".into()]),
        ));
        let mut widening = Widening::default();
        let row = |w: &mut Widening, no: &'static str| {
            w.image(
                &schema,
                [
                    (Cow::Borrowed("id"), Some(Cow::Borrowed("1"))),
                    (Cow::Borrowed("account_no"), Some(Cow::Borrowed(no))),
                    (Cow::Borrowed("account_no"), Some(Cow::Borrowed("1e99"))),
                    (
                        Cow::Borrowed("name"),
                        Some(Cow::Borrowed("99999999999999999999")),
                    ),
                ],
            )
        };
        let small = row(&mut widening, "5");
        assert!(Arc::ptr_eq(&small, &schema));
        let big = row(&mut widening, "10198847974573099249");
        let again = row(&mut widening, "18446744073709551615");
        assert!(Arc::ptr_eq(&big, &again));
        let types: Vec<_> = big
            .columns
            .iter()
            .map(|c| c.spark_type.as_deref())
            .collect();
        assert_eq!(
            types,
            [Some("bigint"), Some("decimal(20,0)"), Some("string")]
        );
        assert_eq!(big.columns[1].source_type.as_deref(), Some("LONG"));
    }
}
