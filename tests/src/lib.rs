//! End-to-end tests of mesh-egress live in `tests/`; this crate has no code of its own.
