//! The page itself: the HTML shell, the committed bundle (`page/dist/app.js`, built by
//! `page/build.mjs` from `page/src/`) and its licence notices. Everything is compiled in, so
//! the example runs offline.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The bundle: `@ai-sdk/react`'s `useChat`, React, react-markdown and the page's code.
const APP_JS: &str = include_str!("page/dist/app.js");
/// The licence notices of every package in the bundle.
const NOTICES: &str = include_str!("page/dist/THIRD_PARTY_NOTICES.txt");

const INDEX: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mesh-egress web chat</title>
<style>
  :root { color-scheme: light; font-family: system-ui, sans-serif; }
  body { margin: 0; background: #f4f5f7; color: #1d2330; }
  main { max-width: 46rem; margin: 0 auto; padding: 1.5rem 1rem 2rem; }
  header { display: flex; justify-content: space-between; align-items: center; gap: 1rem; flex-wrap: wrap; }
  h1 { font-size: 1.25rem; margin: 0; }
  select, input, button { font: inherit; }
  ol { list-style: none; padding: 0; margin: 1.25rem 0; display: flex; flex-direction: column; gap: .75rem; }
  .message { padding: .65rem .9rem; border-radius: .6rem; max-width: 85%; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
  .message .who { display: block; font-size: .75rem; font-weight: 600; opacity: .6; margin-bottom: .2rem; }
  .message p { margin: .3rem 0; line-height: 1.45; }
  .user { align-self: flex-end; background: #2f5bd3; color: #fff; }
  .assistant { align-self: flex-start; background: #fff; }
  form { display: flex; gap: .5rem; }
  #prompt { flex: 1; padding: .55rem .7rem; border: 1px solid #c4c9d4; border-radius: .45rem; }
  button { padding: .55rem 1rem; border: 0; border-radius: .45rem; background: #2f5bd3; color: #fff; }
  button:disabled { opacity: .5; }
  #owed { font-size: .85rem; opacity: .7; }
  #error { color: #a4262c; }
  footer { max-width: 46rem; margin: 0 auto; padding: 0 1rem 1.5rem; font-size: .75rem; opacity: .6; }
</style>
</head>
<body>
<div id="root"></div>
<footer><a href="/third-party-notices.txt">Third-party licences</a></footer>
<script src="/app.js" defer></script>
</body>
</html>
"#;

/// What the page may load: only its own origin (the bundle, the API); no inline script.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

fn with_type(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub(crate) async fn index() -> Response {
    with_type(INDEX, "text/html; charset=utf-8")
}

/// `GET /app.js`.
pub(crate) async fn app_js() -> Response {
    with_type(APP_JS, "text/javascript; charset=utf-8")
}

/// `GET /favicon.ico`: none (a browser asks for it on every page).
pub(crate) async fn favicon() -> axum::http::StatusCode {
    axum::http::StatusCode::NO_CONTENT
}

/// `GET /third-party-notices.txt`.
pub(crate) async fn notices() -> Response {
    with_type(NOTICES, "text/plain; charset=utf-8")
}
