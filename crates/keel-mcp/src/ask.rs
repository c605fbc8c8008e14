//! Who answers a server's request for input. A request arrives on the connection, not on
//! the call it belongs to, so each call under way is recorded with its session; a request
//! goes to the user of the newest call's session through the runtime (never the model).
//! Where no one can be asked, `mcp.elicitation` answers: `ask` and `decline` decline,
//! `accept-defaults` fills a form with its defaults.
//!
//! A page to open (URL mode) is opened only after the user agreed, and only an `https`
//! page (or `http` on this machine) with no user name in it, its host shown first.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use keel_protocol::{Ask, Question, QuestionAnswer, SessionId, ToolCallId};
use keel_runtime::HostControl;
use keel_runtime::settings::extend::ElicitationPolicy;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::Value;

/// The routing of one manager's servers' requests for input.
#[derive(Clone)]
pub(crate) struct Asking {
    policy: ElicitationPolicy,
    /// The runtime, when there is one to ask through.
    control: Option<HostControl>,
    /// A front end asks the user.
    interactive: bool,
    calls: Arc<Mutex<Vec<Arc<CallSite>>>>,
    next: Arc<AtomicU64>,
}

/// A call under way, and the time its questions held it.
#[derive(Debug)]
pub(crate) struct CallSite {
    id: u64,
    server: String,
    session: SessionId,
    tool_call: ToolCallId,
    /// Questions of this call waiting for the user.
    open: AtomicUsize,
    /// Time spent waiting for the user, which the call's time limit does not count.
    waited: Mutex<Duration>,
}

impl CallSite {
    /// Whether a question of this call waits for the user.
    pub(crate) fn asking(&self) -> bool {
        self.open.load(Ordering::Acquire) > 0
    }

    /// Time its questions held it.
    pub(crate) fn waited(&self) -> Duration {
        *self.waited.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a call's record when the call ends, however it ends.
pub(crate) struct Registered {
    calls: Arc<Mutex<Vec<Arc<CallSite>>>>,
    pub(crate) site: Arc<CallSite>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|site| site.id != self.site.id);
    }
}

/// Where a call comes from: the session and tool call it runs for.
#[derive(Debug, Clone)]
pub struct CallOrigin {
    /// The session.
    pub session: SessionId,
    /// The tool call.
    pub tool_call: ToolCallId,
}

impl Asking {
    /// Routing under `policy`; `control` and `interactive` say whether anyone can be asked.
    pub(crate) fn new(
        policy: ElicitationPolicy,
        control: Option<HostControl>,
        interactive: bool,
    ) -> Self {
        Self {
            policy,
            control,
            interactive,
            calls: Arc::default(),
            next: Arc::default(),
        }
    }

    /// What keel offers servers: forms where they can be answered (by the user, or with
    /// defaults when the user opted in), pages only where the user can agree.
    pub(crate) fn capability(&self) -> Option<rmcp::model::ElicitationCapability> {
        let form = rmcp::model::ElicitationCapability::new()
            .with_form(rmcp::model::FormElicitationCapability::new());
        match self.policy {
            ElicitationPolicy::Decline => None,
            ElicitationPolicy::AcceptDefaults => Some(form),
            ElicitationPolicy::Ask if self.interactive && self.control.is_some() => {
                Some(form.with_url(rmcp::model::UrlElicitationCapability::new()))
            }
            ElicitationPolicy::Ask => None,
        }
    }

    /// Records a call of `server` for `origin` until the returned guard drops.
    pub(crate) fn register(&self, server: &str, origin: CallOrigin) -> Registered {
        let site = Arc::new(CallSite {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            server: server.to_owned(),
            session: origin.session,
            tool_call: origin.tool_call,
            open: AtomicUsize::new(0),
            waited: Mutex::new(Duration::ZERO),
        });
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(site.clone());
        Registered {
            calls: self.calls.clone(),
            site,
        }
    }

