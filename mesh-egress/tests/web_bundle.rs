//! The `web` example's committed bundle is built from the committed sources: its first line
//! records a SHA-256 over `build.mjs`, `package.json`, `package-lock.json` and `src/` (each as
//! `path NUL contents NUL`, in path order, exactly as `build.mjs` hashes them), and this test
//! recomputes it without Node. A changed source or lockfile without a rebuilt bundle fails
//! here; `web_node.rs` also rebuilds it with esbuild and compares the bytes when Node is there.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn page() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/web/page")
}

/// The sources `build.mjs` hashes, relative to the page folder, sorted.
fn sources(page: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(page.join("src"))
        .expect("src/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| !name.starts_with('.'))
        .map(|name| format!("src/{name}"))
        .collect();
    files.extend(["build.mjs", "package.json", "package-lock.json"].map(str::to_owned));
    files.sort();
    files
}

fn digest(page: &Path) -> String {
    let mut hash = Sha256::new();
    for path in sources(page) {
        hash.update(path.as_bytes());
        hash.update([0]);
        hash.update(std::fs::read(page.join(&path)).expect("a source"));
        hash.update([0]);
    }
    hash.finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[test]
fn the_committed_bundle_is_built_from_the_committed_sources() {
    let page = page();
    let bundle = std::fs::read_to_string(page.join("dist/app.js")).expect("dist/app.js");
    let first = bundle.lines().next().unwrap_or_default();
    let recorded = first
        .split("sources-sha256: ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("the bundle's first line records its sources' hash");
    assert_eq!(
        recorded,
        digest(&page),
        "dist/app.js is stale: run `npm ci && node build.mjs` in {}",
        page.display()
    );
    let notices =
        std::fs::read_to_string(page.join("dist/THIRD_PARTY_NOTICES.txt")).expect("notices");
    for package in [
        "react 19.2.9",
        "@ai-sdk/react 3.0.328",
        "ai 6.0.325",
        "react-markdown 10.1.0",
    ] {
        assert!(notices.contains(package), "the notices name {package}");
    }
}

#[test]
fn the_lockfile_pins_the_versions_the_page_is_tested_with() {
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(page().join("package-lock.json")).expect("lockfile"),
    )
    .expect("JSON");
    let version = |name: &str| {
        lock["packages"][format!("node_modules/{name}")]["version"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} is locked"))
            .to_owned()
    };
    assert!(version("ai").starts_with("6.0."));
    assert!(version("@ai-sdk/react").starts_with("3.0."));
    assert!(version("react").starts_with("19."));
    assert!(version("react-dom").starts_with("19."));
    assert!(version("puppeteer-core").starts_with("24."));
    assert!(!version("esbuild").is_empty());
}
