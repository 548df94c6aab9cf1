//! The ratchet on what a user of the runtime crate sees: every public item reachable from
//! `mesh_egress`'s root with every feature on — modules, types, traits, functions, constants,
//! **and** the public fields, enum variants, inherent methods and trait items of each —
//! `#[doc(hidden)]` items included.
//!
//! The list is the compiler's, not ours: rustdoc's JSON output (`--output-format json`, behind
//! `-Z unstable-options`, read here with `RUSTC_BOOTSTRAP=1` on the stable toolchain; its
//! `format_version` is checked), walked from the root module through `pub use` re-exports and
//! globs. An item is counted once however many paths reach it, under the shortest path found
//! (the first, breadth first).
//!
//! `tests/data/public_items.txt` is the list as it stands; the test fails when the crate's list
//! differs from it in either direction, so adding a public item, field or method is a decision
//! written into this file, and removing one lowers the bar for good. To write the file after
//! such a decision: `MESH_PUBLIC_ITEMS=write cargo test -p mesh-egress-tests --test public_items`
//! (`MESH_PUBLIC_ITEMS=print` prints it; `MESH_PUBLIC_ITEMS_JSON=<file>` reads another build's
//! JSON instead of running rustdoc).
//! `tests/data/public_items_before.txt` is the list before the one-path issue (b780108, 1,851
//! items); the goal it set is two thirds of that, printed with the counts (`-- --nocapture`).

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The rustdoc JSON format this walk reads (the toolchain is pinned at 1.95).
const FORMAT_VERSION: u64 = 57;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Runs rustdoc on the runtime crate and reads its JSON.
fn rustdoc_json() -> Value {
    let root = workspace();
    // A target directory of its own: the outer `cargo test` may hold the workspace's.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("public-items");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTDOCFLAGS")
        .args([
            "rustdoc",
            "--quiet",
            "-p",
            "mesh-egress",
            "--all-features",
            "--lib",
            "--",
            "-Z",
            "unstable-options",
            "--output-format",
            "json",
            "--document-hidden-items",
        ])
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "rustdoc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = target.join("doc").join("mesh_egress.json");
    let text = std::fs::read_to_string(&path).expect("rustdoc's JSON");
    serde_json::from_str(&text).expect("rustdoc's JSON parses")
}

/// The one key of an externally tagged enum value (`{"struct": {...}}` → `"struct"`).
fn tag(value: &Value) -> Option<(&str, &Value)> {
    value
        .as_object()?
        .iter()
        .next()
        .map(|(k, v)| (k.as_str(), v))
}

fn ids(value: &Value) -> impl Iterator<Item = String> + '_ {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|id| id.as_u64().map(|n| n.to_string()))
}

/// Every item reachable from the root, as `kind path` lines.
fn public_items(doc: &Value) -> BTreeSet<String> {
    assert_eq!(
        doc["format_version"].as_u64(),
        Some(FORMAT_VERSION),
        "rustdoc's JSON format changed: check this walk against it"
    );
    let index = doc["index"].as_object().expect("an index");
    let item = |id: &str| index.get(id);
    let public = |id: &str| item(id).is_some_and(|it| it["visibility"] == "public");
    let name = |id: &str| {
        item(id)
            .and_then(|it| it["name"].as_str())
            .unwrap_or("_")
            .to_owned()
    };
    let root = doc["root"].as_u64().expect("a root").to_string();
    let mut seen = HashSet::new();
    let mut found = BTreeSet::new();
    // A worklist, not recursion, breadth first so an item is named at its shortest path:
    // (item id, the path it was reached at).
    let mut work = VecDeque::from([(root, "mesh_egress".to_owned())]);
    while let Some((id, path)) = work.pop_front() {
        let Some(it) = item(&id) else {
            // Another crate's item re-exported here (the attribute macro).
            found.insert(format!("external {path}"));
            continue;
        };
        if !seen.insert(id.clone()) {
            continue;
        }
        let Some((kind, inner)) = tag(&it["inner"]) else {
            continue;
        };
        found.insert(format!("{kind} {path}"));
        let mut push = |child: String, child_path: String| work.push_back((child, child_path));
        match kind {
            "module" => {
                for child in ids(&inner["items"]).filter(|c| public(c)) {
                    let Some(("use", import)) = item(&child).and_then(|c| tag(&c["inner"])) else {
                        push(child.clone(), format!("{path}::{}", name(&child)));
                        continue;
                    };
                    let target = import["id"].as_u64().map(|n| n.to_string());
                    let as_name = import["name"].as_str().unwrap_or("_");
                    match target {
                        None => {
                            found.insert(format!("external {path}::{as_name}"));
                        }
                        Some(target) if import["is_glob"] == true => {
                            let module = item(&target).and_then(|m| tag(&m["inner"]));
                            if let Some(("module", module)) = module {
                                for g in ids(&module["items"]).filter(|g| public(g)) {
                                    push(g.clone(), format!("{path}::{}", name(&g)));
                                }
                            }
                        }
                        Some(target) => push(target, format!("{path}::{as_name}")),
                    }
                }
            }
            "struct" | "enum" | "union" => {
                let fields = &inner["kind"];
                let named = ids(&fields["plain"]["fields"]);
                let tuple = ids(&fields["tuple"]);
                for field in named.chain(tuple).filter(|f| public(f)) {
                    push(field.clone(), format!("{path}::{}", name(&field)));
                }
                for variant in ids(&inner["variants"]) {
                    push(variant.clone(), format!("{path}::{}", name(&variant)));
                }
                for block in ids(&inner["impls"]) {
                    let Some(("impl", imp)) = item(&block).and_then(|b| tag(&b["inner"])) else {
                        continue;
                    };
                    let inherent = imp["trait"].is_null()
                        && imp["blanket_impl"].is_null()
                        && imp["is_synthetic"] != true;
                    if inherent {
                        for method in ids(&imp["items"]).filter(|m| public(m)) {
                            push(method.clone(), format!("{path}::{}", name(&method)));
                        }
                    }
                }
            }
            "variant" => {
                for field in ids(&inner["kind"]["struct"]["fields"]) {
                    push(field.clone(), format!("{path}::{}", name(&field)));
                }
            }
            "trait" => {
                for member in ids(&inner["items"]) {
                    push(member.clone(), format!("{path}::{}", name(&member)));
                }
            }
            _ => {}
        }
    }
    found
}

