//! One module per input format; each implements [`FormatDecoder`].

use std::collections::HashMap;

use arrow_array::RecordBatch;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::sink::Sink;

pub mod datahub_blob;
pub mod datahub_tuple;
mod datastream;
pub mod datastream_avro;
pub mod datastream_json;
pub mod debezium_json;
pub mod tdsql_json;
pub mod tencent_dts;

/// The format names, as `decode` accepts them.
pub const FORMATS: &[&str] = &[
    "tencent-dts",
    "datahub-blob",
    "tdsql-json",
    "datahub-tuple",
    "debezium-json",
    "datastream-json",
    "datastream-avro",
];

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

    /// The raw bytes of a one-record batch's error row, as [`FormatDecoder::decode_records`]
    /// renders them: what the panic boundary keeps of a record that panicked.
    fn raw_record(&self, _record: &RecordBatch) -> Vec<u8> {
        Vec::new()
    }

    /// Decodes one non-null message that came with an old key: the JSON of Debezium's
    /// `__debezium.oldkey` Kafka header, which marks the insert half of a key change.
    /// Formats without key-change headers decode it as any message.
    fn decode_with_old_key(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
        _old_key: &[u8],
    ) -> Result<()> {
        self.decode(sink, ordinal, value, key)
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
    /// Typed mode (`docs/typed.md`): `before`/`after` as structs of one schema's columns,
    /// or of each table's. Every format takes it.
    pub typed: Option<std::sync::Arc<crate::typed::TypedSpec>>,
    /// The resource limits, every format.
    pub limits: Limits,
    /// `debezium-json`: the connector's `unavailable.value.placeholder`; `None` for
    /// Debezium's default, an empty text for none (docs/formats/debezium-json.md).
    pub unavailable_value: Option<String>,
    /// The schema pass (`crate::schemas`): a row per table and wire schema instead of the
    /// events. Every format takes it.
    pub schemas: bool,
}

/// The decoder for a format name, with the name as a `'static` string.
pub fn new_decoder(
    format: &str,
    options: &Options,
) -> Result<(&'static str, Box<dyn FormatDecoder>)> {
    if options.columns.is_some() && format != "tdsql-json" {
        return Err(Error::Option {
            option: "columns",
            applies: "tdsql-json",
            format: format.to_string(),
        });
    }
    if options.unavailable_value.is_some() && format != debezium_json::FORMAT {
        return Err(Error::Option {
            option: "unavailable_value",
            applies: debezium_json::FORMAT,
            format: format.to_string(),
        });
    }
    let limits = &options.limits;
    match format {
        "tencent-dts" => Ok((
            "tencent-dts",
            Box::new(tencent_dts::TencentDts::new(limits)),
        )),
        "datahub-blob" => Ok((
            datahub_blob::FORMAT,
            Box::new(datahub_blob::DatahubBlob::new(limits, options.schemas)),
        )),
        "debezium-json" => Ok((
            debezium_json::FORMAT,
            Box::new(debezium_json::DebeziumJson::with_placeholder(
                limits,
                options.schemas,
                options
                    .unavailable_value
                    .as_deref()
                    .unwrap_or(debezium_json::UNAVAILABLE_VALUE),
            )),
        )),
        "datastream-json" => Ok((
            datastream_json::FORMAT,
            Box::new(datastream_json::DatastreamJson::new(limits)),
        )),
        "datastream-avro" => Ok((
            datastream_avro::FORMAT,
            Box::new(datastream_avro::DatastreamAvro::new(limits)),
        )),
        "tdsql-json" => Ok((
            tdsql_json::FORMAT,
            Box::new(tdsql_json::TdsqlJson::new(options.columns.clone(), limits)?),
        )),
        "datahub-tuple" => Ok((
            "datahub-tuple",
            Box::new(datahub_tuple::DatahubTuple::default()),
        )),
        other => Err(Error::UnknownFormat(other.to_string(), FORMATS.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryArray};

    use crate::decoder::{Decoder, Mode};

    /// Realistic messages of the JSON formats, mutated 5,000 times each (truncations, bit
    /// flips, overwritten bytes, spliced junk and brackets): every mutation gives exactly one
    /// row, its event or its error row, and no panic.
    #[test]
    fn mutated_json_messages_give_one_row_each() {
        let messages: [(&str, &[u8]); 3] = [
            (
                "datahub-blob",
                br#"{"schema":{"dataColumn":[{"name":"id","type":"LONG"},{"name":"v","type":"DOUBLE"}],"primaryKey":["id"],"source":{"dbType":"MySQL","dbName":"shop","tableName":"t"}},"payload":{"op":"UPDATE_AFTER","before":{"dataColumn":{"id":1,"v":"1.100000"}},"after":{"dataColumn":{"id":1,"v":2.5,"j":{"a":[1,"\u00e9\ud83d\ude80"]}}},"sequenceId":"1731663842292000001","timestamp":{"eventTime":1731662097000,"systemTime":1731663848979,"checkpointTime":-1},"ddl":null},"version":"0.0.1"}"#,
            ),
            (
                "tdsql-json",
                br#"{"logtype":"mysqlbinlog","eventtype":31,"eventtypestr":"update","db":"d","table":"t","localport":8810,"begintime":1511419963,"gtid":"0-2670193178-726233561","event_index":"4","sub_event_index":1,"where":["1","'it\\'s'","'##isnull##'"],"field":["1","'a''b'","-5 (18446744073709551611)"],"filename":"binlog.000001","orgoffset":120}"#,
            ),
            (
                "tdsql-json",
                br#"{"eventtypestr":"query","db":"d","sql":"ALTER TABLE t ADD c int","gtid":"u:1","event_index":2}"#,
            ),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (format, base) in messages {
            let mut decoder = Decoder::new(format, Mode::Permissive).unwrap();
            for _ in 0..5_000 {
                let mut bytes = base.to_vec();
                for _ in 0..1 + next() % 3 {
                    let at = (next() as usize) % (bytes.len() + 1);
                    match next() % 5 {
                        0 => bytes.truncate(at),
                        1 if at < bytes.len() => bytes[at] ^= 1 << (next() % 8),
                        2 if at < bytes.len() => bytes[at] = next() as u8,
                        3 => {
                            let junk = [b"[", b"{", b"\"", b"\\", b",", b":"][next() as usize % 6];
                            bytes.splice(at..at, junk.iter().copied());
                        }
                        _ => {
                            let junk: Vec<u8> = (0..1 + next() % 6).map(|_| next() as u8).collect();
                            bytes.splice(at..at, junk);
                        }
                    }
                }
                let values: ArrayRef = Arc::new(BinaryArray::from(vec![Some(&bytes[..])]));
                let out = decoder.decode(&values, None, false).unwrap();
                assert_eq!(out.batch.num_rows(), 1, "{format}: {bytes:?}");
            }
            let stats = decoder.stats();
            assert_eq!(stats.messages, 5_000);
            assert!(
                stats.errors > 1_000 && stats.errors < 5_000,
                "{format}: {stats:?}"
            );
        }
    }
}
