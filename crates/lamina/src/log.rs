//! The engine's log framing, for clients that keep a log of their own
//! (the `lamina-dataset` crate's dataset log): checksummed records
//! ([`append_record`], [`read_records`]; the layout is `docs/format.md`,
//! "Log records") and the varint encodings their payloads are written in.

pub use crate::coding::{get_bytes, get_varint, put_bytes, put_varint};
pub use crate::record::{append_record, read_records, LogEnd};
