//! placeholder crate root, replaced by its owner
