//! The compile-fail catalogue: every misuse of the egress boundary is refused by the compiler
//! with a message a reader understands, and every near-identical correct program compiles.

#[test]
fn misuse_does_not_compile() {
    trybuild::TestCases::new().compile_fail("ui/fail/*.rs");
}

#[test]
fn correct_use_compiles_and_runs() {
    trybuild::TestCases::new().pass("ui/pass/*.rs");
}
