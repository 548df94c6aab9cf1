//! The module graph of `mesh-egress` points one way (ARCHITECTURE.md). This test parses every
//! source file of the runtime crate with `syn` and checks every `crate::` and `super::` path that
//! leaves its top-level module — in `use` trees (grouped ones included), in types, in
//! expressions and patterns — against the allow-list below, so the rule cannot drift.
//!
//! Not checked, on purpose: code under `#[cfg(test)]` (tests may compose layers), and paths
//! inside macro invocations (`matches!`, `tracing::info!`: token streams, not syntax).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Which top-level modules each module may import from. A module always may use itself.
/// Keep in step with ARCHITECTURE.md.
const ALLOWED: &[(&str, &[&str])] = &[
    // Leaf values: they import nothing of ours but other leaf values.
    ("egress", &["ownership", "mode"]),
    ("ownership", &[]),
    ("address", &[]),
    ("engagement", &["verdict"]),
    ("failure", &[]),
    ("verdict", &[]),
    ("reply", &["egress", "id", "mode"]),
    ("render", &["egress"]),
    ("retry", &[]),
    ("setting", &[]),
    ("id", &[]),
    ("failpoint", &[]),
    ("mode", &[]),
    ("future", &[]),
    // Where Markdown holds code; an agent's silence tokens.
    ("code_region", &[]),
    // What the person's own message makes an answer (quoted, asked about).
    ("asked", &[]),
    ("silence", &[]),
    // The block cutter: text in, blocks out, nothing of ours.
    ("stream", &[]),
    // A streamed block, `Unchecked -> Checked`: a leaf value the gate checks and channels send.
    ("block", &["egress", "ownership"]),
    // The record of what happened, and the context of one turn.
    (
        "ledger",
        &[
            "egress",
            "reply",
            "render",
            "address",
            "engagement",
            "verdict",
            "failure",
            "ownership",
        ],
    ),
    (
        "turn",
        &[
            "egress",
            "ownership",
            "ledger",
            "address",
            "reply",
            "degrade",
        ],
    ),
    // A streamed answer as a handler returns it, and what the boundary makes of it.
    ("answer", &["egress", "future", "reply", "turn"]),
    // Layer B: the typestate, then the channels.
    (
        "outbound",
        &["egress", "ownership", "render", "id", "address"],
    ),
    (
        "channel",
        &[
            "address",
            "outbound",
            "egress",
            "reply",
            "ownership",
            "render",
            "retry",
            "setting",
            "block",
            "future",
        ],
    ),
    // Layer A, Layer C and the gate never see the channels.
    (
        "model",
        &[
            "egress",
            "turn",
            "ledger",
            "retry",
            "setting",
            "ownership",
            "code_region",
            "asked",
            "answer",
            "failure",
            "future",
        ],
    ),
    (
        "degrade",
        &["egress", "reply", "ledger", "setting", "silence"],
    ),
    (
        "gate",
        &[
            "egress",
            "reply",
            "ledger",
            "model",
            "turn",
            "ownership",
            "block",
            "code_region",
            "asked",
            "verdict",
            "future",
        ],
    ),
    // The ingress classifier: inbound events in, a decision out; its judge rides Layer A's
    // fast-model plumbing (`model::fast`), which it shares with the gate, never the gate itself.
    (
        "ingress",
        &[
            "address",
            "egress",
            "engagement",
            "ledger",
            "model",
            "turn",
            "verdict",
        ],
    ),
    // The durable store sits on the commit boundary: channels and the typestate, never Layer C.
    (
        "store",
        &[
            "address",
            "outbound",
            "channel",
            "egress",
            "reply",
            "ownership",
            "ledger",
            "turn",
            "setting",
            "render",
            "id",
            "retry",
            "failpoint",
            "future",
        ],
    ),
    // The glue: the only module that sees both the channels and Layer C.
    (
        "boundary",
        &[
            "answer",
            "address",
            "channel",
            "degrade",
            "egress",
            "reply",
            "ledger",
            "turn",
            "ownership",
            "retry",
            "outbound",
            "render",
            "gate",
            "model",
            "store",
            "setting",
            "block",
            "stream",
            "silence",
            "future",
        ],
    ),
    // Keeping durable promises: the boundary's glue on top of the store.
    (
        "worker",
        &[
            "address",
            "bot",
            "boundary",
            "store",
            "channel",
            "degrade",
            "egress",
            "ledger",
            "outbound",
            "ownership",
            "reply",
            "turn",
            "failpoint",
        ],
    ),
    // The front door: one value over every layer (the glue, the store, the worker).
    (
        "bot",
        &[
            "address", "answer", "boundary", "channel", "degrade", "egress", "future", "gate",
            "ledger", "outbound", "reply", "retry", "store", "stream", "turn",
        ],
    ),
    // The web chat surface: a surface on the front door (its turns go through the bot), with
    // its own surface client the bot holds; nothing of ours imports it.
    (
        "web",
        &[
            "address", "answer", "bot", "channel", "degrade", "egress", "gate", "id", "reply",
            "outbound", "store", "stream", "turn", "worker", "future",
        ],
    ),
    // What the macro's expansion reaches.
    (
        "__private",
        &["answer", "boundary", "degrade", "egress", "reply", "turn"],
    ),
    // The doc-hidden hook the crate's benches and fuzz targets drive internal parsers through.
    ("__internals", &["gate", "model", "silence"]),
    // Test support may use anything; nothing but the crate root uses it.
    (
        "testing",
        &[
            "address",
            "channel",
            "degrade",
            "egress",
            "reply",
            "ledger",
            "turn",
            "ownership",
            "retry",
            "outbound",
            "render",
            "model",
            "gate",
            "boundary",
            "setting",
            "store",
            "future",
        ],
    ),
];

