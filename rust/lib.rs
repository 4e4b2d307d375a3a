//! cdc-decode: cloud change-data-capture messages in, Arrow change events out.
pub mod proto;
