//! One test per registry rule.

use std::sync::{Arc, Mutex, OnceLock};

use keel_agent::ToolOutput;
use keel_protocol::SessionId;
use keel_runtime::extension::table::{HostHooks, Seam, TABLE, counts, mount};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionBuilder, ExtensionError, ExtensionEvent, ExtensionState,
    Hook, Lifecycle, Overlay, Profile, ProfileEntry, Registry, ReminderData, ReminderMode,
    ReminderProvider, TurnScope, hook_extension, prompt_extension, reminder_extension,
    tool_extension,
};
use pretty_assertions::assert_eq;

use crate::support::{Recorder, Tagger, call, context, scope, tool};

fn ready(entries: Vec<ProfileEntry>, host: Vec<Arc<dyn Extension>>) -> Registry {
    let registry = Registry::new(Profile::new(entries, host).unwrap());
    registry.initialize().unwrap();
    registry
}

fn tool_names(registry: &Registry, scope: &TurnScope) -> Vec<String> {
    registry
        .assemble_turn(scope)
        .unwrap()
        .tools
        .iter()
        .map(|t| t.definition().name.clone())
        .collect()
}

/// What the registry looked like: its lifecycle and every extension's state.
type Seen = (Lifecycle, Vec<(String, ExtensionState)>);

/// Records the registry's state as its own init sees it.
struct Watcher {
    registry: Arc<OnceLock<Registry>>,
    seen: Arc<Mutex<Option<Seen>>>,
}

impl Extension for Watcher {
    fn id(&self) -> &str {
        "watcher"
    }

    fn init(&self, _api: &ExtensionApi) -> Result<(), ExtensionError> {
        let registry = self.registry.get().unwrap();
        *self.seen.lock().unwrap() = Some((registry.lifecycle(), registry.states()));
        Ok(())
    }
}

#[test]
fn the_lifecycle_goes_new_initializing_ready() {
    let cell = Arc::new(OnceLock::new());
    let seen = Arc::new(Mutex::new(None));
    let registry = Registry::new(
        Profile::new(
            vec![
                ProfileEntry::on(Arc::new(Watcher {
                    registry: cell.clone(),
                    seen: seen.clone(),
                })),
                ProfileEntry::on(tool_extension("later", vec![tool("t", "t")])),
            ],
            Vec::new(),
        )
        .unwrap(),
    );
    cell.set(registry.clone()).unwrap();
    assert_eq!(registry.lifecycle(), Lifecycle::New);
    assert_eq!(
        registry.states(),
        vec![
            ("watcher".to_owned(), ExtensionState::New),
            ("later".to_owned(), ExtensionState::New)
        ]
    );
    registry.initialize().unwrap();
    assert_eq!(
        seen.lock().unwrap().clone().unwrap(),
        (
            Lifecycle::Initializing,
            vec![
                ("watcher".to_owned(), ExtensionState::Initializing),
                ("later".to_owned(), ExtensionState::New)
            ]
        )
    );
    assert_eq!(registry.lifecycle(), Lifecycle::Ready);
    assert_eq!(registry.revision(), 1);
    assert!(matches!(
        registry.initialize(),
        Err(ExtensionError::NotReady("ready"))
    ));
}

struct Failing;

impl Extension for Failing {
    fn id(&self) -> &str {
        "failing"
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.register_tool(tool("half", "registered before the failure"))?;
        Err(ExtensionError::Invalid {
            extension: "failing".into(),
            reason: "no licence".into(),
        })
    }
}

#[test]
fn a_failed_init_fails_the_registry_and_it_is_never_used() {
    let registry = Registry::new(
        Profile::new(
            vec![
                ProfileEntry::on(tool_extension("fine", vec![tool("a", "a")])),
                ProfileEntry::on(Arc::new(Failing)),
                ProfileEntry::on(tool_extension("never", vec![tool("b", "b")])),
            ],
            Vec::new(),
        )
        .unwrap(),
    );
    let error = registry.initialize().unwrap_err();
    assert_eq!(error.code(), "extension_init_failed");
    assert!(error.to_string().contains("no licence"), "{error}");
    assert_eq!(registry.lifecycle(), Lifecycle::Failed);
    let states = registry.states();
    assert_eq!(states[0].1, ExtensionState::Ready);
    assert!(
        matches!(&states[1].1, ExtensionState::Failed(reason) if reason.contains("no licence"))
    );
    assert_eq!(
        states[2].1,
        ExtensionState::New,
        "init stops at the first failure"
    );
    let refused = registry.assemble_turn(&scope("s-1", "t-1")).err().unwrap();
    assert!(
        matches!(refused, ExtensionError::NotReady("failed")),
        "{refused}"
    );
}

