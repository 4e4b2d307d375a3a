//! The column builders of the event batch: bytes (text and binary), timestamps, lists and
//! maps of text, each append-only with a `truncate` that keeps a prefix of rows, and the
//! null bookkeeping they share. [`crate::events::EventBuilder`] holds one per output column;
//! typed mode ([`crate::typed`]) writes its text values through them too.

use std::sync::{Arc, OnceLock};

use arrow_array::{
    ArrayRef, BinaryArray, ListArray, MapArray, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields};

/// `entries: struct<key: string not null, value: string>`, as pyarrow and Spark name them.
pub(crate) fn map_entries_field() -> FieldRef {
    static FIELD: OnceLock<FieldRef> = OnceLock::new();
    FIELD
        .get_or_init(|| {
            let fields = Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Utf8, true),
            ]);
            Arc::new(Field::new("entries", DataType::Struct(fields), false))
        })
        .clone()
}

pub(crate) fn list_item_field() -> FieldRef {
    Arc::new(Field::new("item", DataType::Utf8, true))
}

/// Offsets as Arrow's buffer, without re-checking them: every column starts them at 0 and
/// only ever appends a length at or past the last one, and `truncate` keeps a prefix.
pub(crate) fn offsets(offsets: Vec<i32>) -> OffsetBuffer<i32> {
    debug_assert!(offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]));
    // SAFETY: non-empty, starting at 0 and non-decreasing, as said above.
    unsafe { OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)) }
}

/// Which rows of a column are null, as the list of their indexes: nulls are the exception
/// in most columns, so a valid value costs nothing here and the bitmap is built once.
#[derive(Debug, Default)]
pub(crate) struct Validity {
    pub(crate) nulls: Vec<u32>,
}

impl Validity {
    /// Row `row` (the next one) is null.
    #[inline(always)]
    pub(crate) fn null_at(&mut self, row: usize) {
        self.nulls.push(row as u32);
    }

    /// Keeps the first `rows` rows.
    pub(crate) fn truncate(&mut self, rows: usize) {
        while self.nulls.last().is_some_and(|&i| i as usize >= rows) {
            self.nulls.pop();
        }
    }

    /// The bitmap of `rows` rows, or `None` when none is null.
    pub(crate) fn finish(self, rows: usize) -> Option<NullBuffer> {
        if self.nulls.is_empty() {
            return None;
        }
        let mut bits = BooleanBufferBuilder::new(rows);
        bits.append_n(rows, true);
        for i in self.nulls {
            bits.set_bit(i as usize, false);
        }
        Some(NullBuffer::new(bits.finish()))
    }
}

