//! One module per input format; each implements [`FormatDecoder`].

use bytes::Bytes;

use crate::decoder::Sink;
use crate::error::{Error, Result};

pub mod tencent_dts;

/// The format names, as `decode` accepts them.
pub const FORMATS: &[&str] = &["tencent-dts"];

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

    /// End of input: report whatever is still held.
    fn finish(&mut self, _sink: &mut Sink) -> Result<()> {
        Ok(())
    }

    /// Parts of multi-part messages held now.
    fn pending(&self) -> u64 {
        0
    }
}

/// The decoder for a format name, with the name as a `'static` string.
pub fn new_decoder(format: &str) -> Result<(&'static str, Box<dyn FormatDecoder>)> {
    match format {
        "tencent-dts" => Ok(("tencent-dts", Box::new(tencent_dts::TencentDts::default()))),
        other => Err(Error::UnknownFormat(other.to_string(), FORMATS.join(", "))),
    }
}