    /// The newest call of `server` under way.
    fn newest(&self, server: &str) -> Option<Arc<CallSite>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .find(|site| site.server == server)
            .cloned()
    }

    /// The call a request of `server` is asked for: its newest call under way, unless a
    /// question of that call already waits (one at a time, so a server cannot pile
    /// questions on the user, or fill keel's memory with them).
    fn route(&self, server: &str) -> Result<Arc<CallSite>, &'static str> {
        let site = self
            .newest(server)
            .ok_or("no call of it is under way, so no one can be asked")?;
        if site.asking() {
            return Err("its call already waits for an answer");
        }
        Ok(site)
    }

    /// The answer to `server`'s request.
    pub(crate) async fn answer(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let decline = || ElicitResult::new(ElicitationAction::Decline);
        let (message, ask) = match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(requested_schema).unwrap_or_default();
                if self.policy == ElicitationPolicy::AcceptDefaults {
                    return defaults(server, message, &schema);
                }
                match crate::elicit::form_of(&schema) {
                    Ok(form) => (message.clone(), Ask::Form(form)),
                    Err(why) => {
                        tracing::info!(server, %message, "declined an MCP server's form: {why}");
                        return decline();
                    }
                }
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => match page(url) {
                Ok(host) => (
                    message.clone(),
                    Ask::Url {
                        url: url.clone(),
                        host,
                    },
                ),
                Err(why) => {
                    tracing::info!(server, %message, %url, "declined an MCP server's page: {why}");
                    return decline();
                }
            },
            _ => return decline(),
        };
        if self.policy == ElicitationPolicy::Decline {
            tracing::info!(server, %message, "declined an MCP server's request for input (mcp.elicitation: decline)");
            return decline();
        }
        let Some(control) = &self.control else {
            tracing::info!(server, %message, "declined an MCP server's request for input: no one can be asked here");
            return decline();
        };
        let site = match self.route(server) {
            Ok(site) => site,
            Err(why) => {
                tracing::info!(server, %message, "declined an MCP server's request for input: {why}");
                return decline();
            }
        };
        let url = match &ask {
            Ask::Url { url, .. } => Some(url.clone()),
            Ask::Form(_) => None,
        };
        let question = Question {
            id: String::new(),
            server: server.to_owned(),
            tool_call_id: Some(site.tool_call.clone()),
            message: message.chars().take(2000).collect(),
            ask,
        };
        site.open.fetch_add(1, Ordering::AcqRel);
        let asked = Instant::now();
        let answer = control.ask(&site.session, question).await;
        *site.waited.lock().unwrap_or_else(PoisonError::into_inner) += asked.elapsed();
        site.open.fetch_sub(1, Ordering::AcqRel);
        match answer {
            Ok(QuestionAnswer::Accept { content, opened }) => {
                if let Some(url) = url {
                    // The user agreed to this page, its host shown: open it for them (the
                    // front end showed the address too, to copy where no browser opens),
                    // unless the front end opened it itself.
                    if opened {
                        return ElicitResult::new(ElicitationAction::Accept);
                    }
                    if let Err(why) = crate::auth::open_browser(&url) {
                        tracing::warn!(server, %url, "cannot open the browser: {why}");
                    }
                    return ElicitResult::new(ElicitationAction::Accept);
                }
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            Ok(QuestionAnswer::Decline) => decline(),
            Ok(QuestionAnswer::Cancel) => ElicitResult::new(ElicitationAction::Cancel),
            Err(no_one) => {
                tracing::info!(server, %message, "declined an MCP server's request for input: {no_one}");
                decline()
            }
        }
    }
}

/// A form answered with its defaults (`accept-defaults`), or declined.
fn defaults(server: &str, message: &str, schema: &Value) -> ElicitResult {
    match crate::elicit::answer(ElicitationPolicy::AcceptDefaults, schema) {
        crate::elicit::Answer::Accept(content) => {
            let content = Value::Object(content);
            tracing::warn!(server, %message, %content, "accepted an MCP server's form with its defaults (mcp.elicitation: accept-defaults)");
            ElicitResult::new(ElicitationAction::Accept).with_content(content)
        }
        crate::elicit::Answer::Decline(why) => {
            tracing::info!(server, %message, "declined an MCP server's form: {why}");
            ElicitResult::new(ElicitationAction::Decline)
        }
    }
}

/// The host of a page a server asks the user to open, when it may be offered at all: an
/// address discovery would reach too ([`crate::auth::net::web_address`]).
fn page(address: &str) -> Result<String, String> {
    let url = url::Url::parse(address).map_err(|e| format!("not an address: {e}"))?;
    crate::auth::net::web_address(&url)?;
    Ok(url.host_str().unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_web_pages_are_offered_and_their_real_host_is_shown() {
        assert_eq!(
            page("https://example.com/pay?x=1").as_deref(),
            Ok("example.com")
        );
        assert_eq!(page("http://127.0.0.1:9/cb").as_deref(), Ok("127.0.0.1"));
        for bad in [
            "https://github.com@evil.example/",
            "https://user:pw@example.com/",
            "http://example.com/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "not a url",
        ] {
            assert!(page(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_capability_is_offered_where_no_one_answers() {
        let asking = |policy, interactive| {
            Asking::new(policy, Some(HostControl::default()), interactive).capability()
        };
        assert!(asking(ElicitationPolicy::Ask, false).is_none());
        assert!(asking(ElicitationPolicy::Decline, true).is_none());
        let offered = asking(ElicitationPolicy::Ask, true).unwrap();
        assert!(offered.url.is_some() && offered.form.is_some());
        let defaults = asking(ElicitationPolicy::AcceptDefaults, false).unwrap();
        assert!(defaults.url.is_none() && defaults.form.is_some());
    }

    #[tokio::test]
    async fn a_request_with_no_call_under_way_is_declined() {
        let asking = Asking::new(ElicitationPolicy::Ask, Some(HostControl::default()), true);
        let request: ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "mode": "form", "message": "name?",
            "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}
        }))
        .unwrap();
        let result = asking.answer("s", request).await;
        assert_eq!(result.action, ElicitationAction::Decline);
    }

    #[test]
    fn a_call_with_a_question_open_gets_no_second_one() {
        let asking = Asking::new(ElicitationPolicy::Ask, Some(HostControl::default()), true);
        assert!(asking.route("s").unwrap_err().contains("no call"));
        let call = asking.register(
            "s",
            CallOrigin {
                session: SessionId::from("s-1"),
                tool_call: ToolCallId::from("c-1"),
            },
        );
        assert_eq!(asking.route("s").unwrap().id, call.site.id);
        call.site.open.fetch_add(1, Ordering::AcqRel);
        assert!(asking.route("s").unwrap_err().contains("already waits"));
        drop(call);
        assert!(asking.newest("s").is_none(), "an ended call is forgotten");
    }
}
