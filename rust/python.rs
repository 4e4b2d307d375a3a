//! The Python module `cdc_decode._native`: the only file that touches PyO3. It converts
//! Arrow arrays through the C data interface (zero-copy), releases the GIL while decoding,
//! and maps errors to the exceptions of `cdc_decode._errors`. No decoding logic lives here.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{make_array, Array, Int64Array, RecordBatch, StringArray};
use arrow_data::ArrayData;
use arrow_pyarrow::{FromPyArrow, ToPyArrow};
use arrow_schema::Schema;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::decoder::{Decoder, Mode, Output};
use crate::error::Error;
use crate::events::event_schema;
use crate::formats::{Options, FORMATS};
use crate::limits::Limits;
use crate::typed::TypedSpec;

pyo3::import_exception!(cdc_decode._errors, DecodeError);

/// Configuration errors raise `ValueError`, input of the wrong type `TypeError`, and
/// everything else (a message that does not decode, in failfast) `DecodeError`.
impl From<Error> for PyErr {
    fn from(error: Error) -> Self {
        match error {
            Error::UnknownFormat(..)
            | Error::UnknownMode(_)
            | Error::Keys { .. }
            | Error::Option { .. }
            | Error::UnknownLimit(_)
            | Error::Columns(_)
            | Error::Schema(_) => PyValueError::new_err(error.to_string()),
            Error::InputType(_) | Error::InputKind { .. } | Error::ColumnType { .. } => {
                PyTypeError::new_err(error.to_string())
            }
            other => DecodeError::new_err(other.to_string()),
        }
    }
}

/// A stateful decoder for one stream; `cdc_decode.Decoder` wraps it.
#[pyclass(module = "cdc_decode._native")]
struct NativeDecoder {
    inner: Decoder,
}

fn output<'py>(py: Python<'py>, out: Output) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let batch = out.batch.to_pyarrow(py)?;
    let ordinals = Int64Array::from(out.ordinals).into_data().to_pyarrow(py)?;
    Ok((batch, ordinals))
}

#[pymethods]
impl NativeDecoder {
    /// `schema`: a pyarrow schema (typed mode); `tables`: a list of (name, pyarrow schema)
    /// pairs (multi-table typed mode).
    /// `schemas`: the schema pass (a row per table and wire schema, not the events);
    /// `source_time_zone`: typed mode's source time zone (an IANA name);
    /// `unavailable_value`: debezium-json's placeholder (`None`: Debezium's default, `""`:
    /// none).
    #[new]
    #[pyo3(signature = (
        format, mode, columns=None, schema=None, tables=None, limits=None, schemas=false,
        source_time_zone=None, unavailable_value=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        format: &str,
        mode: &str,
        columns: Option<HashMap<String, Vec<String>>>,
        schema: Option<&Bound<'_, PyAny>>,
        tables: Option<Vec<(String, Bound<'_, PyAny>)>>,
        limits: Option<HashMap<String, usize>>,
        schemas: bool,
        source_time_zone: Option<&str>,
        unavailable_value: Option<String>,
    ) -> PyResult<Self> {
        let mode = Mode::from_name(mode)?;
        let typed = match (schema, tables) {
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err("give schema or tables, not both"));
            }
            (Some(schema), None) => {
                let schema = Arc::new(Schema::from_pyarrow_bound(schema)?);
                Some(TypedSpec::single(&schema)?)
            }
            (None, Some(tables)) => {
                let mut specs = Vec::with_capacity(tables.len());
                for (name, schema) in tables {
                    specs.push((name, Arc::new(Schema::from_pyarrow_bound(&schema)?)));
                }
                Some(TypedSpec::tables(specs)?)
            }
            (None, None) => None,
        };
        let typed = match (typed, source_time_zone) {
            (Some(spec), Some(zone)) => Some(Arc::new(spec.with_time_zone(zone)?)),
            (None, Some(_)) => {
                return Err(PyValueError::new_err(
                    "source_time_zone applies to typed mode: give schema= or tables= too",
                ))
            }
            (spec, None) => spec.map(Arc::new),
        };
        let limits = limits.unwrap_or_default();
        let limits = Limits::with(limits.iter().map(|(k, v)| (k.as_str(), *v)))?;
        let options = Options {
            columns,
            typed,
            limits,
            unavailable_value,
            schemas,
        };
        Ok(Self {
            inner: Decoder::with_options(format, mode, &options)?,
        })
    }

    /// Decodes a pyarrow array of messages; returns (RecordBatch, int64 ordinals).
    /// `old_keys`: a binary or string array, each message's `__debezium.oldkey` header or
    /// null.
    #[pyo3(signature = (values, keys=None, last=false, old_keys=None))]
    fn decode<'py>(
        &mut self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        keys: Option<&Bound<'py, PyAny>>,
        last: bool,
        old_keys: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let values = make_array(ArrayData::from_pyarrow_bound(values)?);
        let keys = match keys.filter(|k| !k.is_none()) {
            None => None,
            Some(keys) => {
                let data = ArrayData::from_pyarrow_bound(keys)?;
                let array = make_array(data);
                match array.as_any().downcast_ref::<StringArray>() {
                    Some(strings) => Some(strings.clone()),
                    None => {
                        return Err(Error::Keys {
                            values: values.len(),
                            keys: array.data_type().to_string(),
                        }
                        .into())
                    }
                }
            }
        };
        let old_keys = match old_keys.filter(|k| !k.is_none()) {
            None => None,
            Some(old) => Some(make_array(ArrayData::from_pyarrow_bound(old)?)),
        };
        let values = Arc::clone(&values);
        let inner = &mut self.inner;
        let out = py.detach(|| {
            inner.decode_with_old_keys(&values, keys.as_ref(), old_keys.as_ref(), last)
        })?;
        output(py, out)
    }

    /// Decodes a pyarrow RecordBatch of records (`datahub-tuple`), imported zero-copy
    /// through the Arrow C data interface; returns (RecordBatch, int64 ordinals), one
    /// ordinal per record.
    #[pyo3(signature = (batch, last=false))]
    fn decode_records<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
        last: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let records = RecordBatch::from_pyarrow_bound(batch)?;
        let inner = &mut self.inner;
        let out = py.detach(|| inner.decode_records(&records, last))?;
        output(py, out)
    }

    /// End of input: rows for incomplete multi-part sets; returns (RecordBatch, ordinals).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let inner = &mut self.inner;
        let out = py.detach(|| inner.finish())?;
        output(py, out)
    }

    /// messages, events, errors, dropped, pending.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let dict = PyDict::new(py);
        dict.set_item("messages", s.messages)?;
        dict.set_item("decoded", s.decoded)?;
        dict.set_item("events", s.events)?;
        dict.set_item("errors", s.errors)?;
        dict.set_item("dropped", s.dropped)?;
        dict.set_item("pending", s.pending)?;
        Ok(dict)
    }
}

