//! Converting each row's images into the struct columns as the row ends (or as a format
//! reads them), with `after_absent`, and the errors a value that does not convert gives.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, Field, Fields};

use crate::columns::{BytesColumn, ListColumn, MapColumn};

use super::column::{Column, StructColumn};
use super::spec::{type_name, Table, TypedSpec};
use super::{Hints, AFTER_ABSENT};

/// The typed images of one batch, built row by row beside the text ones.
#[derive(Debug)]
pub struct TypedImages {
    spec: Arc<TypedSpec>,
    before: Vec<StructColumn>,
    after: Vec<StructColumn>,
    /// Multi-table: the table each row belongs to.
    table: BytesColumn,
    /// The fields each row's `after` image does not carry ([`AFTER_ABSENT`]).
    after_absent: ListColumn,
    /// The current message's hints (reset as each message starts).
    pub hints: Hints,
    /// The first conversion failure of the current message.
    error: Option<String>,
    /// Multi-table: the table whose value that failure was (its error rows go with it).
    failed_table: Option<usize>,
    /// Multi-table: the table the next row ended belongs to, whatever its names (an error
    /// row of a value of that table that did not convert).
    claim_next: Option<usize>,
    slots: Vec<Option<usize>>,
    key: String,
    /// Multi-table: the names of the last row routed and its table. Rows come in runs of
    /// one table, and a run skips building and hashing up to four names a row.
    last_route: Option<([Option<String>; 3], Option<usize>)>,
    /// `before` and `after` as converted while they are read ([`Self::open_image`]).
    direct: [DirectImage; 2],
    /// Images of the open row closed by [`Self::close_image`].
    direct_closed: u8,
    /// Bytes of the keys and values converted directly, for [`Self::converted_bytes`].
    converted: usize,
}

/// The state of one image converted as it is read.
#[derive(Debug, Default)]
struct DirectImage {
    /// The fields that have a value in this row (the first entry of a key wins).
    filled: Vec<bool>,
    /// The field after the last one found: images list their columns in order.
    guess: usize,
    /// The failure of the lowest field (its index), as `convert_row` reports it.
    failure: Option<(usize, (String, String, DataType))>,
    /// Whether the image was there ([`TypedImages::close_image`]'s `present`).
    present: bool,
}

impl TypedImages {
    /// Empty builders for `spec`.
    pub fn new(spec: Arc<TypedSpec>) -> Self {
        let before = spec
            .tables
            .iter()
            .map(|t| StructColumn::new(&t.fields))
            .collect();
        let after = spec
            .tables
            .iter()
            .map(|t| StructColumn::new(&t.fields))
            .collect();
        Self {
            spec,
            before,
            after,
            table: BytesColumn::new(),
            after_absent: ListColumn::default(),
            hints: Hints::default(),
            error: None,
            failed_table: None,
            claim_next: None,
            slots: Vec::new(),
            key: String::new(),
            last_route: None,
            direct: Default::default(),
            direct_closed: 0,
            converted: 0,
        }
    }

    /// [`TypedSpec::route`], remembered for the last row's names.
    fn route(&mut self, names: [Option<&str>; 3]) -> Option<usize> {
        if !self.spec.multi {
            return Some(0);
        }
        if let Some((last, table)) = &self.last_route {
            if last.iter().zip(names).all(|(a, b)| a.as_deref() == b) {
                return *table;
            }
        }
        let table = self.spec.route(names, &mut self.key);
        let (last, routed) = self.last_route.get_or_insert_with(Default::default);
        for (slot, name) in last.iter_mut().zip(names) {
            match name {
                Some(name) => {
                    let text = slot.get_or_insert_with(String::new);
                    text.clear();
                    text.push_str(name);
                }
                None => *slot = None,
            }
        }
        *routed = table;
        table
    }

    /// The spec this converts to.
    pub fn spec(&self) -> &Arc<TypedSpec> {
        &self.spec
    }

    /// Pre-sizes the struct columns for about `rows` rows (see
    /// [`crate::events::EventBuilder::reserve_for_input`]).
    pub fn reserve(&mut self, rows: usize) {
        for image in self.before.iter_mut().chain(self.after.iter_mut()) {
            for column in &mut image.columns {
                column.reserve(rows);
            }
        }
    }

    /// A new message starts: no hints, no failure.
    pub fn start_message(&mut self) {
        self.hints = Hints::default();
        self.error = None;
        self.failed_table = None;
        self.direct_closed = 0;
    }

    /// True when a format may convert the images as it reads them, without writing their
    /// text maps ([`Self::open_image`], [`Self::image_value`], [`Self::close_image`]): with
    /// one schema every row is that table's, and the text images are never output.
    pub fn direct(&self) -> bool {
        !self.spec.multi
    }

