//! One module per input format; each implements [`FormatDecoder`].

use std::collections::HashMap;

use arrow_array::RecordBatch;
use bytes::Bytes;

use crate::decoder::Sink;
use crate::error::{Error, Result};

pub mod datahub_blob;
pub mod datahub_tuple;
pub mod tdsql_json;
pub mod tencent_dts;

/// The format names, as `decode` accepts them.
pub const FORMATS: &[&str] = &["tencent-dts", "datahub-blob", "tdsql-json", "datahub-tuple"];

/// What a format does with messages; the shared loop in [`crate::decoder::Decoder`] handles
/// nulls (tombstones), ordinals and modes.
pub trait FormatDecoder: Send + Sync {
    /// Decodes one non-null message: events or an error into `sink`. Fails only when the
    /// sink does (failfast).
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
    ) -> Result<()>;

    /// True for a format whose input is record batches (`datahub-tuple`), not binary values:
    /// [`crate::decoder::Decoder`] then calls [`FormatDecoder::decode_records`] and refuses
    /// binary values, and the other way round.
    fn takes_records(&self) -> bool {
        false
    }

    /// Decodes every record (row) of `records`, the first with ordinal `first`: one event or
    /// one error row each, into `sink`. Fails when the columns do not fit the format
    /// (nothing written then) or when the sink does (failfast, [`Error::Message`] naming the
    /// record). Only formats that [take records](FormatDecoder::takes_records) implement it.
    fn decode_records(
        &mut self,
        _sink: &mut Sink,
        _first: i64,
        _records: &RecordBatch,
    ) -> Result<()> {
        Err(Error::Columns(
            "this format decodes binary values, not record batches".to_string(),
        ))
    }

    /// End of input: report whatever is still held.
    fn finish(&mut self, _sink: &mut Sink) -> Result<()> {
        Ok(())
    }

    /// Parts of multi-part messages held now.
    fn pending(&self) -> u64 {
        0
    }
}

/// Per-format options, as `Decoder(..., columns=...)` passes them. A format that does not
/// take an option refuses it ([`Error::Option`]) rather than ignoring it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `tdsql-json`: the column names of each `db.table`, naming its positional images.
    pub columns: Option<HashMap<String, Vec<String>>>,
}

/// The decoder for a format name, with the name as a `'static` string.
pub fn new_decoder(
    format: &str,
    options: &Options,
) -> Result<(&'static str, Box<dyn FormatDecoder>)> {
    if options.columns.is_some() && format != "tdsql-json" {
        return Err(Error::Option {
            option: "columns",
            format: format.to_string(),
        });
    }
    match format {
        "tencent-dts" => Ok(("tencent-dts", Box::new(tencent_dts::TencentDts::default()))),
        "datahub-blob" => Ok((
            datahub_blob::FORMAT,
            Box::new(datahub_blob::DatahubBlob::default()),
        )),
        "tdsql-json" => Ok((
            tdsql_json::FORMAT,
            Box::new(tdsql_json::TdsqlJson::new(options.columns.clone())?),
        )),
        "datahub-tuple" => Ok(("datahub-tuple", Box::new(datahub_tuple::DatahubTuple))),
        other => Err(Error::UnknownFormat(other.to_string(), FORMATS.join(", "))),
    }
}
