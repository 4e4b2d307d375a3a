//! JSON values ([`crate::json::Value`]) into the event columns: metadata entries, row
//! images as text maps or, in typed mode, converted straight into typed columns. Used by
//! `datahub-blob`, `tdsql-json`, `debezium-json` and `datastream-json`.

use crate::columns::{BytesColumn, MapColumn};
use crate::events::EventBuilder;
use crate::json::{Str, Value};
use crate::typed::TypedImages;

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
    let Some(columns) = columns else {
        map.push_null();
        return;
    };
    columns.for_each_member(|name, value| match (name.verbatim(), value.verbatim()) {
        // Most values: copied as they are, with no call per value.
        (Some(key), Some(text)) => map.entry_utf8(key, text),
        _ => map.entry_rendered(&name.text(), |out| value.render_into(out)),
    });
    map.close();
}

/// A row's `before` and `after` images: their text maps, or in typed mode with one schema
/// their structs, converted straight from the JSON ([`convert_image`]).
pub fn write_images(rows: &mut EventBuilder, before: Option<Value<'_>>, after: Option<Value<'_>>) {
    if rows.schema_pass() {
        rows.before.push_null();
        rows.after.push_null();
        return;
    }
    match rows.typed().filter(|typed| typed.direct()) {
        Some(typed) => {
            convert_image(typed, false, before);
            convert_image(typed, true, after);
            rows.before.push_null();
            rows.after.push_null();
        }
        None => {
            write_image(&mut rows.before, before);
            write_image(&mut rows.after, after);
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
    let Some(columns) = columns else {
        typed.close_image(after, false);
        return;
    };
    typed.open_image(after);
    let mut rendered = Vec::new();
    columns.for_each_member(|name, value| match (name.verbatim(), value.verbatim()) {
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