/// Keeps the api it was given, to try to use it after init.
struct Hoarder {
    kept: Arc<Mutex<Option<ExtensionApi>>>,
}

impl Extension for Hoarder {
    fn id(&self) -> &str {
        "hoarder"
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        *self.kept.lock().unwrap() = Some(api.clone());
        api.register_tool(tool("early", "in time"))
    }
}

#[test]
fn a_registration_after_init_is_refused() {
    let kept = Arc::new(Mutex::new(None));
    let registry = ready(
        vec![ProfileEntry::on(Arc::new(Hoarder { kept: kept.clone() }))],
        Vec::new(),
    );
    let api = kept.lock().unwrap().clone().unwrap();
    let late = api.register_tool(tool("late", "too late")).unwrap_err();
    assert_eq!(
        late,
        ExtensionError::OutsideInit {
            extension: "hoarder".into(),
            what: "register a tool"
        }
    );
    assert_eq!(
        api.contribute_system_prompt("more").unwrap_err().code(),
        "extension_outside_init"
    );
    assert_eq!(tool_names(&registry, &scope("s-1", "t-1")), ["early"]);
}

#[test]
fn two_extensions_with_the_same_tool_name_fail_assembly() {
    let registry = ready(
        vec![
            ProfileEntry::on(tool_extension("one", vec![tool("grep", "mine")])),
            ProfileEntry::on(
                ExtensionBuilder::new("two")
                    .tool_factory(Arc::new(|_| vec![tool("grep", "yours")]))
                    .build(),
            ),
        ],
        Vec::new(),
    );
    let error = registry.assemble_turn(&scope("s-1", "t-1")).err().unwrap();
    assert_eq!(
        error,
        ExtensionError::DuplicateTool {
            tool: "grep".into(),
            first: "one".into(),
            second: "two".into()
        }
    );
    assert_eq!(
        registry.in_flight().len(),
        0,
        "a failed assembly holds no lease"
    );
    let duplicate_id = Profile::new(
        vec![
            ProfileEntry::on(tool_extension("same", Vec::new())),
            ProfileEntry::on(tool_extension("same", Vec::new())),
        ],
        Vec::new(),
    )
    .err()
    .unwrap();
    assert_eq!(duplicate_id, ExtensionError::DuplicateId("same".into()));
}

