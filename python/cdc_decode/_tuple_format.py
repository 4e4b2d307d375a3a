"""The ``datahub-tuple`` format's names and fixed texts (docs/formats/datahub-tuple.md): one
definition for the Python engine (``fallback/datahub_tuple.py``) and the Spark plan of
Spark expressions (``_tuple_sql.py``), which must agree on every name and message."""

from __future__ import annotations

FORMAT = "datahub-tuple"

SEQUENCE_ID = "_sequence_id_"
LOG_FILE_NAME_OFFSET = "_log_file_name_offset_"
OPERATION_TYPE = "_operation_type_"
EXECUTE_TIME = "_execute_time_"
EXCUTE_TIME = "_excute_time_"
BEFORE_IMAGE = "_before_image_"
AFTER_IMAGE = "_after_image_"
SOURCE_TABLE = "_source_table_"

SEQUENCE_COLUMNS = (SEQUENCE_ID, LOG_FILE_NAME_OFFSET)
"""The order key's column: the first of these a record has."""
TIME_COLUMNS = (EXECUTE_TIME, EXCUTE_TIME)
"""The event time's column (the second spelling is DataWorks' own)."""
STRING_COLUMNS = (OPERATION_TYPE, BEFORE_IMAGE, AFTER_IMAGE, SOURCE_TABLE)
"""The meta columns that hold text."""
META_COLUMNS = frozenset(SEQUENCE_COLUMNS + TIME_COLUMNS + STRING_COLUMNS)
"""The meta column names; every other column is a data column."""

MAX_MS = (2**63 - 1) // 1000
"""The largest |milliseconds| whose microseconds fit an i64."""

HEADS = {
    ("I", "N", "Y"): ("insert", 1, "after"),
    ("D", "Y", "N"): ("delete", 1, "before"),
    ("U", "Y", "N"): ("update_before", 0, "before"),
    ("U", "N", "Y"): ("update_after", 1, "after"),
}
"""(I/U/D, before flag, after flag) -> (op, order-key half, image side): the combinations
the format allows."""

EXPECTED_FLAGS = {
    "I": "expected N/Y (an insert is an after image)",
    "D": "expected Y/N (a delete is a before image)",
    "U": "expected Y/N (before image) or N/Y (after image)",
}
"""The error text of image flags that do not fit the operation, per operation."""
