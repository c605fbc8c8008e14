//! The MCP server: `ServerHandler` written out by hand (no macros) over the catalogs.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::state::Shared;
use crate::{catalog, tools};

/// One session's handler; all sessions share the same [`Shared`].
#[derive(Debug, Clone)]
pub struct McpTest {
    shared: Arc<Shared>,
}

impl McpTest {
    /// A handler over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl ServerHandler for McpTest {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                self.shared.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("A test server for keel's MCP client.")
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        tokio::time::sleep(self.shared.slow_start).await;
        context.peer.set_peer_info(request.clone());
        // What the client asked with, for tests to read.
        if let Some(dir) = &self.shared.state_dir
            && let Ok(json) = serde_json::to_vec(&request)
        {
            let _ = std::fs::write(dir.join("client.json"), json);
        }
        self.negotiate_initialize(&request)
    }

    // Roots belong to 2025-11-25; rmcp marks them deprecated for a later version.
    #[allow(deprecated)]
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // The client's roots, asked as a server would, for tests to read.
        let Some(dir) = self.shared.state_dir.clone() else {
            return;
        };
        let offers_roots = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !offers_roots {
            return;
        }
        let peer = context.peer.clone();
        tokio::spawn(async move {
            if let Ok(roots) = peer.list_roots().await
                && let Ok(json) = serde_json::to_vec(&roots)
            {
                let _ = std::fs::write(dir.join("roots.json"), json);
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list(&self.shared)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "mutate" {
            self.shared.mutate();
            // Sent before the answer, so a client that refetches on the answer sees the new
            // list too. Over HTTP rmcp routes it to the session's GET stream, not this call's.
            if let Err(err) = context.peer.notify_tool_list_changed().await {
                eprintln!("keel-mcptest: cannot send tools/list_changed: {err}");
            }
            let text = ContentBlock::text("mutated");
            return Ok(CallToolResult::success(vec![text]).into());
        }
        let args = request.arguments.unwrap_or_default();
        tools::call(&self.shared, &request.name, &args, context.ct.cancelled())
            .await
            .map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(catalog::resources()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        catalog::read(&request.uri).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(catalog::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        catalog::prompt(&request.name, request.arguments.as_ref()).map(Into::into)
    }
}
