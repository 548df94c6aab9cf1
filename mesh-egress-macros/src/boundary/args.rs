//! `#[egress_boundary(<mode>, policy = <expr>, crate = <path>)]`: the attribute's arguments.
//!
//! Every argument is read even after one is wrong, so a single compile reports every mistake
//! in the attribute, and what was understood still drives the best-effort expansion.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, LitStr, Path, Token};

/// The two modes of the specification's Layer C.
#[derive(Clone, Copy)]
pub(super) enum Mode {
    Interactive,
    Proactive,
}

/// What the attribute says. Wrong arguments leave their defaults (`interactive`, the default
/// policy, `::mesh_egress`) so the function still expands after the error is reported.
pub(super) struct Args {
    pub(super) mode: Mode,
    pub(super) policy: Option<Expr>,
    krate: Option<Path>,
}

impl Args {
    /// The path generated code names the runtime by: `crate = ...`, or `::mesh_egress`.
    pub(super) fn runtime(&self) -> TokenStream {
        match &self.krate {
            Some(path) => quote! { #path },
            None => quote! { ::mesh_egress },
        }
    }
}

const USAGE: &str = "write `#[egress_boundary(interactive)]` or `#[egress_boundary(proactive)]`, \
optionally followed by `, policy = <expr>` and `, crate = <path>`";

const OPTIONS: &str = "the options are `policy = <expr>` and `crate = <path>`";

/// Parses the attribute's arguments: what was understood, and every error found (combined).
pub(super) fn parse(tokens: TokenStream) -> (Args, Option<syn::Error>) {
    let mut found = Found::default();
    let structural = Parser::parse2(|input: ParseStream<'_>| found.items(input), tokens).err();
    if let Some(err) = structural {
        found.error(err);
    }
    let args = Args {
        mode: found.mode.unwrap_or(Mode::Interactive),
        policy: found.policy,
        krate: found.krate,
    };
    (args, found.errors)
}

#[derive(Default)]
struct Found {
    mode: Option<Mode>,
    policy: Option<Expr>,
    krate: Option<Path>,
    /// Set once anything was read, so a mode after an option is reported as out of place.
    seen_item: bool,
    /// Set once the mode's own error is reported, so "missing mode" is not said twice.
    mode_reported: bool,
    errors: Option<syn::Error>,
}

impl Found {
    fn error(&mut self, err: syn::Error) {
        match &mut self.errors {
            Some(errors) => errors.combine(err),
            None => self.errors = Some(err),
        }
    }

    fn items(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        if input.is_empty() {
            self.error(syn::Error::new(
                Span::call_site(),
                format!("missing mode: {USAGE}"),
            ));
            return Ok(());
        }
        let first = input.span();
        while !input.is_empty() {
            self.item(input)?;
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        if self.mode.is_none() && !self.mode_reported {
            self.error(syn::Error::new(first, format!("missing mode: {USAGE}")));
        }
        Ok(())
    }

    /// One `mode` or `key = value`. Structural errors (no identifier, a broken expression) stop
    /// the parse; anything else is recorded and the next argument is read.
    fn item(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        // `parse_any` so the keyword `crate` reads as a key.
        let key = input
            .call(Ident::parse_any)
            .map_err(|e| syn::Error::new(e.span(), format!("expected a mode: {USAGE}")))?;
        let first = !self.seen_item;
        self.seen_item = true;
        if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            return self.option(&key, input);
        }
        let mode = match key.to_string().as_str() {
            "interactive" => Mode::Interactive,
            "proactive" => Mode::Proactive,
            "policy" | "crate" => {
                self.mode_reported |= first;
                self.error(syn::Error::new(
                    key.span(),
                    format!("`{key}` needs a value: `{key} = <{}>`", value_name(&key)),
                ));
                return Ok(());
            }
            other if first => {
                self.mode_reported = true;
                self.error(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown mode `{other}`: expected `interactive` (a person is waiting) or \
                         `proactive` (nobody asked)"
                    ),
                ));
                return Ok(());
            }
            other => {
                self.error(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{other}`: {OPTIONS}"),
                ));
                return Ok(());
            }
        };
        if self.mode.is_some() {
            self.error(syn::Error::new(
                key.span(),
                "the mode is given twice: a handler is either `interactive` or `proactive`",
            ));
        } else if !first {
            self.error(syn::Error::new(
                key.span(),
                format!("the mode comes first: {USAGE}"),
            ));
            self.mode = Some(mode);
        } else {
            self.mode = Some(mode);
        }
        Ok(())
    }

    fn option(&mut self, key: &Ident, input: ParseStream<'_>) -> syn::Result<()> {
        match key.to_string().as_str() {
            "policy" => {
                let expr: Expr = input.parse()?;
                if self.policy.is_some() {
                    self.error(syn::Error::new(key.span(), "`policy` is given twice"));
                } else {
                    self.policy = Some(expr);
                }
            }
            "crate" => {
                let path = crate_path(input)?;
                match path {
                    Ok(_) if self.krate.is_some() => {
                        self.error(syn::Error::new(key.span(), "`crate` is given twice"));
                    }
                    Ok(path) => self.krate = Some(path),
                    Err(err) => self.error(err),
                }
            }
            other => {
                // Read the value anyway, so the arguments after it are still checked.
                let _value: Expr = input.parse()?;
                self.error(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{other}`: {OPTIONS}"),
                ));
            }
        }
        Ok(())
    }
}

fn value_name(key: &Ident) -> &'static str {
    if key == "crate" { "path" } else { "expr" }
}

/// `crate = path::to::mesh_egress` or, as tokio and serde spell it, `crate = "path::to::mesh_egress"`.
/// The outer `Result` is a structural error; the inner one a value that is not a path.
fn crate_path(input: ParseStream<'_>) -> syn::Result<Result<Path, syn::Error>> {
    const HINT: &str = "name the runtime as Rust code reaches it, like `crate = ::mesh_egress` or \
`crate = my_reexports::mesh_egress` (a string such as `crate = \"::mesh_egress\"` works too)";
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        // Spanned at the literal, so an unresolved path points at what the user wrote.
        return Ok(lit.parse_with(Path::parse_mod_style).map_err(|_| {
            syn::Error::new(
                lit.span(),
                format!(
                    "`crate = {:?}` is not a path: {HINT}; a package name with `-` is spelled \
                     with `_` in paths",
                    lit.value()
                ),
            )
        }));
    }
    let fork = input.fork();
    if fork.call(Path::parse_mod_style).is_ok() && (fork.is_empty() || fork.peek(Token![,])) {
        return Ok(Ok(input.call(Path::parse_mod_style)?));
    }
    let value: Expr = input.parse()?;
    Ok(Err(syn::Error::new_spanned(
        value,
        format!("`crate` takes a path: {HINT}"),
    )))
}
