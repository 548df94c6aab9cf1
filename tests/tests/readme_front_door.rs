//! The README's front door is `examples/quickstart.rs`, verbatim, and stays small: under 50
//! lines, importing at most 8 distinct `mesh_egress::` paths (the macro and the leaf values
//! `AgentMessage`, `Markdown`, `Attribution`, `EgressError`, `Turn` not counted, as issue 24
//! counts them).

use std::collections::BTreeSet;
use std::path::Path;

use syn::visit::Visit;

/// Not counted: the macro and the leaf values every handler names.
const UNCOUNTED: &[&str] = &[
    "egress_boundary",
    "AgentMessage",
    "Markdown",
    "Attribution",
    "EgressError",
    "Turn",
];

fn read(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(relative)).unwrap()
}

/// Every `mesh_egress::…` path the file names, in `use` trees and inline.
#[derive(Default)]
struct Paths(BTreeSet<String>);

fn leaves(prefix: &str, tree: &syn::UseTree, out: &mut BTreeSet<String>) {
    match tree {
        syn::UseTree::Path(path) => leaves(&format!("{prefix}::{}", path.ident), &path.tree, out),
        syn::UseTree::Name(name) => {
            out.insert(format!("{prefix}::{}", name.ident));
        }
        syn::UseTree::Rename(rename) => {
            out.insert(format!("{prefix}::{}", rename.ident));
        }
        syn::UseTree::Glob(_) => {
            out.insert(format!("{prefix}::*"));
        }
        syn::UseTree::Group(group) => group.items.iter().for_each(|t| leaves(prefix, t, out)),
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if let syn::UseTree::Path(path) = &item.tree
            && path.ident == "mesh_egress"
        {
            leaves("mesh_egress", &path.tree, &mut self.0);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && segments[0] == "mesh_egress" {
            self.0.insert(segments.join("::"));
        }
        syn::visit::visit_path(self, path);
    }
}

#[test]
fn the_readme_shows_the_quickstart_verbatim_and_it_stays_small() {
    let example = read("mesh-egress/examples/quickstart.rs");
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("```rust\n{example}```\n")),
        "README.md must include examples/quickstart.rs verbatim in a rust block"
    );
    let lines = example.lines().count();
    assert!(lines < 50, "the front door example has {lines} lines");
    let mut paths = Paths::default();
    paths.visit_file(&syn::parse_file(&example).unwrap());
    let counted: Vec<&String> = paths
        .0
        .iter()
        .filter(|path| !UNCOUNTED.contains(&path.rsplit("::").next().unwrap()))
        .collect();
    println!("{} counted mesh_egress paths: {counted:?}", counted.len());
    assert!(counted.len() <= 8, "{counted:?}");
}
