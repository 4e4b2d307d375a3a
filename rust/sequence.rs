//! Ordering keys: tuples encoded so that comparing the bytes as unsigned gives tuple order
//! (`shared/spec/events.md`, "sequence"). Every format writes its `sequence` with these.

/// Appends the components of one key to a byte buffer.
pub struct OrderKey<'a>(pub &'a mut Vec<u8>);

impl OrderKey<'_> {
    /// An unsigned integer: 8 bytes big-endian.
    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A signed integer: 8 bytes big-endian with the sign bit flipped, so negatives sort
    /// before positives.
    pub fn i64(&mut self, value: i64) -> &mut Self {
        self.u64((value as u64) ^ (1 << 63))
    }

    /// A string: its bytes with 0x00 escaped as 0x00 0xFF, then the terminator 0x00 0x01, so
    /// a prefix sorts before its extensions and no string's key is a prefix of another's.
    pub fn str(&mut self, value: &[u8]) -> &mut Self {
        for &b in value {
            self.0.push(b);
            if b == 0 {
                self.0.push(0xFF);
            }
        }
        self.0.extend_from_slice(&[0x00, 0x01]);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::OrderKey;

    fn key(f: impl FnOnce(&mut OrderKey)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut OrderKey(&mut out));
        out
    }

    #[test]
    fn integers_sort_as_numbers() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let keys: Vec<_> = values
            .iter()
            .map(|v| {
                key(|k| {
                    k.i64(*v);
                })
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let unsigned = [0u64, 1, 255, 256, u64::MAX];
        let keys: Vec<_> = unsigned
            .iter()
            .map(|v| {
                key(|k| {
                    k.u64(*v);
                })
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn strings_sort_with_prefixes_first() {
        let values: [&[u8]; 5] = [b"", b"a", b"a\x00", b"a\x00b", b"ab"];
        let keys: Vec<_> = values
            .iter()
            .map(|v| {
                key(|k| {
                    k.str(v).u64(0);
                })
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }

    #[test]
    fn tuples_compare_component_by_component() {
        let a = key(|k| {
            k.str(b"mysql-bin.000001").u64(900);
        });
        let b = key(|k| {
            k.str(b"mysql-bin.000002").u64(4);
        });
        assert!(a < b);
    }
}