/// One path that leaves its module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    line: usize,
    path: String,
}

/// Collects the edges of one file whose module path is `module` (e.g. `["channel", "http",
/// "slack"]`; `[]` for the crate root).
struct Collector<'a> {
    module: Vec<String>,
    roots: &'a BTreeMap<String, String>,
    edges: Vec<Edge>,
}

impl Collector<'_> {
    fn top(&self) -> String {
        self.module.first().cloned().unwrap_or_default()
    }

    /// Records `segments` (a path as written) if it leaves the current top-level module.
    fn record(&mut self, segments: &[String], line: usize) {
        let Some(target) = absolute(&self.module, segments) else {
            return;
        };
        let Some(head) = target.first() else {
            return;
        };
        // A path through the crate root's re-exports (`crate::Turn`) lands in the module the
        // root re-exports it from.
        let to = self
            .roots
            .get(head)
            .cloned()
            .unwrap_or_else(|| head.clone());
        let from = self.top();
        if to != from && !from.is_empty() {
            self.edges.push(Edge {
                from,
                to,
                line,
                path: segments.join("::"),
            });
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        each_use_path(tree, prefix, &mut |path, line| self.record(path, line));
    }
}

/// Where `segments`, written in `module`, lead inside the crate (`crate::`, `super::` and
/// `self::` paths); `None` for a path that starts anywhere else.
fn absolute(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    match segments.first()?.as_str() {
        "crate" => Some(segments[1..].to_vec()),
        "self" => Some(module.iter().chain(&segments[1..]).cloned().collect()),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => None,
    }
}

/// Calls `f` with every path a `use` tree names (a glob names its prefix) and its line.
fn each_use_path(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    f: &mut dyn FnMut(&[String], usize),
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            each_use_path(&p.tree, prefix, f);
            prefix.pop();
        }
        syn::UseTree::Name(syn::UseName { ident })
        | syn::UseTree::Rename(syn::UseRename { ident, .. }) => {
            prefix.push(ident.to_string());
            f(prefix, ident.span().start().line);
            prefix.pop();
        }
        syn::UseTree::Glob(g) => f(prefix, g.star_token.spans[0].start().line),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                each_use_path(item, prefix, f);
            }
        }
    }
}

/// The attributes of the items a `#[cfg(test)]` can take out of the build.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Const(c) => &c.attrs,
        syn::Item::Static(s) => &s.attrs,
        _ => &[],
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    /// Whether `tokens` mention the `test` cfg outside a `not(..)`.
    fn mentions_test(tokens: proc_macro2::TokenStream) -> bool {
        let mut iter = tokens.into_iter().peekable();
        while let Some(tree) = iter.next() {
            match tree {
                proc_macro2::TokenTree::Ident(ident) if ident == "not" => {
                    iter.next();
                }
                proc_macro2::TokenTree::Ident(ident) if ident == "test" => return true,
                proc_macro2::TokenTree::Group(group) if mentions_test(group.stream()) => {
                    return true;
                }
                _ => {}
            }
        }
        false
    }
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .meta
                .require_list()
                .is_ok_and(|list| mentions_test(list.tokens.clone()))
    })
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = item_attrs(item);
        if is_cfg_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.record(&segments, line);
        syn::visit::visit_path(self, path);
    }
}