    /// Bytes of keys and values converted without a text map, which an output budget
    /// counts as it counts the text maps' (`EventBuilder::output_bytes`).
    pub fn converted_bytes(&self) -> usize {
        self.converted
    }

    /// Starts the open row's `before` (`after` false) or `after` image, to be converted
    /// value by value (only when [`Self::direct`]).
    pub fn open_image(&mut self, after: bool) {
        let fields = self.spec.tables[0].fields.len();
        let image = &mut self.direct[usize::from(after)];
        image.filled.clear();
        image.filled.resize(fields, false);
        image.guess = 0;
        image.failure = None;
        side(&mut self.before[0], &mut self.after[0], after).settle();
    }

    /// One entry of an open image: converted into its field's column, as `end_row` would
    /// from the text map (a key that is no field is ignored; a later entry of a key too).
    pub fn image_value(&mut self, after: bool, key: &str, value: Option<&str>) {
        let table = &self.spec.tables[0];
        let image = &mut self.direct[usize::from(after)];
        let Some(at) = table.find(key, image.guess) else {
            return;
        };
        image.guess = at + 1;
        if std::mem::replace(&mut image.filled[at], true) {
            return;
        }
        let column = side(&mut self.before[0], &mut self.after[0], after);
        let target = &mut column.columns[at];
        let Some(text) = value else {
            target.push_null();
            return;
        };
        self.converted += key.len() + text.len();
        let field = &table.fields[at];
        if !convert_value(target, field, text, &self.hints, self.spec.zone.as_ref())
            && image.failure.as_ref().is_none_or(|f| at < f.0)
        {
            image.failure = Some((at, failure_of(field, text)));
        }
    }

    /// Ends an open image: a null struct when it had no entry (`present` false), else a
    /// row whose fields without an entry are null.
    pub fn close_image(&mut self, after: bool, present: bool) {
        let image = &mut self.direct[usize::from(after)];
        image.present = present;
        let column = side(&mut self.before[0], &mut self.after[0], after);
        if present {
            for (target, filled) in column.columns.iter_mut().zip(&image.filled) {
                if !filled {
                    target.push_null();
                }
            }
            column.rows += 1;
        } else {
            // Entries of an absent image are not expected; drop any, to keep rows even.
            for target in &mut column.columns {
                if target.len() > column.rows {
                    target.truncate(column.rows);
                }
            }
            column.push_null();
        }
        self.direct_closed += 1;
    }

    /// The first conversion failure since [`Self::start_message`].
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// Multi-table: the table of the value whose conversion failed the current message
    /// (`None` without a failure, or with one schema).
    pub fn failed_table(&self) -> Option<usize> {
        self.failed_table
    }

    /// Multi-table: the next row ended belongs to `table` (its `table` column names it, its
    /// structs are that table's, null), whatever its source names say.
    pub fn claim_next(&mut self, table: Option<usize>) {
        self.claim_next = table.filter(|_| self.spec.multi);
    }

    /// Converts the row that just ended: its `before` and `after` text images, and the
    /// table it belongs to by its source names. Returns true when a table claimed the row
    /// in a multi-table spec (its text images are then no longer needed).
    pub fn end_row(
        &mut self,
        names: [Option<&str>; 3],
        before: &MapColumn,
        after: &MapColumn,
    ) -> bool {
        if self.direct_closed > 0 {
            // Both images converted as they were read: report a failure as below, the
            // before image's first.
            debug_assert_eq!(self.direct_closed, 2, "a format closed one image of two");
            self.direct_closed = 0;
            let after = &self.direct[1];
            let fields = &self.spec.tables[0].fields;
            push_absent(&mut self.after_absent, fields, after.present, |at| {
                after.filled[at]
            });
            for (name, image) in [("before", 0), ("after", 1)] {
                let failure = self.direct[image].failure.take();
                if let (Some((_, (column, text, data_type))), None) = (failure, &self.error) {
                    self.error = Some(conversion_error("", name, &column, &text, &data_type));
                }
            }
            return false;
        }
        let claimed = match self.claim_next.take() {
            Some(table) => Some(table),
            None => self.route(names),
        };
        let spec = Arc::clone(&self.spec);
        for t in 0..spec.tables.len() {
            if Some(t) != claimed {
                self.before[t].push_null();
                self.after[t].push_null();
            }
        }
        match claimed {
            Some(t) => {
                let info = &spec.tables[t];
                if spec.multi {
                    self.table.push_str(&info.name);
                }
                for (image, map) in [("before", before), ("after", after)] {
                    let column = side(&mut self.before[t], &mut self.after[t], image == "after");
                    let zone = spec.zone.as_ref();
                    let failure =
                        convert_row(info, map, column, &mut self.slots, &self.hints, zone);
                    if image == "after" {
                        // `slots` holds the after image's entries (a key with a null value
                        // is carried: an explicit null).
                        let slots = &self.slots;
                        let present = map.last_row().is_some();
                        push_absent(&mut self.after_absent, &info.fields, present, |at| {
                            slots[at].is_some()
                        });
                    }
                    if let Some((name, text, data_type)) = failure {
                        if self.error.is_none() {
                            let prefix = if spec.multi {
                                format!("{}: ", info.name)
                            } else {
                                String::new()
                            };
                            self.error =
                                Some(conversion_error(&prefix, image, &name, &text, &data_type));
                            self.failed_table = spec.multi.then_some(t);
                        }
                    }
                }
                spec.multi
            }
            None => {
                if spec.multi {
                    self.table.push_null();
                }
                self.after_absent.push_null();
                false
            }
        }
    }

