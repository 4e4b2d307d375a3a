"""A pytest plugin for the pyspark 3.5 run (`make test-spark35`): the two pieces of pyspark
4's API that the tests use and 3.5 lacks, built from 3.5's own parts: the tests collect
results with ``DataFrame.toArrow`` (the library's own stand-in,
``cdc_decode.spark._compat.collect_arrow``) and make frames with
``createDataFrame(pyarrow.Table)`` (both pyspark 4.0+).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from cdc_decode.spark._compat import collect_arrow


def _plain(value, arrow_type):
    """A value of ``to_pylist`` as pyspark 3.5's row check takes it: a map as a dict (not
    a list of pairs), nested values alike."""
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: _plain(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_struct(arrow_type):
        return {f.name: _plain(value[f.name], f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_plain(v, arrow_type.value_type) for v in value]
    return value


_create_data_frame = SparkSession.createDataFrame


def _create(self: SparkSession, data, schema=None, *args, **kwargs) -> DataFrame:
    """pyspark 4's ``createDataFrame(pyarrow.Table)``: the rows, with the table's schema."""
    if isinstance(data, pa.Table):
        from pyspark.sql.pandas.types import from_arrow_schema

        if schema is None:
            schema = from_arrow_schema(data.schema)
        fields = data.schema
        data = [
            tuple(_plain(v, f.type) for v, f in zip(row.values(), fields, strict=True))
            for row in data.to_pylist()
        ]
    return _create_data_frame(self, data, schema, *args, **kwargs)


if not hasattr(DataFrame, "toArrow"):
    DataFrame.toArrow = collect_arrow
    SparkSession.createDataFrame = _create