/// Appends `bytes` to `data`. Most values here are a few bytes long (column names, numbers),
/// where a call to `memcpy` costs more than the copy: those are copied inline.
#[inline(always)]
pub(crate) fn append(data: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len > 16 {
        data.extend_from_slice(bytes);
        return;
    }
    data.reserve(16);
    // SAFETY: 16 bytes of spare capacity were reserved; every read is within `bytes`
    // (the two 8- or 4-byte halves overlap when len < 16 or 8), and `set_len` covers only
    // the `len` bytes written.
    unsafe {
        let src = bytes.as_ptr();
        let dst = data.as_mut_ptr().add(data.len());
        if len >= 8 {
            let head = src.cast::<u64>().read_unaligned();
            let tail = src.add(len - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(head);
            dst.add(len - 8).cast::<u64>().write_unaligned(tail);
        } else if len >= 4 {
            let head = src.cast::<u32>().read_unaligned();
            let tail = src.add(len - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(head);
            dst.add(len - 4).cast::<u32>().write_unaligned(tail);
        } else {
            for i in 0..len {
                *dst.add(i) = *src.add(i);
            }
        }
        data.set_len(data.len() + len);
    }
}

/// A variable-length column (`utf8` or `binary`): offsets, bytes and validity.
#[derive(Debug, Default)]
pub struct BytesColumn {
    pub(crate) offsets: Vec<i32>,
    pub(crate) data: Vec<u8>,
    pub(crate) valid: Validity,
}

impl BytesColumn {
    pub(crate) fn new() -> Self {
        Self {
            offsets: vec![0],
            data: Vec::new(),
            valid: Validity::default(),
        }
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when no row was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pre-sizes for `rows` more rows of about 16 bytes.
    pub(crate) fn reserve(&mut self, rows: usize) {
        self.offsets.reserve(rows);
        self.data.reserve(rows * 16);
    }

    /// Appends a string that is never null (map keys, list items): only its offset.
    #[inline(always)]
    pub fn push_required(&mut self, value: &str) {
        append(&mut self.data, value.as_bytes());
        self.offsets.push(self.data.len() as i32);
    }

    #[inline(always)]
    fn close(&mut self, valid: bool) {
        if !valid {
            self.valid.null_at(self.len());
        }
        // Offsets are i32 (plain `utf8`/`binary`, which Spark reads); `Sink` starts a new
        // batch long before a column reaches 2 GiB.
        self.offsets.push(self.data.len() as i32);
    }

    /// Appends a null.
    #[inline(always)]
    pub fn push_null(&mut self) {
        self.close(false);
    }

    /// Appends `n` empty values, valid as far as this column knows (typed mode's text
    /// fields under null structs, whose nulls the struct's bitmap supplies).
    pub(crate) fn push_empty(&mut self, n: usize) {
        let end = *self.offsets.last().unwrap_or(&0);
        self.offsets.resize(self.offsets.len() + n, end);
    }

    /// Appends a string.
    #[inline(always)]
    pub fn push_str(&mut self, value: &str) {
        append(&mut self.data, value.as_bytes());
        self.close(true);
    }

    /// Appends a string, or a null for `None` and for `""` (proto3's "not set").
    pub fn push_nonempty(&mut self, value: Option<&str>) {
        match value {
            Some(v) if !v.is_empty() => self.push_str(v),
            _ => self.push_null(),
        }
    }

    /// Appends bytes (for `binary` columns).
    pub fn push_bytes(&mut self, value: &[u8]) {
        append(&mut self.data, value);
        self.close(true);
    }

    /// Appends a value written in place by `write`, which must append valid UTF-8 to a
    /// `utf8` column. Saves formatting into a temporary `String`.
    #[inline(always)]
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.data);
        self.close(true);
    }

    pub(crate) fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        self.offsets.truncate(rows + 1);
        self.data.truncate(self.offsets[rows] as usize);
    }

    /// The bytes of row `row` (written or not null).
    fn value(&self, row: usize) -> &[u8] {
        &self.data[self.offsets[row] as usize..self.offsets[row + 1] as usize]
    }

    /// The null rows from `row` on: the tail of the list (nulls are recorded in row
    /// order), found from the end, so a recent row costs a few steps and not a binary
    /// search over the whole batch's nulls.
    fn nulls_from(&self, row: usize) -> &[u32] {
        let nulls = &self.valid.nulls;
        let before = nulls
            .iter()
            .rev()
            .take_while(|&&n| n as usize >= row)
            .count();
        &nulls[nulls.len() - before..]
    }

    /// The text of the last row of a `utf8` column, `None` when it is null or absent.
    pub(crate) fn last_text(&self) -> Option<&str> {
        let row = self.len().checked_sub(1)?;
        // Nulls are recorded in row order: the last row is null if it is the last one.
        if self.valid.nulls.last() == Some(&(row as u32)) {
            return None;
        }
        // SAFETY: a `utf8` column holds whole UTF-8 strings (see `finish_utf8`).
        Some(unsafe { std::str::from_utf8_unchecked(self.value(row)) })
    }

    fn parts(self) -> (OffsetBuffer<i32>, Buffer, Option<NullBuffer>) {
        let nulls = self.valid.finish(self.offsets.len() - 1);
        (offsets(self.offsets), Buffer::from_vec(self.data), nulls)
    }

    pub(crate) fn finish_utf8(self) -> StringArray {
        let (offsets, data, nulls) = self.parts();
        // SAFETY: every push path appends whole UTF-8 strings (`&str`, formatted integers,
        // base64, text checked by `text::decode`), and offsets only ever mark those ends.
        unsafe { StringArray::new_unchecked(offsets, data, nulls) }
    }

    pub(crate) fn finish_binary(self) -> BinaryArray {
        let (offsets, data, nulls) = self.parts();
        BinaryArray::new(offsets, data, nulls)
    }
}

/// A `timestamp[us, tz=UTC]` column.
#[derive(Debug, Default)]
pub struct TimestampColumn {
    pub(crate) values: Vec<i64>,
    pub(crate) valid: Validity,
}

