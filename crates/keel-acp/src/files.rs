//! The editor's files: when the client offers both `fs/read_text_file` and
//! `fs/write_text_file`, each session's `read`, `write` and `edit` tools move their text
//! through it (unsaved buffers are seen, writes land in the editor). Both are needed: an
//! edit that read the buffer must write it back to the same place.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};
use async_trait::async_trait;
use keel_protocol::SessionId;
use keel_runtime::EditorProvider;
use keel_runtime::services::{Editor, EditorError, EditorFiles};

/// How long the editor may take to read or write one file.
const EDITOR_TIMEOUT: Duration = Duration::from_secs(60);

/// Lends every session of the connection what the editor offers: its files (both `fs/*`
/// methods) and its terminals.
pub struct Lender {
    /// The connection to the editor.
    pub connection: ConnectionTo<Client>,
    /// Whether the editor reads and writes files for keel.
    pub files: bool,
    /// The relays' socket, when the editor offers terminals.
    pub relays: Option<Arc<crate::terminal::Relays>>,
    /// Finds the connection's sessions.
    pub find: crate::terminal::FindSession,
}

impl EditorProvider for Lender {
    fn editor(&self, session: &SessionId) -> Option<Editor> {
        self.files.then(|| {
            Editor(Arc::new(SessionFiles {
                connection: self.connection.clone(),
                session: session.to_string(),
            }))
        })
    }

    fn terminal(&self, session: &SessionId) -> Option<keel_runtime::services::Terminal> {
        let relays = self.relays.clone()?;
        Some(keel_runtime::services::Terminal(Arc::new(
            crate::terminal::SessionTerminals {
                relays,
                connection: self.connection.clone(),
                session: session.to_string(),
                find: self.find.clone(),
            },
        )))
    }
}

struct SessionFiles {
    connection: ConnectionTo<Client>,
    session: String,
}

#[async_trait]
impl EditorFiles for SessionFiles {
    async fn read_text(&self, path: &Path) -> Result<String, EditorError> {
        let request = ReadTextFileRequest::new(self.session.clone(), path);
        let sent = self.connection.send_request(request).block_task();
        match tokio::time::timeout(EDITOR_TIMEOUT, sent).await {
            Ok(Ok(response)) => Ok(response.content),
            Ok(Err(error)) => Err(EditorError::Refused(error.message)),
            Err(_) => Err(EditorError::Timeout(EDITOR_TIMEOUT.as_secs())),
        }
    }

    async fn write_text(&self, path: &Path, content: &str) -> Result<(), EditorError> {
        let request = WriteTextFileRequest::new(self.session.clone(), path, content);
        let sent = self.connection.send_request(request).block_task();
        match tokio::time::timeout(EDITOR_TIMEOUT, sent).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(EditorError::Refused(error.message)),
            Err(_) => Err(EditorError::Timeout(EDITOR_TIMEOUT.as_secs())),
        }
    }
}
