//! Compile-fail and compile-pass tests of mesh-egress live in `tests/` and `ui/`.