struct Block(&'static str);

impl ReminderProvider for Block {
    fn id(&self) -> &str {
        "block"
    }

    fn reminder(&self, _data: &ReminderData<'_>) -> Option<String> {
        Some(format!("<system-reminder>\n{}\n</system-reminder>", self.0))
    }
}

struct Broken;

impl ReminderProvider for Broken {
    fn id(&self) -> &str {
        "broken"
    }

    fn reminder(&self, _data: &ReminderData<'_>) -> Option<String> {
        Some("<system-reminder>one</system-reminder><system-reminder>two".into())
    }
}

/// The reminders of one round of `registry`'s turn for `scope`.
fn rendered(
    registry: &Registry,
    scope: &TurnScope,
) -> Result<keel_runtime::extension::reminders::Rendered, ExtensionError> {
    let caps = registry.assemble_turn(scope)?;
    let fired = std::collections::BTreeMap::new();
    let data = ReminderData::new(scope, 1, &[], &[], &fired);
    caps.render_reminders(&data, ReminderMode::All)
}

#[test]
fn reminders_come_highest_priority_first_and_must_be_one_block() {
    let registry = ready(
        vec![
            ProfileEntry::on(reminder_extension("low", 1, Arc::new(Block("low")))),
            ProfileEntry::on(reminder_extension("high", 10, Arc::new(Block("high")))),
            ProfileEntry::on(reminder_extension(
                "also-low",
                1,
                Arc::new(Block("also low")),
            )),
        ],
        Vec::new(),
    );
    let reminders = rendered(&registry, &scope("s-1", "t-1")).unwrap().blocks;
    assert_eq!(
        reminders,
        [
            "<system-reminder>\nhigh\n</system-reminder>",
            "<system-reminder>\nlow\n</system-reminder>",
            "<system-reminder>\nalso low\n</system-reminder>"
        ]
    );
    let broken = ready(
        vec![ProfileEntry::on(reminder_extension(
            "broken",
            5,
            Arc::new(Broken),
        ))],
        Vec::new(),
    );
    let error = rendered(&broken, &scope("s-1", "t-1")).err().unwrap();
    assert_eq!(error.code(), "extension_invalid");
    assert!(error.to_string().contains("broken"), "{error}");
}

#[test]
fn extensions_switch_per_session_and_a_switch_during_assembly_waits_for_the_next() {
    let cell: Arc<OnceLock<Registry>> = Arc::new(OnceLock::new());
    let switcher = {
        let cell = cell.clone();
        ExtensionBuilder::new("switcher")
            .tool_factory(Arc::new(move |scope: &TurnScope| {
                // Switches the web tool off for this session in the middle of assembling.
                cell.get()
                    .unwrap()
                    .set_enabled(&scope.session_id, "web", false)
                    .unwrap();
                vec![tool("switch", "switch")]
            }))
            .build()
    };
    let registry = ready(
        vec![
            ProfileEntry::on(switcher),
            ProfileEntry::on(tool_extension("web", vec![tool("web_fetch", "web")])),
            ProfileEntry::off(tool_extension("extra", vec![tool("extra", "extra")])),
        ],
        Vec::new(),
    );
    cell.set(registry.clone()).unwrap();
    let a = scope("s-a", "t-1");
    assert_eq!(tool_names(&registry, &a), ["switch", "web_fetch"]);
    assert_eq!(
        tool_names(&registry, &a),
        ["switch"],
        "the next assembly sees it"
    );
    registry
        .set_enabled(&SessionId::new("s-b"), "extra", true)
        .unwrap();
    let b = scope("s-b", "t-2");
    assert_eq!(tool_names(&registry, &b), ["switch", "web_fetch", "extra"]);
    assert!(!registry.is_enabled(&SessionId::new("s-a"), "extra"));
    let unknown = registry
        .set_enabled(&SessionId::new("s-a"), "nope", true)
        .unwrap_err();
    assert_eq!(unknown.code(), "extension_unknown_id");
}

#[tokio::test]
async fn hooks_are_bound_to_their_turn() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let shared: Arc<dyn keel_agent::runner::BeforeToolCallHook> = Arc::new(Recorder {
        name: "shared",
        log: log.clone(),
    });
    let per_turn_log = log.clone();
    let registry = ready(
        vec![ProfileEntry::on(
            ExtensionBuilder::new("hooks")
                .hook(Hook::BeforeToolCall(shared))
                .hook_per_turn(
                    ExtensionEvent::BeforeToolCall,
                    Arc::new(move |scope: &TurnScope| {
                        let name: &'static str = if scope.turn_id.as_str() == "t-1" {
                            "first"
                        } else {
                            "second"
                        };
                        Hook::BeforeToolCall(Arc::new(Recorder {
                            name,
                            log: per_turn_log.clone(),
                        }))
                    }),
                )
                .build(),
        )],
        Vec::new(),
    );
    let one = registry.assemble_turn(&scope("s-1", "t-1")).unwrap();
    let two = registry.assemble_turn(&scope("s-2", "t-2")).unwrap();
    for hook in &one.hooks.before_tool_call {
        hook.before_tool_call(&context("s-1", "t-1"), &call("x"))
            .await
            .unwrap();
    }
    for hook in &two.hooks.before_tool_call {
        hook.before_tool_call(&context("s-2", "t-2"), &call("x"))
            .await
            .unwrap();
    }
    // Turn one's hooks refuse a call for turn two: no cross-talk.
    let foreign = one.hooks.before_tool_call[0]
        .before_tool_call(&context("s-2", "t-2"), &call("x"))
        .await
        .unwrap_err();
    assert!(
        foreign.message.contains("bound to turn t-1"),
        "{}",
        foreign.message
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["shared@t-1", "first@t-1", "shared@t-2", "second@t-2"]
    );
}

