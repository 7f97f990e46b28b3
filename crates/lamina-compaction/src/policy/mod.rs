//! The policies: seed 004's [`Leveling`], bLSM and LSbM ([`blsm`]), the
//! one-stack policies of seeds 000 and 003 ([`stack`]) and the design-space
//! compositions of seeds 001 and 004 ([`design`]). Each reads a
//! [`TreeView`](crate::TreeView) and returns tasks; [`crate::spec`] builds
//! them from their names.

pub mod blsm;
pub mod design;
mod leveling;
pub mod stack;

pub use leveling::Leveling;
