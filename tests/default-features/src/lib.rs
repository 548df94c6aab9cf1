//! Nothing here: the tests in `tests/` use mesh-egress as a user who adds it with its default
//! features does.
