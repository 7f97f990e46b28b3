//! In-memory filesystem with crash clones (being written).