/// The module path of `file` inside `src` (`src/channel/http/slack.rs` → `channel::http::slack`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    // lib.rs mounts `private.rs` as `__private` and `internals.rs` as `__internals`
    // (`#[path = "…"]`).
    if let Some(first) = parts.first_mut()
        && (first == "private" || first == "internals")
    {
        *first = format!("__{first}");
    }
    parts
}

/// What the crate root re-exports, by name: `pub use egress::{AgentMessage, ..}` maps
/// `AgentMessage` to `egress`.
fn root_exports(lib: &syn::File) -> BTreeMap<String, String> {
    fn walk(tree: &syn::UseTree, module: Option<&str>, out: &mut BTreeMap<String, String>) {
        match tree {
            syn::UseTree::Path(p) => {
                let ident = p.ident.to_string();
                let next = match module {
                    None if ident == "crate" => None,
                    None => Some(ident.as_str()),
                    Some(m) => Some(m),
                };
                // `pub use mesh_egress_macros::..` is another crate.
                if next == Some("mesh_egress_macros") {
                    return;
                }
                walk(&p.tree, next, out);
            }
            syn::UseTree::Name(n) => {
                if let Some(m) = module {
                    out.insert(n.ident.to_string(), m.to_owned());
                }
            }
            syn::UseTree::Rename(r) => {
                if let Some(m) = module {
                    out.insert(r.rename.to_string(), m.to_owned());
                }
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    walk(item, module, out);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for item in &lib.items {
        if let syn::Item::Use(u) = item {
            walk(&u.tree, None, &mut out);
        }
    }
    out
}

fn edges_of(source: &str, module: Vec<String>, roots: &BTreeMap<String, String>) -> Vec<Edge> {
    let file = syn::parse_file(source).expect("the source parses");
    let mut collector = Collector {
        module,
        roots,
        edges: Vec::new(),
    };
    collector.visit_file(&file);
    collector.edges
}

/// Every edge that the allow-list does not permit.
fn violations(edges: &[Edge]) -> Vec<String> {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut out = Vec::new();
    for edge in edges {
        let permitted = match allowed.get(edge.from.as_str()) {
            Some(deps) => deps.contains(edge.to.as_str()),
            None => {
                out.push(format!(
                    "module `{}` is not in the allow-list (add it to ALLOWED and ARCHITECTURE.md)",
                    edge.from
                ));
                continue;
            }
        };
        if !permitted {
            out.push(format!(
                "`{}` may not import from `{}`: `{}` (line {})",
                edge.from, edge.to, edge.path, edge.line
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable source dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules that are test code in a file of their own: mounted by a `#[cfg(test)] mod
/// name;` declaration (a file of tests, like an inline `#[cfg(test)] mod tests { .. }`).
fn test_modules(src: &Path, files: &[PathBuf]) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    for file in files {
        let parsed = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
        for item in &parsed.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_cfg_test(&m.attrs)
            {
                let mut module = module_of(src, file);
                module.push(m.ident.to_string());
                found.insert(module);
            }
        }
    }
    found
}

#[test]
fn the_runtime_crates_modules_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mesh-egress/src");
    let lib = syn::parse_file(&std::fs::read_to_string(src.join("lib.rs")).unwrap()).unwrap();
    let roots = root_exports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    let tests_only = test_modules(&src, &files);
    let mut edges = Vec::new();
    for file in &files {
        if tests_only.contains(&module_of(&src, file)) {
            continue;
        }
        let source = std::fs::read_to_string(file).unwrap();
        let mut file_edges = edges_of(&source, module_of(&src, file), &roots);
        for edge in &mut file_edges {
            edge.path = format!("{} in {}", edge.path, file.display());
        }
        edges.extend(file_edges);
    }
    assert!(
        edges.len() > 50,
        "suspiciously few cross-module paths: {}",
        edges.len()
    );
    let bad = violations(&edges);
    assert!(
        bad.is_empty(),
        "the module graph has edges ARCHITECTURE.md does not allow:\n{}",
        bad.join("\n")
    );
}

/// The imports between the files of one folder: `from` (a file's module name) uses `to` (a
/// sibling's), directly or through a name the folder's `mod.rs` re-exports from it.
struct SiblingCollector<'a> {
    module: Vec<String>,
    siblings: &'a BTreeSet<String>,
    folder_exports: &'a BTreeMap<String, String>,
    edges: BTreeSet<(String, String)>,
}

impl SiblingCollector<'_> {
    fn record(&mut self, segments: &[String]) {
        let Some(me) = self.module.last() else {
            return;
        };
        let Some(target) = absolute(&self.module, segments) else {
            return;
        };
        let parent = &self.module[..self.module.len() - 1];
        if target.len() <= parent.len() || target[..parent.len()] != *parent {
            return;
        }
        let name = &target[parent.len()];
        let to = if self.siblings.contains(name) {
            Some(name.clone())
        } else {
            self.folder_exports.get(name).cloned()
        };
        if let Some(to) = to.filter(|to| to != me && self.siblings.contains(to)) {
            self.edges.insert((me.clone(), to));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        each_use_path(tree, prefix, &mut |path, _| self.record(path));
    }
}

impl<'ast> Visit<'ast> for SiblingCollector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = item_attrs(item);
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// The circles among `edges` (a file's module name → a sibling's), each as its members in order;
/// empty when the files of the folder point one way.
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
    }
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    // Iterative depth-first search from each node (no recursion; folders are small).
    for &start in next.keys() {
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        let mut on_path: Vec<&str> = vec![start];
        while let Some((node, i)) = stack.pop() {
            let outs = next.get(node).map_or(&[][..], Vec::as_slice);
            if i < outs.len() {
                stack.push((node, i + 1));
                let to = outs[i];
                if to == start {
                    let mut circle: Vec<String> = on_path.iter().map(|s| (*s).to_owned()).collect();
                    // One spelling per circle: rotate it to start at its smallest member.
                    let min = (0..circle.len())
                        .min_by_key(|&k| circle[k].clone())
                        .unwrap_or(0);
                    circle.rotate_left(min);
                    found.insert(circle);
                } else if !on_path.contains(&to) && to > start {
                    stack.push((to, 0));
                    on_path.push(to);
                }
            } else {
                on_path.pop();
            }
        }
    }
    found.into_iter().collect()
}

/// Every import circle between the files of one folder of `src` (below the crate root, whose
/// modules `ALLOWED` orders).
fn folder_circles(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut folders: BTreeMap<Vec<String>, Vec<(PathBuf, Vec<String>)>> = BTreeMap::new();
    for file in files {
        let module = module_of(src, &file);
        let is_mod = matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs")
        );
        if module.len() >= 2 && !is_mod {
            folders
                .entry(module[..module.len() - 1].to_vec())
                .or_default()
                .push((file, module));
        }
    }
    let mut out = Vec::new();
    for (folder, members) in folders {
        let siblings: BTreeSet<String> = members
            .iter()
            .filter_map(|(_, m)| m.last().cloned())
            .collect();
        let mod_rs = src.join(folder.join("/")).join("mod.rs");
        let folder_exports = std::fs::read_to_string(&mod_rs)
            .ok()
            .and_then(|text| syn::parse_file(&text).ok())
            .map(|file| root_exports(&file))
            .unwrap_or_default();
        let mut collector = SiblingCollector {
            module: Vec::new(),
            siblings: &siblings,
            folder_exports: &folder_exports,
            edges: BTreeSet::new(),
        };
        for (file, module) in &members {
            let parsed = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
            collector.module.clone_from(module);
            collector.visit_file(&parsed);
        }
        for circle in circles(&collector.edges) {
            out.push(format!(
                "{}: {} -> {}",
                folder.join("/"),
                circle.join(" -> "),
                circle[0]
            ));
        }
    }
    out
}

#[test]
fn the_files_of_one_folder_import_each_other_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mesh-egress/src");
    let found = folder_circles(&src);
    assert!(
        found.is_empty(),
        "files of one folder import each other in a circle (move what both need into one of \
         them, or into a file both use):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_allowed_imports_between_top_level_modules_have_no_circle() {
    let edges: BTreeSet<(String, String)> = ALLOWED
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(|to| ((*from).to_owned(), (*to).to_owned())))
        .filter(|(from, to)| from != to)
        .collect();
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "the allow-list lets modules import each other in a circle: {found:?}"
    );
}