    /// Keeps the first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        self.direct_closed = 0;
        for column in self.before.iter_mut().chain(self.after.iter_mut()) {
            column.truncate(rows);
        }
        if self.spec.multi && self.table.len() > rows {
            self.table.truncate(rows);
        }
        if self.after_absent.len() > rows {
            self.after_absent.truncate(rows);
        }
    }

    /// The finished columns, in output order: `[before, after, after_absent]` for a single
    /// schema; `[table, before_0, after_0, before_1, …, after_absent]` for tables.
    pub fn finish(self) -> Vec<(Field, ArrayRef)> {
        let mut out = Vec::new();
        if self.spec.multi {
            out.push((
                Field::new("table", DataType::Utf8, true),
                Arc::new(self.table.finish_utf8()) as ArrayRef,
            ));
        }
        for (i, ((b, a), info)) in self
            .before
            .into_iter()
            .zip(self.after)
            .zip(self.spec.tables.iter())
            .enumerate()
        {
            let suffix = if self.spec.multi {
                format!("_{i}")
            } else {
                String::new()
            };
            for (name, column) in [("before", b), ("after", a)] {
                let array = column.finish(&info.fields);
                let field = Field::new(
                    format!("{name}{suffix}"),
                    DataType::Struct(info.fields.clone()),
                    true,
                );
                out.push((field, Arc::new(array) as ArrayRef));
            }
        }
        let absent = self.after_absent.finish();
        let field = Field::new(AFTER_ABSENT, absent.data_type().clone(), true);
        out.push((field, Arc::new(absent) as ArrayRef));
        out
    }
}

/// Appends one row of [`AFTER_ABSENT`]: null without an image (`present` false), else the
/// names of the fields the image does not carry.
#[inline]
fn push_absent(
    list: &mut ListColumn,
    fields: &Fields,
    present: bool,
    carried: impl Fn(usize) -> bool,
) {
    if !present {
        list.push_null();
        return;
    }
    for (at, field) in fields.iter().enumerate() {
        if !carried(at) {
            list.item(field.name());
        }
    }
    list.close();
}

/// Converts the last row of `map` into one row of `column`; on failure, the first column
/// that did not convert, its text and type (the row is still appended, with that field
/// null, so every child stays as long as the struct).
fn convert_row(
    table: &Table,
    map: &MapColumn,
    column: &mut StructColumn,
    slots: &mut Vec<Option<usize>>,
    hints: &Hints,
    zone: Option<&jiff::tz::TimeZone>,
) -> Option<(String, String, DataType)> {
    let Some(entries) = map.last_row() else {
        column.push_null();
        return None;
    };
    column.settle();
    slots.clear();
    slots.resize(table.fields.len(), None);
    let mut guess = 0;
    for i in entries.clone() {
        if let Some(at) = table.find(map.key_at(i), guess) {
            guess = at + 1;
            // The first entry of a key wins, as in the text map.
            slots[at].get_or_insert(i);
        }
    }
    let nulls = map.null_values(&entries);
    let mut failure = None;
    for (at, field) in table.fields.iter().enumerate() {
        let target = &mut column.columns[at];
        let Some(text) = slots[at].and_then(|i| map.value_in(i, nulls)) else {
            target.push_null();
            continue;
        };
        if !convert_value(target, field, text, hints, zone) && failure.is_none() {
            failure = Some(failure_of(field, text));
        }
    }
    column.rows += 1;
    failure
}