impl TimestampColumn {
    /// Appends microseconds since the epoch, or a null.
    pub fn push(&mut self, micros: Option<i64>) {
        if micros.is_none() {
            self.valid.null_at(self.values.len());
        }
        self.values.push(micros.unwrap_or(0));
    }

    pub(crate) fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.valid.truncate(rows);
    }

    pub(crate) fn finish(self) -> TimestampMicrosecondArray {
        let nulls = self.valid.finish(self.values.len());
        TimestampMicrosecondArray::new(ScalarBuffer::from(self.values), nulls).with_timezone("UTC")
    }
}

/// A `list<utf8>` column.
#[derive(Debug)]
pub struct ListColumn {
    pub(crate) offsets: Vec<i32>,
    pub(crate) valid: Validity,
    pub(crate) items: BytesColumn,
}

impl Default for ListColumn {
    fn default() -> Self {
        Self {
            offsets: vec![0],
            valid: Validity::default(),
            items: BytesColumn::new(),
        }
    }
}

impl ListColumn {
    /// Appends one item to the open row; [`ListColumn::close`] ends the row.
    #[inline]
    pub fn item(&mut self, value: &str) {
        self.items.push_required(value);
    }

    /// Ends the open row as a list of the items appended since the last row.
    pub fn close(&mut self) {
        self.offsets.push(self.items.len() as i32);
    }

    /// Rows ended so far.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when no row was ended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a null (discarding items appended to the open row).
    pub fn push_null(&mut self) {
        let start = *self.offsets.last().unwrap_or(&0) as usize;
        self.items.truncate(start);
        self.valid.null_at(self.offsets.len() - 1);
        self.offsets.push(start as i32);
    }

    pub(crate) fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        self.offsets.truncate(rows + 1);
        self.items.truncate(self.offsets[rows] as usize);
    }

    pub(crate) fn finish(self) -> ListArray {
        let items = Arc::new(self.items.finish_utf8()) as ArrayRef;
        let nulls = self.valid.finish(self.offsets.len() - 1);
        ListArray::new(list_item_field(), offsets(self.offsets), items, nulls)
    }
}

/// A `map<utf8, utf8>` column. Entries go into the open row; [`MapColumn::close`] or
/// [`MapColumn::push_null`] ends it.
#[derive(Debug)]
pub struct MapColumn {
    pub(crate) offsets: Vec<i32>,
    pub(crate) valid: Validity,
    pub(crate) keys: BytesColumn,
    pub(crate) values: BytesColumn,
}

impl Default for MapColumn {
    fn default() -> Self {
        Self {
            offsets: vec![0],
            valid: Validity::default(),
            keys: BytesColumn::new(),
            values: BytesColumn::new(),
        }
    }
}

impl MapColumn {
    fn row_start(&self) -> usize {
        *self.offsets.last().unwrap_or(&0) as usize
    }

    /// Appends an entry to the open row. The caller keeps keys unique (see [`Self::insert`]).
    #[inline(always)]
    pub fn entry(&mut self, key: &str, value: Option<&str>) {
        self.keys.push_required(key);
        match value {
            Some(v) => self.values.push_str(v),
            None => self.values.push_null(),
        }
    }

    /// Appends an entry whose value is written in place (valid UTF-8 only).
    #[inline(always)]
    pub fn entry_with(&mut self, key: &str, write: impl FnOnce(&mut Vec<u8>)) {
        self.keys.push_required(key);
        self.values.push_with(write);
    }

    /// Appends an entry of a key and a value given as their UTF-8 bytes (row images: a
    /// JSON key and a number token or a string without escapes, both checked UTF-8).
    #[inline(always)]
    pub fn entry_utf8(&mut self, key: &[u8], value: &[u8]) {
        append(&mut self.keys.data, key);
        self.keys.offsets.push(self.keys.data.len() as i32);
        append(&mut self.values.data, value);
        self.values.close(true);
    }

    /// Appends an entry whose value `write` appends in place (valid UTF-8 only), or a null
    /// value when `write` returns false (having appended nothing).
    #[inline(always)]
    pub fn entry_rendered(&mut self, key: &str, write: impl FnOnce(&mut Vec<u8>) -> bool) {
        self.keys.push_required(key);
        let valid = write(&mut self.values.data);
        self.values.close(valid);
    }

    /// Ends the open row as a map, or as a null when it has no entry (`metadata`).
    pub fn close_or_null(&mut self) {
        if self.is_open_empty() {
            self.push_null();
        } else {
            self.close();
        }
    }