#[test]
fn nothing_but_the_crate_root_depends_on_test_support() {
    for (module, deps) in ALLOWED {
        assert!(
            !deps.contains(&"testing"),
            "`{module}` may not depend on `testing`"
        );
    }
}

mod fixtures {
    use super::*;

    fn check(source: &str, module: &[&str]) -> Vec<String> {
        let roots = BTreeMap::from([("Turn".to_owned(), "turn".to_owned())]);
        let module = module.iter().map(|s| (*s).to_owned()).collect();
        violations(&edges_of(source, module, &roots))
    }

    #[test]
    fn a_plain_use_of_a_forbidden_module_is_caught() {
        let bad = check("use crate::channel::Recorder;", &["degrade"]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("`degrade` may not import from `channel`"));
    }

    #[test]
    fn a_grouped_use_is_caught_item_by_item() {
        let bad = check(
            "use crate::{egress::AgentMessage, channel::{Deliver, http::SlackChannel}};",
            &["degrade"],
        );
        assert_eq!(bad.len(), 2, "{bad:?}");
    }

    #[test]
    fn a_path_written_inline_in_an_expression_or_type_is_caught() {
        let bad = check(
            "fn f(x: &crate::gate::QualityGate) { let _ = crate::testing::FakeProvider::new(); }",
            &["channel"],
        );
        assert_eq!(bad.len(), 2, "{bad:?}");
    }