#[test]
fn a_per_turn_factory_must_build_the_event_it_registered_for() {
    let registry = ready(
        vec![ProfileEntry::on(
            ExtensionBuilder::new("confused")
                .hook_per_turn(
                    ExtensionEvent::AfterToolCall,
                    Arc::new(|_scope: &TurnScope| {
                        Hook::BeforeToolCall(Arc::new(Recorder {
                            name: "wrong",
                            log: Arc::default(),
                        }))
                    }),
                )
                .build(),
        )],
        Vec::new(),
    );
    let error = registry.assemble_turn(&scope("s-1", "t-1")).err().unwrap();
    assert!(
        error
            .to_string()
            .contains("registered for after_tool_call was built for before_tool_call"),
        "{error}"
    );
}

#[test]
fn overlays_disable_enable_and_replace_and_refuse_unknown_ids() {
    let base = || {
        Profile::new(
            vec![
                ProfileEntry::on(tool_extension("a", vec![tool("a", "original")])),
                ProfileEntry::off(tool_extension("b", vec![tool("b", "b")])),
            ],
            vec![tool_extension("host.x", vec![tool("x", "host")])],
        )
        .unwrap()
    };
    let profile = base()
        .overlay(
            &[
                Overlay::Enable("b".into()),
                Overlay::Replace(tool_extension("a", vec![tool("a", "replacement")])),
            ],
            "test",
        )
        .unwrap();
    assert_eq!(
        profile.ids(),
        vec![
            ("a".to_owned(), true, false),
            ("b".to_owned(), true, false),
            ("host.x".to_owned(), true, true)
        ]
    );
    let registry = Registry::new(profile);
    registry.initialize().unwrap();
    let caps = registry.assemble_turn(&scope("s-1", "t-1")).unwrap();
    let descriptions: Vec<&str> = caps
        .tools
        .iter()
        .map(|t| t.definition().description.as_str())
        .collect();
    assert_eq!(descriptions, ["replacement", "b", "host"]);

    let disabled = base()
        .overlay(&[Overlay::Disable("a".into())], "test")
        .unwrap();
    assert_eq!(disabled.ids()[0], ("a".to_owned(), false, false));

    let unknown = base()
        .overlay(&[Overlay::Disable("ghost".into())], "the profile")
        .err()
        .unwrap();
    assert_eq!(
        unknown,
        ExtensionError::UnknownId {
            id: "ghost".into(),
            place: "the profile".into()
        }
    );
    let replaced = base()
        .overlay(
            &[Overlay::Replace(tool_extension("host.x", Vec::new()))],
            "test",
        )
        .err()
        .unwrap();
    assert_eq!(replaced, ExtensionError::HostBuiltin("host.x".into()));
    let switched_off = base()
        .overlay(&[Overlay::Disable("host.x".into())], "test")
        .err()
        .unwrap();
    assert_eq!(switched_off, ExtensionError::HostBuiltin("host.x".into()));
}

#[tokio::test]
async fn host_builtins_come_last_and_see_every_rewrite() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tagger = |tag: &'static str| -> Hook {
        Hook::AfterToolCall(Arc::new(Tagger {
            tag,
            seen: seen.clone(),
        }))
    };
    // The host extension is listed first in code but mounts last.
    let registry = ready(
        vec![
            ProfileEntry::on(hook_extension("one", vec![tagger("one")])),
            ProfileEntry::on(hook_extension("two", vec![tagger("two")])),
        ],
        vec![hook_extension("host.audit", vec![tagger("host")])],
    );
    let caps = registry.assemble_turn(&scope("s-1", "t-1")).unwrap();
    assert_eq!(caps.lease.extension_ids(), ["one", "two", "host.audit"]);
    let mut output = ToolOutput::text("result");
    for hook in &caps.hooks.after_tool_call {
        output = hook
            .after_tool_call(&context("s-1", "t-1"), &call("x"), output)
            .await
            .unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["result", "result+one", "result+one+two"],
        "the host's hook saw both rewrites"
    );
    let cannot = registry
        .set_enabled(&SessionId::new("s-1"), "host.audit", false)
        .unwrap_err();
    assert_eq!(cannot.code(), "extension_host_builtin");
}

