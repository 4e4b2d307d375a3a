//! JSON values ([`crate::json::Value`]) into the event columns: metadata entries, row
//! images as text maps or, in typed mode, converted straight into typed columns. Used by
//! `datahub-blob`, `tdsql-json`, `debezium-json` and `datastream-json`.

use crate::columns::{BytesColumn, MapColumn};
use crate::events::EventBuilder;
use crate::json::{Kind, Str, Value};
use crate::text::base64_into;
use crate::typed::TypedImages;

/// The value a producer writes for a column it did not read: Debezium's
/// `unavailable.value.placeholder` (`__debezium_unavailable_value` unless configured), sent
/// for an unchanged out-of-line (TOASTed) PostgreSQL value or an Oracle LOB. A member whose
/// value is the placeholder in any of the shapes the connector sends it is left out of the
/// image, as a column the image does not carry (docs/formats/debezium-json.md):
/// - the placeholder's text (text, `json`/`jsonb`, enums);
/// - the base64 of its bytes (`bytea`, binary columns);
/// - an array of that one text (`text[]` and other text arrays);
/// - an array of its bytes as numbers (`int[]`, `bigint[]`: `[95,95,100,...]`).
#[derive(Debug, Clone)]
pub struct Unavailable {
    text: Vec<u8>,
    base64: Vec<u8>,
}

impl Unavailable {
    /// The placeholder `text`; `None` for an empty text (no placeholder).
    pub fn new(text: &str) -> Option<Self> {
        if text.is_empty() {
            return None;
        }
        let mut base64 = Vec::new();
        base64_into(text.as_bytes(), &mut base64);
        Some(Self {
            text: text.as_bytes().to_vec(),
            base64,
        })
    }

    /// Whether `value` is the placeholder, in one of its shapes.
    #[inline]
    pub fn matches(&self, value: Value<'_>) -> bool {
        match value.kind() {
            Kind::String => value.as_str().is_some_and(|s| self.is_text(s, true)),
            Kind::Array => self.is_array(value),
            _ => false,
        }
    }

    fn is_text(&self, text: Str<'_>, base64: bool) -> bool {
        let same = |want: &[u8]| match text.verbatim() {
            Some(raw) => raw == want,
            None => text.text().as_bytes() == want,
        };
        same(&self.text) || (base64 && same(&self.base64))
    }

    #[inline(never)]
    fn is_array(&self, value: Value<'_>) -> bool {
        let n = value.len();
        if n == 1 {
            let item = value.items().next();
            return item
                .and_then(|v| v.as_str())
                .is_some_and(|s| self.is_text(s, false));
        }
        let mut digits = itoa::Buffer::new();
        n == self.text.len()
            && value
                .items()
                .zip(&self.text)
                .all(|(item, &byte)| item.number() == Some(digits.format(byte)))
    }

    fn skips(unavailable: Option<&Self>, value: Value<'_>) -> bool {
        unavailable.is_some_and(|u| u.matches(value))
    }
}

/// Adds a metadata entry, unless the value is null or the key is there already (the first
/// wins).
pub fn add_metadata(map: &mut MapColumn, key: &str, value: Value<'_>) {
    if !value.is_null() && !map.has_key(key) {
        map.entry_with(key, |out| {
            value.render_into(out);
        });
    }
}

/// Writes an object's members (first duplicate wins) as a row image, each value rendered
/// as text ([`Value::render_into`]); a null image for `None`.
pub fn write_image(map: &mut MapColumn, columns: Option<Value<'_>>) {
    write_image_except(map, columns, None)
}

/// [`write_image`], leaving out the members whose value is the `unavailable` placeholder.
pub fn write_image_except(
    map: &mut MapColumn,
    columns: Option<Value<'_>>,
    unavailable: Option<&Unavailable>,
) {
    let Some(columns) = columns else {
        map.push_null();
        return;
    };
    columns.for_each_member(|name, value| match (name.verbatim(), value.verbatim()) {
        _ if Unavailable::skips(unavailable, value) => {}
        // Most values: copied as they are, with no call per value.
        (Some(key), Some(text)) => map.entry_utf8(key, text),
        _ => map.entry_rendered(&name.text(), |out| value.render_into(out)),
    });
    map.close();
}

/// A row's `before` and `after` images: their text maps, or in typed mode with one schema
/// their structs, converted straight from the JSON ([`convert_image`]).
pub fn write_images(rows: &mut EventBuilder, before: Option<Value<'_>>, after: Option<Value<'_>>) {
    write_images_except(rows, before, after, None)
}

