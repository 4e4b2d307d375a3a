//! The resource limits every decoder enforces, in one place (`docs/events.md`, "Limits").
//! A message over a limit gives one error row naming the limit, its value and how to change
//! it; the Python fallback enforces the same limits with the same defaults.

pub use crate::error::{grouped, OverLimit};

/// Limits on what one message may make a decoder read, nest, count and allocate. The
/// defaults are the values the decoders had before the limits could be changed, or, for
/// limits new with this struct, values far above any message a real source sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes one input value may have (every format of binary values).
    pub max_message_bytes: usize,
    /// Most levels of nested JSON objects and arrays (the top value is level 1): JSON
    /// messages, and the schema of an Avro file.
    pub max_json_depth: usize,
    /// Most levels of nested records and arrays in an Avro datum.
    pub max_avro_depth: usize,
    /// Most items of one collection: members of a JSON object or array (duplicates
    /// included), records of an Avro file (all blocks together), entries of a Tencent DTS
    /// `Entries`, rows and columns of one `DMLEvent`. (Items of Avro arrays and maps take a
    /// byte each at least: their bytes bound them.)
    pub max_items: usize,
    /// Most parts of one Tencent DTS multi-part set (`Envelope.total`).
    pub max_parts: usize,
    /// Most bytes of multi-part data one decoder buffers, all open sets together.
    pub max_pending_bytes: usize,
    /// An Avro file may inflate to this many times its size …
    pub max_inflate_ratio: usize,
    /// … or to this many bytes, if more.
    pub inflate_floor_bytes: usize,
    /// The keys and values (`before`, `after`, `metadata`) of the events of one Avro file,
    /// or of one Tencent DTS `Entries`, may take this many times its size …
    pub max_output_ratio: usize,
    /// … or this many bytes, if more.
    pub output_floor_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 256 << 20,
            max_json_depth: 128,
            max_avro_depth: 64,
            max_items: 10_000_000,
            max_parts: 100_000,
            max_pending_bytes: 1 << 30,
            max_inflate_ratio: 64,
            inflate_floor_bytes: 16 << 20,
            max_output_ratio: 256,
            output_floor_bytes: 64 << 20,
        }
    }
}

impl Limits {
    /// The defaults with some limits changed by name (the Python API passes its `Limits`
    /// dataclass so); a name that is not a field is an error naming the fields.
    pub fn with<'a>(
        pairs: impl IntoIterator<Item = (&'a str, usize)>,
    ) -> Result<Self, crate::error::Error> {
        let mut limits = Self::default();
        for (name, value) in pairs {
            let field = match name {
                "max_message_bytes" => &mut limits.max_message_bytes,
                "max_json_depth" => &mut limits.max_json_depth,
                "max_avro_depth" => &mut limits.max_avro_depth,
                "max_items" => &mut limits.max_items,
                "max_parts" => &mut limits.max_parts,
                "max_pending_bytes" => &mut limits.max_pending_bytes,
                "max_inflate_ratio" => &mut limits.max_inflate_ratio,
                "inflate_floor_bytes" => &mut limits.inflate_floor_bytes,
                "max_output_ratio" => &mut limits.max_output_ratio,
                "output_floor_bytes" => &mut limits.output_floor_bytes,
                other => return Err(crate::error::Error::UnknownLimit(other.to_string())),
            };
            *field = value;
        }
        Ok(limits)
    }

    /// The most bytes a file of `len` bytes may decompress to, all blocks together.
    pub fn inflate_limit(&self, len: usize) -> usize {
        self.inflate_floor_bytes
            .max(len.saturating_mul(self.max_inflate_ratio))
    }

    /// The most output bytes the events of a message of `len` bytes may take.
    pub fn output_limit(&self, len: usize) -> usize {
        self.output_floor_bytes
            .max(len.saturating_mul(self.max_output_ratio))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::show;

    #[test]
    fn limits_are_set_by_name() {
        let limits = Limits::with([("max_items", 5), ("max_parts", 7)]).unwrap();
        assert_eq!((limits.max_items, limits.max_parts), (5, 7));
        assert_eq!(limits.max_json_depth, 128);
        assert!(Limits::with([("max_bogus", 1)]).is_err());
    }

    #[test]
    fn errors_name_the_limit_its_value_and_how_to_change_it() {
        let error = OverLimit::new("message is 80,000,000 bytes", "max_message_bytes", 64 << 20);
        assert_eq!(
            error.to_string(),
            "message is 80,000,000 bytes, over max_message_bytes = 64 MiB \
             (Decoder(limits=cdc_decode.Limits(...)))"
        );
        let error = OverLimit::new("an array of 1,001 items", "max_items", 1000);
        assert!(error
            .to_string()
            .starts_with("an array of 1,001 items, over max_items = 1,000 "));
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(show(1500, "max_pending_bytes"), "1,500");
    }
}
