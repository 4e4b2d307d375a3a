//! What the two Datastream formats (`datastream-json`, `datastream-avro`) share: an event's
//! `op` from its `read_method` and `change_type`, and its `position` and `sequence` from
//! the log fields of `source_metadata` (docs/formats/datastream-json.md).

use crate::columns::BytesColumn;
use crate::sequence::OrderKey;

/// The source database kind, the first word of `read_method`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Mysql,
    Oracle,
    Postgres,
    SqlServer,
    /// Any other: ordered by `sort_keys` when they are integers.
    #[default]
    Other,
}

/// The fields of one Datastream event that place it in its source's log; its kind and
/// backfill flag are read from `read_method` once ([`LogPlace::new`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LogPlace<'a> {
    pub source: Source,
    /// True for an event read by a backfill rather than from the log.
    pub backfill: bool,
    /// `source_timestamp`, in microseconds.
    pub event_time: Option<i64>,
    pub log_file: Option<&'a str>,
    pub log_position: Option<u64>,
    pub scn: Option<u64>,
    pub rs_id: Option<&'a str>,
    pub ssn: Option<u64>,
    pub lsn: Option<&'a str>,
    /// `sort_keys`, when it is a non-empty array of non-negative integers only.
    pub sort_numbers: Option<&'a [u64]>,
}

impl LogPlace<'_> {
    /// The place of an event read by `method` (`read_method`: `mysql-cdc-binlog`,
    /// `oracle-backfill`, ...; `""` when absent), its log fields not yet set.
    #[inline]
    pub fn new(method: &str) -> Self {
        let source = match method.split('-').next().unwrap_or("") {
            "mysql" => Source::Mysql,
            "oracle" => Source::Oracle,
            "postgres" | "postgresql" => Source::Postgres,
            "sqlserver" => Source::SqlServer,
            _ => Source::Other,
        };
        Self {
            source,
            backfill: method.contains("backfill") || method == "oracle_dump",
            ..Self::default()
        }
    }

    /// The event's `op`: `read` for a backfill, else its `change_type`'s.
    #[inline]
    pub fn op(&self, change: Option<&str>) -> &'static str {
        if self.backfill {
            return "read";
        }
        match change {
            Some("INSERT") => "insert",
            Some("UPDATE") => "update",
            Some("UPDATE-INSERT") => "update_after",
            Some("UPDATE-DELETE") => "update_before",
            Some("DELETE") => "delete",
            _ => "other",
        }
    }

    /// True when `sort_keys` may order the event: its source is none of those whose log
    /// fields do.
    pub fn takes_sort_keys(&self) -> bool {
        self.source == Source::Other
    }

    /// Appends the event's `position`: `file:offset` (MySQL), the SCN (Oracle), the LSN
    /// (PostgreSQL, SQL Server), else null.
    #[inline]
    pub fn write_position(&self, column: &mut BytesColumn) {
        match self.source {
            Source::Mysql if self.log_file.is_some() || self.log_position.is_some() => {
                let (file, position) = (self.log_file.unwrap_or(""), self.log_position);
                column.push_with(|out| {
                    out.extend_from_slice(file.as_bytes());
                    out.push(b':');
                    let position = position.unwrap_or(0);
                    out.extend_from_slice(itoa::Buffer::new().format(position).as_bytes());
                });
            }
            Source::Oracle => match self.scn {
                Some(scn) => column.push_str(itoa::Buffer::new().format(scn)),
                None => column.push_null(),
            },
            Source::Postgres | Source::SqlServer => match self.lsn {
                Some(lsn) => column.push_str(lsn),
                None => column.push_null(),
            },
            _ => column.push_null(),
        }
    }

    /// Appends the event's `sequence` ordering key (built in `key`), or a null when the
    /// event has no `source_timestamp` (and, for other sources, no numeric `sort_keys`).
    #[inline]
    pub fn write_sequence(&self, column: &mut BytesColumn, key: &mut Vec<u8>) {
        key.clear();
        let present = match (self.source, self.event_time) {
            (Source::Mysql, Some(ts)) => {
                OrderKey(key)
                    .u64(u64::from(!self.backfill))
                    .str(self.log_file.unwrap_or("").as_bytes())
                    .u64(self.log_position.unwrap_or(0))
                    .i64(ts);
                true
            }
            (Source::Oracle, Some(ts)) => {
                OrderKey(key)
                    .i64(ts)
                    .u64(self.scn.unwrap_or(0))
                    .str(self.rs_id.unwrap_or("").as_bytes())
                    .u64(self.ssn.unwrap_or(0));
                true
            }
            (Source::Postgres, Some(ts)) => {
                let (hi, lo) = self.lsn.and_then(lsn_halves).unwrap_or((0, 0));
                OrderKey(key).i64(ts).u64(hi).u64(lo);
                true
            }
            (Source::SqlServer, Some(ts)) => {
                OrderKey(key).i64(ts).str(self.lsn.unwrap_or("").as_bytes());
                true
            }
            (Source::Other, event_time) => {
                if let Some(numbers) = self.sort_numbers {
                    let mut order = OrderKey(key);
                    for &n in numbers {
                        order.u64(n);
                    }
                    true
                } else if let Some(ts) = event_time {
                    OrderKey(key).i64(ts);
                    true
                } else {
                    false
                }
            }
            (_, None) => false,
        };
        if present {
            column.push_bytes(key);
        } else {
            column.push_null();
        }
    }
}

/// PostgreSQL's `hi/lo` LSN as two integers.
pub(crate) fn lsn_halves(lsn: &str) -> Option<(u64, u64)> {
    let (hi, lo) = lsn.split_once('/')?;
    let hex = |s: &str| {
        (!s.is_empty() && s.len() <= 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some((hex(hi)?, hex(lo)?))
}
