//! The input side: one Arrow array of messages, read as bytes whatever its string type.

use std::ops::Range;

use arrow_array::types::ByteArrayType;
use arrow_array::{
    Array, ArrayRef, BinaryArray, GenericByteArray, LargeBinaryArray, LargeStringArray,
    OffsetSizeTrait, StringArray,
};
use bytes::Bytes;

use crate::error::{Error, Result};

/// An input column: `binary`, `large_binary`, `utf8` or `large_utf8`, borrowed.
pub enum Values<'a> {
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
}

impl<'a> Values<'a> {
    /// Reads `array` as messages, or says which type it has instead.
    pub fn new(array: &'a ArrayRef) -> Result<Self> {
        let any = array.as_any();
        if let Some(a) = any.downcast_ref::<BinaryArray>() {
            Ok(Self::Binary(a))
        } else if let Some(a) = any.downcast_ref::<LargeBinaryArray>() {
            Ok(Self::LargeBinary(a))
        } else if let Some(a) = any.downcast_ref::<StringArray>() {
            Ok(Self::Utf8(a))
        } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
            Ok(Self::LargeUtf8(a))
        } else {
            Err(Error::InputType(array.data_type().to_string()))
        }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        match self {
            Self::Binary(a) => a.len(),
            Self::LargeBinary(a) => a.len(),
            Self::Utf8(a) => a.len(),
            Self::LargeUtf8(a) => a.len(),
        }
    }

    /// True when there are no messages.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Values<'_> {
    /// The whole data buffer as `Bytes`, without copying: each message is a slice of it, so
    /// ProtoBuf `bytes` fields decode as slices of the input (no copies).
    pub fn owner(&self) -> Bytes {
        match self {
            Self::Binary(a) => Bytes::from_owner(a.values().clone()),
            Self::LargeBinary(a) => Bytes::from_owner(a.values().clone()),
            Self::Utf8(a) => Bytes::from_owner(a.values().clone()),
            Self::LargeUtf8(a) => Bytes::from_owner(a.values().clone()),
        }
    }

    /// Bytes of message data this array spans (a slice of a larger array spans less than
    /// its buffer).
    pub fn data_len(&self) -> usize {
        fn span<O: OffsetSizeTrait + arrow_buffer::ArrowNativeType>(
            a: &GenericByteArray<impl ByteArrayType<Offset = O>>,
        ) -> usize {
            let offsets = a.value_offsets();
            offsets[offsets.len() - 1].as_usize() - offsets[0].as_usize()
        }
        match self {
            Self::Binary(a) => span(*a),
            Self::LargeBinary(a) => span(*a),
            Self::Utf8(a) => span(*a),
            Self::LargeUtf8(a) => span(*a),
        }
    }

    /// Where message `i` lies in [`Values::owner`], or `None` for a null.
    pub fn range(&self, i: usize) -> Option<Range<usize>> {
        fn span<O: OffsetSizeTrait + arrow_buffer::ArrowNativeType>(
            a: &GenericByteArray<impl ByteArrayType<Offset = O>>,
            i: usize,
        ) -> Option<Range<usize>> {
            let offsets = a.value_offsets();
            a.is_valid(i)
                .then(|| offsets[i].as_usize()..offsets[i + 1].as_usize())
        }
        match self {
            Self::Binary(a) => span(*a, i),
            Self::LargeBinary(a) => span(*a, i),
            Self::Utf8(a) => span(*a, i),
            Self::LargeUtf8(a) => span(*a, i),
        }
    }
}