#[test]
fn helper_factories_build_each_kind_without_init_code() {
    let registry = ready(
        vec![
            ProfileEntry::on(tool_extension("tools", vec![tool("t1", "t1")])),
            ProfileEntry::on(prompt_extension(
                "prompts",
                Some("Be brief.".into()),
                Some("Context: tests.".into()),
            )),
            ProfileEntry::on(reminder_extension("reminders", 0, Arc::new(Block("r")))),
            ProfileEntry::on(hook_extension(
                "hooks",
                vec![Hook::BeforeToolCall(Arc::new(Recorder {
                    name: "h",
                    log: Arc::default(),
                }))],
            )),
            ProfileEntry::on(
                ExtensionBuilder::new("combined")
                    .description("all of it")
                    .tool(tool("t2", "t2"))
                    .system_prompt("Cite sources.")
                    .system_prompt_fn(Arc::new(|scope: &TurnScope| {
                        Some(format!("Session {}.", scope.session_id))
                    }))
                    .user_prompt_prefix("Prefix.")
                    .build(),
            ),
        ],
        Vec::new(),
    );
    let caps = registry.assemble_turn(&scope("s-1", "t-1")).unwrap();
    let names: Vec<String> = caps
        .tools
        .iter()
        .map(|t| t.definition().name.clone())
        .collect();
    assert_eq!(names, ["t1", "t2"]);
    assert_eq!(
        caps.system_prompt,
        ["Be brief.", "Cite sources.", "Session s-1."]
    );
    assert_eq!(caps.user_prefixes, ["Context: tests.", "Prefix."]);
    let fired = std::collections::BTreeMap::new();
    let scope = scope("s-1", "t-1");
    let data = ReminderData::new(&scope, 1, &[], &[], &fired);
    assert_eq!(
        caps.render_reminders(&data, ReminderMode::All)
            .unwrap()
            .blocks,
        ["<system-reminder>\nr\n</system-reminder>"]
    );
    assert_eq!(caps.hooks.before_tool_call.len(), 1);
}

#[test]
fn a_lease_keeps_its_revision_while_new_turns_see_the_new_one() {
    let profile = |label: &str| {
        Profile::new(
            vec![ProfileEntry::on(tool_extension(
                "plugin",
                vec![tool("plugin_tool", label)],
            ))],
            Vec::new(),
        )
        .unwrap()
    };
    let registry = Registry::new(profile("version 1"));
    registry.initialize().unwrap();
    let running = registry.lease(&SessionId::new("s-1")).unwrap();
    assert_eq!(
        registry.in_flight().into_iter().collect::<Vec<_>>(),
        [(1, 1)]
    );
    assert_eq!(registry.reload(profile("version 2")).unwrap(), 2);
    // The running execution assembles from what it leased…
    let old = running.assemble(&scope("s-1", "t-1")).unwrap();
    assert_eq!(old.revision, 1);
    assert_eq!(old.tools[0].definition().description, "version 1");
    // …while a new turn gets the new revision.
    let new = registry.assemble_turn(&scope("s-1", "t-2")).unwrap();
    assert_eq!(new.revision, 2);
    assert_eq!(new.tools[0].definition().description, "version 2");
    assert_eq!(
        registry.in_flight().into_iter().collect::<Vec<_>>(),
        [(1, 1), (2, 1)]
    );
    drop(old);
    assert_eq!(
        registry.in_flight().into_iter().collect::<Vec<_>>(),
        [(2, 1)]
    );
    drop(new);
    assert!(registry.in_flight().is_empty());
}

#[test]
fn a_failed_reload_keeps_the_current_revision() {
    let registry = ready(
        vec![ProfileEntry::on(tool_extension(
            "plugin",
            vec![tool("p", "v1")],
        ))],
        Vec::new(),
    );
    let error = registry
        .reload(Profile::new(vec![ProfileEntry::on(Arc::new(Failing))], Vec::new()).unwrap())
        .unwrap_err();
    assert_eq!(error.code(), "extension_init_failed");
    assert_eq!(registry.revision(), 1);
    assert_eq!(tool_names(&registry, &scope("s-1", "t-1")), ["p"]);
}

