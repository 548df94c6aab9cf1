//! The accept loop shared by the loopback fakes.

use std::error::Error as StdError;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Serves HTTP/1.1 on `listener`, one `make_service()` per connection, until the future is
/// dropped (aborting it drops the connection set, which aborts every connection task).
pub(crate) async fn serve_http1<S, B>(listener: TcpListener, make_service: impl Fn() -> S)
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // E.g. out of file descriptors: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
        let service = make_service();
        connections.spawn(async move {
            // A client that hangs up mid-exchange is a normal event for a fault injector.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
