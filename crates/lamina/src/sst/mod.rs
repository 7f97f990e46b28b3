//! The SST format (being written).