/// [`write_images`], leaving out the members whose value is the `unavailable` placeholder.
pub fn write_images_except(
    rows: &mut EventBuilder,
    before: Option<Value<'_>>,
    after: Option<Value<'_>>,
    unavailable: Option<&Unavailable>,
) {
    if rows.schema_pass() {
        rows.before.push_null();
        rows.after.push_null();
        return;
    }
    match rows.typed().filter(|typed| typed.direct()) {
        Some(typed) => {
            convert_image_except(typed, false, before, unavailable);
            convert_image_except(typed, true, after, unavailable);
            rows.before.push_null();
            rows.after.push_null();
        }
        None => {
            write_image_except(&mut rows.before, before, unavailable);
            write_image_except(&mut rows.after, after, unavailable);
        }
    }
}

/// The schema pass, for a wire without types: the column names of a row's images, those of
/// `before` then those only `after` has, each once, in the order sent.
pub fn image_names(before: Option<Value<'_>>, after: Option<Value<'_>>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for image in [before, after].into_iter().flatten() {
        for (name, _) in image.members() {
            let name = name.text();
            if !names.iter().any(|n| *n == name) {
                names.push(name.into_owned());
            }
        }
    }
    names
}

/// Converts a row image straight into typed mode's columns, entry by entry, with the text
/// [`write_image`] would write for each value, but without writing it
/// ([`TypedImages::direct`]).
pub fn convert_image(typed: &mut TypedImages, after: bool, columns: Option<Value<'_>>) {
    convert_image_except(typed, after, columns, None)
}

/// [`convert_image`], leaving out the members whose value is the `unavailable`
/// placeholder (so typed mode counts them absent: `after_absent`).
pub fn convert_image_except(
    typed: &mut TypedImages,
    after: bool,
    columns: Option<Value<'_>>,
    unavailable: Option<&Unavailable>,
) {
    let Some(columns) = columns else {
        typed.close_image(after, false);
        return;
    };
    typed.open_image(after);
    let mut rendered = Vec::new();
    columns.for_each_member(|name, value| match (name.verbatim(), value.verbatim()) {
        _ if Unavailable::skips(unavailable, value) => {}
        (Some(key), Some(text)) => {
            // SAFETY: keys and values are checked UTF-8 (as `MapColumn::entry_utf8` has it).
            let (key, text) = unsafe {
                (
                    std::str::from_utf8_unchecked(key),
                    std::str::from_utf8_unchecked(text),
                )
            };
            typed.image_value(after, key, Some(text));
        }
        _ => {
            rendered.clear();
            let text = value.render_into(&mut rendered).then(|| {
                // SAFETY: `render_into` appends valid UTF-8 (row images are `utf8` maps).
                unsafe { std::str::from_utf8_unchecked(&rendered) }
            });
            typed.image_value(after, &name.text(), text);
        }
    });
    typed.close_image(after, true);
}

/// Appends a string's text to a `utf8` column, or a null.
pub fn push_text(column: &mut BytesColumn, value: Option<Str<'_>>) {
    match value {
        Some(text) => column.push_with(|out| text.write_to(out)),
        None => column.push_null(),
    }
}

#[cfg(test)]
mod tests {
    use super::Unavailable;
    use crate::json::Parser;

    /// The placeholder in each shape Debezium sends it (checked on PostgreSQL 15 with
    /// Debezium 3.6.1), and values that only look like it.
    #[test]
    fn the_placeholder_in_its_shapes() {
        let unavailable = Unavailable::new("__debezium_unavailable_value").unwrap();
        let codes = format!("{:?}", b"__debezium_unavailable_value").replace(' ', "");
        let cases: [(&str, bool); 12] = [
            (r#""__debezium_unavailable_value""#, true),
            (r#""X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==""#, true),
            (r#"["__debezium_unavailable_value"]"#, true),
            (&codes, true),
            (r#""\u005f_debezium_unavailable_value""#, true),
            (r#""__debezium_unavailable_valu""#, false),
            (r#"["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]"#, false),
            (r#"["__debezium_unavailable_value","x"]"#, false),
            (&codes.replace("[95,", "[95.0,"), false),
            (&codes.replace("101]", "102]"), false),
            ("28", false),
            (r#"{"__debezium_unavailable_value":1}"#, false),
        ];
        let mut parser = Parser::default();
        for (json, want) in cases {
            let value = parser.parse(json.as_bytes()).unwrap();
            assert_eq!(unavailable.matches(value), want, "{json}");
        }
        assert!(Unavailable::new("").is_none());
    }
}
