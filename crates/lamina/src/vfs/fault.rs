//! Fault-injecting filesystem (being written).
