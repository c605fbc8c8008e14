//! `/feedback [FILE]`: `keel feedback` from inside a session. The bundle of the session
//! (counts and ids, never text) goes to FILE, else to `$KEEL_HOME/feedback/`, and the
//! answer names the path and what the bundle holds.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{CommandInfo, SessionId};
use keel_runtime::extension::{
    CommandError, CommandSource, Expansion, Extension, ExtensionApi, ExtensionError, HostControl,
};

/// Id of the extension.
pub const ID: &str = "feedback";

/// The folder of bundles in `$KEEL_HOME`.
const FOLDER: &str = "feedback";

/// Offers `/feedback`.
pub struct FeedbackCommand;

impl Extension for FeedbackCommand {
    fn id(&self) -> &str {
        ID
    }

    fn description(&self) -> Option<&str> {
        Some("/feedback: a bundle about the session for a maintainer, with none of its text")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let host = api.host();
        api.register_commands(Arc::new(Command {
            control: host.control.clone(),
            keel_home: host.keel_home.clone(),
            cwd: host.cwd.clone(),
        }))
    }
}

struct Command {
    control: HostControl,
    keel_home: Option<PathBuf>,
    cwd: PathBuf,
}

impl Command {
    async fn write(&self, session: &SessionId, arguments: &str) -> Result<String, CommandError> {
        let runtime = self
            .control
            .runtime()
            .ok_or_else(|| CommandError::refused("keel is shutting down"))?;
        let store = runtime.store();
        let path = match arguments.trim() {
            "" => {
                let Some(home) = &self.keel_home else {
                    return Err(CommandError::Usage(
                        "keel has no home folder here: name a file, as in `/feedback bundle.json`"
                            .into(),
                    ));
                };
                let folder = home.join(FOLDER);
                std::fs::create_dir_all(&folder).map_err(CommandError::failed)?;
                folder.join(format!(
                    "{}-{}.json",
                    session.as_str(),
                    keel_protocol::now_ms()
                ))
            }
            typed => self.cwd.join(typed),
        };
        let sessions = keel_runtime::storage::sessions_dir(store.path());
        let bundle = super::collect(store, session, &sessions)
            .await
            .map_err(CommandError::failed)?;
        super::write(&bundle, &path).map_err(|error| {
            CommandError::refused(format!("cannot write {}: {error}", path.display()))
        })?;
        let secrets = keel_tools::redact::process_secrets();
        let preview = keel_tools::redact::redact(&super::preview(&bundle), &secrets).text;
        Ok(format!(
            "Wrote the feedback bundle to {} ({} session{}): counts and ids only, no message \
             text, arguments, output, file contents or names. Attach it to an issue if you \
             like.\n\n{}",
            path.display(),
            bundle.sessions.len(),
            if bundle.sessions.len() == 1 { "" } else { "s" },
            preview.trim_end()
        ))
    }
}

#[async_trait]
impl CommandSource for Command {
    fn commands(&self) -> Vec<CommandInfo> {
        vec![CommandInfo {
            name: "feedback".into(),
            description: "write a bundle about this session for a maintainer (no text, no code)"
                .into(),
            argument_hint: Some("[file]".into()),
            source: ID.into(),
        }]
    }

    async fn run(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        if name != "feedback" {
            return None;
        }
        Some(self.write(session, arguments).await.map(Expansion::Reply))
    }
}
