//! Values of the shared readers written into the event columns, the one way for every
//! format: JSON values ([`json`]: metadata entries, row images as text maps or typed
//! columns) and Avro values ([`avro`]: each value's text, records and arrays as compact
//! JSON). Scalars (floats, decimals, dates, times, charsets, base64, JSON strings) are
//! rendered by [`crate::text`] under them, which the binary formats (`tencent-dts`,
//! `datahub-tuple`) and typed mode use directly.
//!
//! Layering: the formats use this module; it uses the readers (`json`, `avro`), the event
//! columns and [`crate::text`], and none of them uses it.

pub mod avro;
pub mod json;

pub use json::{
    add_metadata, convert_image, convert_image_except, image_names, push_text, write_image,
    write_image_except, write_images, write_images_except, Unavailable,
};
