//! pinctl-config: replaced by its owner
#![forbid(unsafe_code)]
pub mod model;
pub use model::*;
