//! cdc-decode: cloud change-data-capture messages in, Arrow change events out.
//!
//! Every format decodes into one schema ([`events::event_schema`], `docs/events.md`):
//! - [`decoder`]: the shared loop, modes and accounting ([`decoder::Decoder`]);
//! - [`formats`]: one module per input format;
//! - [`events`]: the Arrow builder for the event columns;
//! - [`text`]: value rendering (charsets, base64); [`sequence`]: ordering keys;
//! - [`error`]: the one error type; [`input`]: reading the input array;
//! - [`proto`]: the Tencent DTS wire types (prost);
//! - `python` (feature `python`): the PyO3 module `cdc_decode._native`.

pub mod decoder;
pub mod error;
pub mod events;
pub mod formats;
pub mod input;
pub mod proto;
#[cfg(feature = "python")]
mod python;
pub mod sequence;
pub mod text;
