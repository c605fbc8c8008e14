//! Streamable HTTP on loopback: rmcp's service behind a bare hyper HTTP/1 server, with the
//! path and credential checks rmcp leaves to the host.

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::handler::McpTest;
use crate::state::Shared;

/// The one path the MCP endpoint answers on.
const MCP_PATH: &str = "/mcp";

/// What a request must carry, else it is answered 401.
#[derive(Debug, Clone, Default)]
pub struct Required {
    /// The token of an `Authorization: Bearer TOKEN` header.
    pub bearer: Option<String>,
    /// `(name, value)` pairs; names match case-insensitively, values exactly.
    pub headers: Vec<(String, String)>,
}

impl Required {
    fn allows(&self, request: &Request<Incoming>) -> bool {
        let has = |name: &str, value: &str| {
            request
                .headers()
                .get_all(name)
                .iter()
                .any(|v| v.as_bytes() == value.as_bytes())
        };
        self.bearer
            .as_ref()
            .is_none_or(|token| has("authorization", &format!("Bearer {token}")))
            && self.headers.iter().all(|(name, value)| has(name, value))
    }
}

type Service = StreamableHttpService<McpTest, LocalSessionManager>;

/// Binds `addr`, prints `listening http://ADDR/mcp` on stdout, and serves until killed.
pub async fn serve(
    addr: SocketAddr,
    shared: Arc<Shared>,
    required: Required,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening http://{local}{MCP_PATH}")
        .and_then(|()| stdout.flush())
        .context("cannot print the address")?;
    drop(stdout);

    let service: Service = StreamableHttpService::new(
        move || Ok(McpTest::new(shared.clone())),
        Arc::default(),
        StreamableHttpServerConfig::default(),
    );
    let required = Arc::new(required);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // A failed accept (out of descriptors, a reset) ends one connection, not the server.
                eprintln!("keel-mcptest: accept failed: {err}");
                continue;
            }
        };
        let service = service.clone();
        let required = required.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |request: Request<Incoming>| {
                let service = service.clone();
                let required = required.clone();
                async move { Ok::<_, Infallible>(route(&service, &required, request).await) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handle)
                .await;
            if let Err(err) = served {
                eprintln!("keel-mcptest: connection from {peer}: {err}");
            }
        });
    }
}

async fn route(
    service: &Service,
    required: &Required,
    request: Request<Incoming>,
) -> Response<BoxBody<Bytes, Infallible>> {
    if request.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "not found");
    }
    if !required.allows(&request) {
        let mut response = plain(StatusCode::UNAUTHORIZED, "unauthorized");
        if required.bearer.is_some() {
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
        }
        return response;
    }
    service.handle(request).await
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
