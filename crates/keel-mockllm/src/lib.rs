//! A scripted model server on loopback for tests and benchmarks: the four wire APIs, faults,
//! request recording and the long benchmark workload.
//! It imports no workspace crate, so no keel code sits between a test and the bytes on the wire.
#![forbid(unsafe_code)]

pub mod encode;
pub mod script;
mod server;

pub use script::{Fault, Response, Script, ToolCall, Usage, workload};
pub use server::{
    LOCAL_MODEL, LOCAL_WINDOW, MockServer, RecordedRequest, RequestTiming, ServerOptions,
    TITLE_ANSWER, TITLE_REQUEST,
};

/// Mock servers for synchronous tests: a one-worker runtime of its own serves them, so a
/// test can start a server and then run a blocking client (a `keel` process) against it.
pub struct Background(tokio::runtime::Runtime);

impl Background {
    /// A runtime for servers.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?,
        ))
    }

    /// A server on 127.0.0.1 answering from the JSON script `script`.
    pub fn serve(&self, script: &str) -> std::io::Result<MockServer> {
        let script = Script::parse(script)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        self.start(script, ServerOptions::default())
    }

    /// A server for `script` with `options`.
    pub fn start(&self, script: Script, options: ServerOptions) -> std::io::Result<MockServer> {
        self.0.block_on(MockServer::start(script, options))
    }
}