/// Converts `text` into `target`'s next row, a null when it does not convert (then false).
#[inline(always)]
fn convert_value(
    target: &mut Column,
    field: &Field,
    text: &str,
    hints: &Hints,
    zone: Option<&jiff::tz::TimeZone>,
) -> bool {
    let hint = hints.columns.get(field.name());
    if target.push_text(text, hint, hints, zone).is_some() {
        return true;
    }
    target.push_null();
    false
}

/// What a conversion failure reports: the column, its text and its type.
#[cold]
fn failure_of(field: &Field, text: &str) -> (String, String, DataType) {
    (
        field.name().clone(),
        text.to_string(),
        field.data_type().clone(),
    )
}

/// The `before` (`after` false) or `after` struct of a table.
fn side<'a>(
    before: &'a mut StructColumn,
    after: &'a mut StructColumn,
    is_after: bool,
) -> &'a mut StructColumn {
    if is_after {
        after
    } else {
        before
    }
}

/// The error text of a value that does not convert: `after.price: cannot convert "abc"
/// to decimal(10,2)` (the value quoted as JSON, cut at 64 characters).
pub fn conversion_error(
    prefix: &str,
    image: &str,
    column: &str,
    text: &str,
    data_type: &DataType,
) -> String {
    let shown: String = text.chars().take(64).collect();
    let mut quoted = Vec::new();
    crate::text::json_string_into(&shown, &mut quoted);
    let quoted = String::from_utf8(quoted).unwrap_or_default();
    let more = if shown.len() < text.len() { "…" } else { "" };
    format!(
        "{prefix}{image}.{column}: cannot convert {quoted}{more} to {}",
        type_name(data_type)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Decimal128Array, StructArray};

    /// Through the decoder: a message whose value does not convert is one error row, of
    /// the table whose value it was, and leaves no typed row behind; rows are routed to
    /// their table's structs.
    #[test]
    fn decoder_converts_routes_and_takes_back_failed_messages() {
        use crate::decoder::{Decoder, Mode};
        use crate::formats::Options;
        use arrow_array::{Array, BinaryArray, StringArray};
        use arrow_schema::Schema;

        let schema = |fields: Vec<Field>| Arc::new(Schema::new(fields));
        let orders = schema(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
        ]);
        let users = schema(vec![Field::new("uid", DataType::Int32, true)]);
        let spec = TypedSpec::tables(vec![("d.t".into(), orders), ("u".into(), users)]).unwrap();
        let options = Options {
            typed: Some(Arc::new(spec)),
            ..Options::default()
        };
        let mut decoder =
            Decoder::with_options("debezium-json", Mode::Permissive, &options).unwrap();
        let messages: Vec<Option<&[u8]>> = vec![
            Some(br#"{"op":"c","after":{"id":1,"price":"9.99"},"source":{"db":"d","table":"t"}}"#),
            Some(br#"{"op":"c","after":{"id":2,"price":"x"},"source":{"db":"d","table":"t"}}"#),
            Some(br#"{"op":"c","after":{"uid":7},"source":{"db":"d","table":"u"}}"#),
            Some(br#"{"op":"c","after":{"z":1},"source":{"db":"d","table":"z"}}"#),
            None,
        ];
        let values: arrow_array::ArrayRef = Arc::new(BinaryArray::from(messages));
        let batch = decoder.decode(&values, None, true).unwrap().batch;
        let names: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names[19..],
            [
                "table",
                "before_0",
                "after_0",
                "before_1",
                "after_1",
                "after_absent"
            ]
        );
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let table = column("table");
        let table = table.as_any().downcast_ref::<StringArray>().unwrap();
        let tables: Vec<_> = table.iter().collect();
        // The message that failed on a value of `d.t` is an error row of `d.t`.
        assert_eq!(tables, [Some("d.t"), Some("d.t"), Some("u"), None, None]);
        let error = column("error");
        let error = error.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            error.value(1),
            "d.t: after.price: cannot convert \"x\" to decimal(10,2)"
        );
        let after = column("after_0");
        let after = after.as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(after.len(), 5);
        assert_eq!(after.null_count(), 4);
        let price = after
            .column(1)
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .unwrap();
        assert_eq!(price.value(0), 999);
        let after_1 = column("after_1");
        assert_eq!(after_1.null_count(), 4);
        // The generic map keeps only the row no table claims.
        let generic = column("after");
        assert!(generic.is_null(0) && generic.is_null(2) && generic.is_valid(3));
    }

    #[test]
    fn errors_name_the_column() {
        let message = conversion_error("", "after", "price", "abc", &DataType::Decimal128(10, 2));
        assert_eq!(
            message,
            "after.price: cannot convert \"abc\" to decimal(10,2)"
        );
    }
}