    /// Bytes of keys and values written so far.
    pub fn data_bytes(&self) -> usize {
        self.keys.data.len() + self.values.data.len()
    }

    /// True when the open row has no entry yet.
    pub fn is_open_empty(&self) -> bool {
        self.row_start() == self.keys.len()
    }

    /// Appends an entry with a decimal integer value.
    pub fn entry_int(&mut self, key: &str, value: impl itoa::Integer) {
        self.entry(key, Some(itoa::Buffer::new().format(value)));
    }

    /// True when the open row already has `key`.
    pub fn has_key(&self, key: &str) -> bool {
        (self.row_start()..self.keys.len()).any(|i| self.keys.value(i) == key.as_bytes())
    }

    /// Appends an entry unless the open row has the key already (the first one wins).
    pub fn insert(&mut self, key: &str, value: &str) {
        if !self.has_key(key) {
            self.entry(key, Some(value));
        }
    }

    /// Drops the entries of the open row (to reuse it after a failed row).
    pub fn clear_open(&mut self) {
        let start = self.row_start();
        self.keys.truncate(start);
        self.values.truncate(start);
    }

    /// The entry indexes of the last ended row, `None` when it is null.
    pub(crate) fn last_row(&self) -> Option<std::ops::Range<usize>> {
        let rows = self.offsets.len() - 1;
        let row = rows.checked_sub(1)?;
        if self.valid.nulls.last() == Some(&(row as u32)) {
            return None;
        }
        Some(self.offsets[row] as usize..self.offsets[rows] as usize)
    }

    /// Entry `i`'s key.
    pub(crate) fn key_at(&self, i: usize) -> &str {
        // SAFETY: keys are written as whole UTF-8 strings (see `BytesColumn::finish_utf8`).
        unsafe { std::str::from_utf8_unchecked(self.keys.value(i)) }
    }

    /// The values of the last ended row's entries that are null (as entry indexes), for
    /// [`MapColumn::value_in`]; `entries` is [`MapColumn::last_row`].
    pub(crate) fn null_values(&self, entries: &std::ops::Range<usize>) -> &[u32] {
        self.values.nulls_from(entries.start)
    }

    /// Entry `i`'s value, `None` when it is null; `nulls` is [`MapColumn::null_values`] of
    /// the row `i` belongs to (typed mode reads every value of the last row: a lookup in
    /// its few nulls instead of a binary search over the batch's was 16% of the native
    /// typed DTS decode).
    pub(crate) fn value_in(&self, i: usize, nulls: &[u32]) -> Option<&str> {
        if nulls.contains(&(i as u32)) {
            return None;
        }
        // SAFETY: values are written as whole UTF-8 strings (see `BytesColumn::finish_utf8`).
        Some(unsafe { std::str::from_utf8_unchecked(self.values.value(i)) })
    }

    /// Makes the last ended row a null (a multi-table row its typed images hold).
    pub(crate) fn null_last_row(&mut self) {
        let rows = self.offsets.len() - 1;
        if rows > 0 {
            self.truncate(rows - 1);
            self.push_null();
        }
    }

    /// Ends the open row as a map of the entries appended since the last row.
    pub fn close(&mut self) {
        self.offsets.push(self.keys.len() as i32);
    }

    /// Ends the open row as a null (discarding entries appended to it).
    pub fn push_null(&mut self) {
        self.clear_open();
        self.valid.null_at(self.offsets.len() - 1);
        self.offsets.push(self.row_start() as i32);
    }

    pub(crate) fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        self.offsets.truncate(rows + 1);
        let end = self.offsets[rows] as usize;
        self.keys.truncate(end);
        self.values.truncate(end);
    }

    pub(crate) fn finish(self) -> MapArray {
        let DataType::Struct(fields) = map_entries_field().data_type().clone() else {
            unreachable!("the entries field is a struct")
        };
        let keys = Arc::new(self.keys.finish_utf8()) as ArrayRef;
        let values = Arc::new(self.values.finish_utf8()) as ArrayRef;
        let entries = StructArray::new(fields, vec![keys, values], None);
        let nulls = self.valid.finish(self.offsets.len() - 1);
        MapArray::new(
            map_entries_field(),
            offsets(self.offsets),
            entries,
            nulls,
            false,
        )
    }
}