#[test]
fn one_table_maps_every_event_to_its_seam() {
    let hook_for = |event: ExtensionEvent| -> Hook {
        struct Nothing;
        #[async_trait::async_trait]
        impl keel_runtime::extension::TurnStartHook for Nothing {
            async fn turn_start(&self, _: &TurnScope) -> Result<(), keel_agent::HookError> {
                Ok(())
            }
        }
        #[async_trait::async_trait]
        impl keel_runtime::extension::TurnEndHook for Nothing {
            async fn turn_end(
                &self,
                _: &TurnScope,
                _: &keel_protocol::TurnOutcome,
            ) -> Result<(), keel_agent::HookError> {
                Ok(())
            }
        }
        match event {
            ExtensionEvent::TurnStart => Hook::TurnStart(Arc::new(Nothing)),
            ExtensionEvent::TurnEnd => Hook::TurnEnd(Arc::new(Nothing)),
            ExtensionEvent::BeforeToolCall => Hook::BeforeToolCall(Arc::new(Recorder {
                name: "r",
                log: Arc::default(),
            })),
            ExtensionEvent::AfterToolCall => Hook::AfterToolCall(Arc::new(Tagger {
                tag: "t",
                seen: Arc::default(),
            })),
            other => crate::rules::runner_hook(other),
        }
    };
    assert_eq!(TABLE.len(), ExtensionEvent::ALL.len());
    for (event, seam) in TABLE {
        let mut runner = keel_agent::runner::TurnHooks::default();
        let mut host = HostHooks::default();
        let hook = hook_for(event);
        assert_eq!(hook.event(), event);
        mount(hook, &mut runner, &mut host);
        let filled: Vec<&str> = counts(&runner, &host)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, _)| name)
            .collect();
        let expected = match seam {
            Seam::Runner(name) => name,
            Seam::Host => event.name(),
        };
        assert_eq!(filled, [expected], "{event:?}");
        assert_ne!(expected, "on_tool_execution_start");
    }
}

/// A hook of the other runner kinds, for the table test.
pub(crate) fn runner_hook(event: ExtensionEvent) -> Hook {
    use keel_agent::runner::{
        AfterLlmCallHook, BeforeLlmAction, BeforeLlmCallHook, HistoryChangedHook,
        LlmCallPreparedHook, LlmCallView, StepEndHook, StepQueue,
    };
    use keel_agent::{HookError, ResponseDecision, StepSummary, TurnContext};
    struct Any;
    #[async_trait::async_trait]
    impl LlmCallPreparedHook for Any {
        async fn on_llm_call_prepared(
            &self,
            _: &TurnContext,
            _: &keel_llm::LlmRequest,
            _: &keel_agent::runner::RequestOrigin,
        ) -> Result<(), HookError> {
            Ok(())
        }
    }
    #[async_trait::async_trait]
    impl BeforeLlmCallHook for Any {
        async fn before_llm_call(&self, _: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
            Ok(BeforeLlmAction::Continue)
        }
    }
    #[async_trait::async_trait]
    impl AfterLlmCallHook for Any {
        async fn after_llm_call(
            &self,
            _: &TurnContext,
            _: &keel_protocol::AssistantMessage,
        ) -> Result<ResponseDecision, HookError> {
            Ok(ResponseDecision::Accept)
        }
    }
    #[async_trait::async_trait]
    impl HistoryChangedHook for Any {
        async fn on_history_changed(
            &self,
            _: &TurnContext,
            _: &[Arc<keel_protocol::Message>],
        ) -> Result<(), HookError> {
            Ok(())
        }
    }
    #[async_trait::async_trait]
    impl StepEndHook for Any {
        async fn on_step_end(
            &self,
            _: &TurnContext,
            _: &StepSummary,
            _: &StepQueue,
        ) -> Result<(), HookError> {
            Ok(())
        }
    }
    match event {
        ExtensionEvent::OnLlmCallPrepared => Hook::OnLlmCallPrepared(Arc::new(Any)),
        ExtensionEvent::BeforeLlmCall => Hook::BeforeLlmCall(Arc::new(Any)),
        ExtensionEvent::AfterLlmCall => Hook::AfterLlmCall(Arc::new(Any)),
        ExtensionEvent::OnHistoryChanged => Hook::OnHistoryChanged(Arc::new(Any)),
        _ => Hook::OnStepEnd(Arc::new(Any)),
    }
}