fn read_list(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_public_items_are_the_listed_ones() {
    let doc = match std::env::var_os("MESH_PUBLIC_ITEMS_JSON") {
        // Another build's JSON (how the `before` list was made from b780108's).
        Some(path) => {
            let text = std::fs::read_to_string(&path).expect("the JSON named");
            serde_json::from_str(&text).expect("rustdoc's JSON parses")
        }
        None => rustdoc_json(),
    };
    let now = public_items(&doc);
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    if std::env::var("MESH_PUBLIC_ITEMS").as_deref() == Ok("print") {
        for line in &now {
            println!("{line}");
        }
    }
    let listed = data.join("public_items.txt");
    if std::env::var("MESH_PUBLIC_ITEMS").as_deref() == Ok("write") {
        let text: String = now.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&listed, text).expect("write the list");
    }
    let before = read_list(&data.join("public_items_before.txt"));
    let goal = before.len() * 2 / 3;
    println!(
        "public items: {} now, {} before the one-path issue, goal {goal}",
        now.len(),
        before.len()
    );
    let list = read_list(&listed);
    let added: Vec<_> = now.difference(&list).collect();
    let removed: Vec<_> = list.difference(&now).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public items changed; if that is the decision, rewrite tests/data/public_items.txt \
         (MESH_PUBLIC_ITEMS=write)\nnew: {added:#?}\ngone: {removed:#?}"
    );
    assert!(
        now.len() <= before.len(),
        "{} public items, more than the {} before",
        now.len(),
        before.len()
    );
}

#[test]
fn the_walk_counts_methods_fields_variants_and_reexports() {
    // A hand-written index in rustdoc's shape: a root re-exporting a struct with one public
    // and one private field and an inherent method, an enum with a struct variant, and a trait.
    let doc: Value = serde_json::from_str(
        r#"{"format_version": 57, "root": 0, "index": {
          "0": {"name": "mesh_egress", "visibility": "public", "inner": {"module": {"items": [1, 2, 9, 12]}}},
          "1": {"name": "S", "visibility": "public", "inner": {"use": {"id": 3, "name": "S", "is_glob": false}}},
          "2": {"name": "hidden", "visibility": "public", "inner": {"module": {"items": [3]}}},
          "3": {"name": "S", "visibility": "public", "inner": {"struct": {"kind": {"plain": {"fields": [4, 5]}}, "impls": [6, 13]}}},
          "4": {"name": "open", "visibility": "public", "inner": {"struct_field": {}}},
          "5": {"name": "closed", "visibility": "crate", "inner": {"struct_field": {}}},
          "6": {"name": null, "visibility": "default", "inner": {"impl": {"trait": null, "blanket_impl": null, "is_synthetic": false, "items": [7, 8]}}},
          "7": {"name": "new", "visibility": "public", "inner": {"function": {}}},
          "8": {"name": "private", "visibility": "crate", "inner": {"function": {}}},
          "9": {"name": "E", "visibility": "public", "inner": {"enum": {"variants": [10], "impls": []}}},
          "10": {"name": "V", "visibility": "default", "inner": {"variant": {"kind": {"struct": {"fields": [11]}}}}},
          "11": {"name": "x", "visibility": "default", "inner": {"struct_field": {}}},
          "12": {"name": "T", "visibility": "public", "inner": {"trait": {"items": [14]}}},
          "13": {"name": null, "visibility": "default", "inner": {"impl": {"trait": {"path": "Clone"}, "blanket_impl": null, "is_synthetic": false, "items": [15]}}},
          "14": {"name": "call", "visibility": "default", "inner": {"function": {}}},
          "15": {"name": "clone", "visibility": "default", "inner": {"function": {}}}
        }}"#,
    )
    .unwrap();
    let items: Vec<_> = public_items(&doc).into_iter().collect();
    assert_eq!(
        items,
        [
            "enum mesh_egress::E",
            "function mesh_egress::S::new",
            "function mesh_egress::T::call",
            "module mesh_egress",
            "module mesh_egress::hidden",
            "struct mesh_egress::S",
            "struct_field mesh_egress::E::V::x",
            "struct_field mesh_egress::S::open",
            "trait mesh_egress::T",
            "variant mesh_egress::E::V",
        ]
        .map(str::to_owned)
    );
}
