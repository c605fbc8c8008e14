//! `keel exec`: one turn, no interaction, output for scripts.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use keel_agent::runner::{TurnHooks, TurnHost, TurnInput, TurnRunner, TurnStart};
use keel_llm::ModelSpec;
use keel_llm::scripted::{ResponseSpec, ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    Message, ResponseChunk, RuntimeEvent, RuntimeEventBody, SessionId, ToolPhase, TurnId,
    TurnOutcome,
};
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

/// Arguments of `keel exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The prompt; `-` reads it from standard input.
    prompt: String,
    /// Answer from this JSON file of scripted responses instead of a model.
    #[arg(long, value_name = "FILE")]
    mock_script: Option<PathBuf>,
    /// Print every runtime event as one JSON line instead of the answer text.
    #[arg(long)]
    json: bool,
    /// System prompt.
    #[arg(long, default_value = "You are keel, a coding agent.")]
    system_prompt: String,
}

/// Runs `keel exec`; the exit code is 0 completed, 1 failed, 130 aborted.
pub async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let Some(script) = &args.mock_script else {
        bail!(
            "no model provider is configured yet; pass --mock-script FILE to answer from a scripted model"
        );
    };
    let text = std::fs::read_to_string(script)
        .with_context(|| format!("cannot read the mock script {}", script.display()))?;
    let specs: Vec<ResponseSpec> = serde_json::from_str(&text).with_context(|| {
        format!(
            "the mock script {} is not a JSON list of responses",
            script.display()
        )
    })?;
    let provider = ScriptedProvider::with_responses(specs.into_iter().map(ScriptedResponse::from));
    let prompt = if args.prompt == "-" {
        let mut input = String::new();
        tokio::io::stdin()
            .read_to_string(&mut input)
            .await
            .context("cannot read the prompt from standard input")?;
        input
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let host = Arc::new(ExecHost { json: args.json });
    let input = TurnInput {
        session_id: SessionId::generate(),
        turn_id: TurnId::generate(),
        model: ModelSpec::scripted(),
        stream_fn: Arc::new(provider),
        system_prompt: args.system_prompt,
        tools: Vec::new(),
        history: Vec::new(),
        start: TurnStart::Prompt(vec![Message::user_text(prompt)]),
        hooks: TurnHooks::default(),
        host,
        cancel,
        request_options: Default::default(),
        api_keys: None,
    };
    let result = TurnRunner::default().run_turn(input).await;
    Ok(match result.outcome {
        TurnOutcome::Completed => ExitCode::SUCCESS,
        TurnOutcome::Failed { code, message } => {
            if !args.json {
                eprintln!("keel: the turn failed ({code}): {message}");
            }
            ExitCode::from(1)
        }
        TurnOutcome::Aborted { reason } => {
            if !args.json {
                eprintln!(
                    "keel: aborted{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                );
            }
            ExitCode::from(130)
        }
        _ => ExitCode::FAILURE,
    })
}

/// Prints a turn's events: answer text to stdout, tool activity to stderr, or every
/// event as a JSON line.
struct ExecHost {
    json: bool,
}

#[async_trait]
impl TurnHost for ExecHost {
    async fn on_runtime_event(&self, event: RuntimeEvent) {
        if self.json {
            if let Ok(line) = serde_json::to_string(&event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
            return;
        }
        match event.body {
            RuntimeEventBody::ResponseChunk {
                chunk: ResponseChunk::Text { delta, .. },
                ..
            } => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(delta.as_bytes());
                let _ = out.flush();
            }
            RuntimeEventBody::ResponseChunk {
                chunk:
                    ResponseChunk::ToolExecution {
                        tool_name, phase, ..
                    },
                ..
            } => {
                let state = match phase {
                    ToolPhase::Started => "started",
                    ToolPhase::Succeeded => "done",
                    ToolPhase::Failed => "failed",
                    _ => "changed",
                };
                eprintln!("[tool {tool_name}: {state}]");
            }
            RuntimeEventBody::MessageCompleted { message, .. }
                if message.as_assistant().is_some_and(|a| !a.text().is_empty()) =>
            {
                println!();
            }
            _ => {}
        }
    }
}
