"""A pytest plugin for the pyspark 3.5 run (`make test-spark35`): what the tests use of
pyspark 4's API and 3.5 lacks, built from 3.5's own parts. cdc_decode itself uses none
of it; only the tests collect results with ``DataFrame.toArrow`` (pyspark 4.0+), which is
3.5's ``_collect_as_arrow`` put into one table.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame


def _to_arrow(self: DataFrame) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = self._collect_as_arrow()
    if batches:
        return pa.Table.from_batches(batches)
    return to_arrow_schema(self.schema).empty_table()


if not hasattr(DataFrame, "toArrow"):
    DataFrame.toArrow = _to_arrow
