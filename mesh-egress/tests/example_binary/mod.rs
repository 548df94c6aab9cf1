//! Where `cargo test` put an example's binary, for the black-box tests that run it.

use std::path::PathBuf;

/// `target/<profile>/examples/<name>`, found from this test's own executable
/// (`target/<profile>/deps/<test>-<hash>`). Fails with a plain message when it is missing.
pub(crate) fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: run through `cargo test`, which builds the examples",
        binary.display()
    );
    binary
}