    #[test]
    fn super_paths_are_resolved_against_the_files_module() {
        // channel::http::slack → super::super::super is the root, then `degrade`.
        let bad = check(
            "use super::super::super::degrade::Mode;",
            &["channel", "http", "slack"],
        );
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            check(
                "use super::retry::Transport;",
                &["channel", "http", "slack"]
            )
            .is_empty()
        );
    }

    #[test]
    fn a_path_through_a_root_re_export_counts_as_its_module() {
        let bad = check("fn f(t: &crate::Turn) {}", &["channel"]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("from `turn`"));
    }

    #[test]
    fn a_file_mounted_by_a_cfg_test_mod_is_test_code_and_a_plain_one_is_not() {
        let src = std::env::temp_dir().join(format!("arch-fixture-{}", std::process::id()));
        std::fs::create_dir_all(src.join("channel")).unwrap();
        let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
        write(
            "channel/mod.rs",
            "#[cfg(all(test, feature = \"testing\"))]\nmod fakes_tests;\nmod send;\n",
        );
        write("channel/fakes_tests.rs", "use crate::testing::FakeApi;\n");
        write("channel/send.rs", "use crate::testing::FakeApi;\n");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let tests = test_modules(&src, &files);
        std::fs::remove_dir_all(&src).unwrap();
        let names = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(tests, BTreeSet::from([names(&["channel", "fakes_tests"])]));
    }

    #[test]
    fn test_code_and_allowed_edges_pass() {
        assert!(
            check(
                "#[cfg(test)] mod tests { use crate::channel::Recorder; }",
                &["degrade"]
            )
            .is_empty()
        );
        assert!(
            check(
                "#[cfg(all(test, feature = \"x\"))] mod t { use crate::channel::Recorder; }",
                &["degrade"]
            )
            .is_empty()
        );
        assert_eq!(
            check(
                "#[cfg(not(test))] use crate::channel::Recorder;",
                &["degrade"]
            )
            .len(),
            1
        );
        assert!(
            check(
                "use crate::ledger::Ledger; use crate::egress::Attribution;",
                &["degrade"]
            )
            .is_empty()
        );
    }

    #[test]
    fn a_circle_between_siblings_is_found_and_a_one_way_chain_is_not() {
        let edge = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let chain = BTreeSet::from([edge("a", "b"), edge("b", "c"), edge("a", "c")]);
        assert!(circles(&chain).is_empty());
        let circle = BTreeSet::from([
            edge("walker", "slack"),
            edge("slack", "escape"),
            edge("escape", "walker"),
        ]);
        assert_eq!(circles(&circle), [["escape", "walker", "slack"]]);
        let pair = BTreeSet::from([edge("classify", "limits"), edge("limits", "classify")]);
        assert_eq!(circles(&pair), [["classify", "limits"]]);
    }

    #[test]
    fn sibling_edges_resolve_super_self_crate_and_the_folders_re_exports() {
        let siblings = BTreeSet::from(["walker".to_owned(), "slack".to_owned()]);
        let exports = BTreeMap::from([("SlackMrkdwn".to_owned(), "slack".to_owned())]);
        let mut collector = SiblingCollector {
            module: vec!["channel".into(), "format".into(), "walker".into()],
            siblings: &siblings,
            folder_exports: &exports,
            edges: BTreeSet::new(),
        };
        let source = "use super::SlackMrkdwn; fn f() { crate::channel::format::slack::g(); } \
                      use self::inner::x; #[cfg(test)] mod tests { use super::super::walker::y; }";
        collector.visit_file(&syn::parse_file(source).unwrap());
        assert_eq!(
            collector.edges,
            BTreeSet::from([("walker".to_owned(), "slack".to_owned())])
        );
    }

    #[test]
    fn a_re_export_pointing_back_is_an_edge_like_any_other() {
        assert_eq!(
            check("pub use crate::boundary::resolve;", &["degrade"]).len(),
            1
        );
    }
}