/// The Spark type of a source type in a dialect (`crate::schemas::mapping`), `None` for one
/// the mapping does not know; a `ValueError` for an unknown dialect.
#[pyfunction]
fn spark_type(dialect: &str, source_type: &str) -> PyResult<Option<String>> {
    use crate::schemas::Dialect;
    let dialect = match dialect {
        "mysql" => Dialect::Mysql,
        "postgresql" => Dialect::Postgresql,
        "oracle" => Dialect::Oracle,
        "sqlserver" => Dialect::Sqlserver,
        "connect" => Dialect::Connect,
        "avro" => Dialect::Avro,
        "datahub" => Dialect::Datahub,
        "arrow" => Dialect::Arrow,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown dialect {other:?}: expected mysql, postgresql, oracle, sqlserver, \
                 connect, avro, datahub or arrow"
            )))
        }
    };
    Ok(crate::schemas::spark_type(dialect, source_type))
}

/// Reads local files whole, in order, until `max_bytes` are read (always at least one
/// file): (a pyarrow `large_binary` array of their bytes, how many files it holds). Each
/// file is read straight into the array's value buffer, without the GIL; a file that
/// cannot be read raises `OSError` naming it. `read_datastream` reads Avro trees with it:
/// it spends about half of what Python's `open().read()` and `pa.array` of the bytes do
/// on thousands of small files.
#[pyfunction]
fn read_local_files(
    py: Python<'_>,
    paths: Vec<String>,
    max_bytes: usize,
) -> PyResult<(Bound<'_, PyAny>, usize)> {
    use std::io::Read;
    let read = py.detach(|| -> Result<(Vec<i64>, Vec<u8>), (usize, std::io::Error)> {
        let mut offsets = Vec::with_capacity(paths.len() + 1);
        offsets.push(0i64);
        let mut values = Vec::new();
        for (index, path) in paths.iter().enumerate() {
            if index > 0 && values.len() >= max_bytes {
                break;
            }
            std::fs::File::open(path)
                .and_then(|mut file| file.read_to_end(&mut values))
                .map_err(|e| (index, e))?;
            offsets.push(values.len() as i64);
        }
        Ok((offsets, values))
    });
    let (offsets, values) = read.map_err(|(index, error)| {
        PyErr::from(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", paths[index]),
        ))
    })?;
    let files = offsets.len() - 1;
    let array = arrow_array::LargeBinaryArray::new(
        arrow_buffer::OffsetBuffer::new(offsets.into()),
        values.into(),
        None,
    );
    Ok((array.into_data().to_pyarrow(py)?, files))
}

/// The change-event schema, as the Rust core builds it.
#[pyfunction]
fn event_schema_native(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    event_schema().as_ref().to_pyarrow(py)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDecoder>()?;
    m.add_function(wrap_pyfunction!(event_schema_native, m)?)?;
    m.add_function(wrap_pyfunction!(spark_type, m)?)?;
    m.add_function(wrap_pyfunction!(read_local_files, m)?)?;
    m.add("FORMATS", FORMATS.to_vec())?;
    Ok(())
}
