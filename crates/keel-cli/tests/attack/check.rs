//! The assertions on what keel let out: canaries in the model requests, keel's output and
//! the listener's log; connections; leftover processes; how keel ended; duplicate ids.

use serde_json::Value;

use crate::keel::{Exit, WATCHDOG};
use crate::run::{Call, Mode, Observed, Vector};
use crate::world::World;

/// The strings of a JSON value, one per line, so text split by JSON escapes is whole again.
fn strings_of(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push_str(k);
            out.push('\n');
            strings_of(v, out);
        }),
        _ => {}
    }
}

/// `text` plus the strings of each of its JSON lines.
fn unescaped(text: &str) -> String {
    let mut out = text.to_owned();
    out.push('\n');
    for line in text.lines() {
        if let Ok(value) = serde_json::from_str::<Value>(line) {
            strings_of(&value, &mut out);
        }
    }
    out
}

/// The recorded requests, without the provider key in the auth header (where it belongs).
fn requests_without_auth(requests: &str, key: &str) -> String {
    let mut out = String::new();
    for line in requests.lines() {
        let Ok(mut value) = serde_json::from_str::<Value>(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        if let Some(headers) = value.get_mut("headers").and_then(Value::as_object_mut) {
            for name in ["x-api-key", "authorization"] {
                let rightful = headers
                    .get(name)
                    .and_then(Value::as_str)
                    .is_some_and(|v| v == key || v.strip_prefix("Bearer ") == Some(key));
                if rightful {
                    headers.remove(name);
                }
            }
        }
        out.push_str(&value.to_string());
        out.push('\n');
        strings_of(&value, &mut out);
    }
    out
}

/// The assertions on what a run let out, whatever keel did with the vector:
/// (1) no canary in the model requests (beyond the provider key in its auth header) nor in
/// keel's stdout or stderr; (2) none in the listener's log, and in `plan` (or for a `quiet`
/// vector) no connection at all; (5) no process left running; (6) keel finished by itself:
/// not killed by a vector's signal, not hung, not left stopped; (7) calls sharing an id each
/// got their own item; (8) nothing was left waiting in keel's terminal (a `tty` vector).
/// (3) and (4), what changed on disk, are checked by [`crate::run::run_in`] around the run.
pub fn check(world: &World, vector: &Vector, mode: Mode, observed: &Observed) -> Vec<String> {
    let mut failures = Vec::new();
    let mut canaries: Vec<&crate::canary::Canary> = world.canaries.iter().collect();
    if vector.strict {
        canaries.extend(world.strict_canaries.iter());
    }
    let listened = String::from_utf8_lossy(&observed.listener.bytes).into_owned();
    let places = [
        (
            "(1) model requests",
            requests_without_auth(&observed.requests, &world.provider_key),
        ),
        ("(1) keel's stdout", unescaped(&observed.stdout)),
        (
            "(1) keel's session folder",
            unescaped(&observed.session_files),
        ),
        ("(1) keel's stderr", observed.stderr.clone()),
        ("(2) the listener's log", listened),
    ];
    for canary in &canaries {
        let found: Vec<(&str, String)> = places
            .iter()
            .filter_map(|(place, text)| canary.find_in(text).map(|f| (*place, f)))
            .collect();
        if let Some((_, first)) = found.first() {
            let wheres: Vec<&str> = found.iter().map(|(place, _)| *place).collect();
            failures.push(format!(
                "canary {} leaked to {}: {first}",
                canary.what,
                wheres.join(", ")
            ));
        }
    }
    let sent = requests_without_auth(&observed.requests, &world.provider_key);
    let vars = crate::run::Vars::new(world, 0, None);
    for text in vector.never_sent {
        let text = crate::run::fill(text, &vars, false);
        if sent.contains(&text) {
            failures.push(format!("(1) the model was sent {text:?}"));
        }
    }
    match vector.refused {
        Some((code, text)) => {
            if observed.exit != crate::keel::Exit::Code(code) || !observed.stderr.contains(text) {
                failures.push(format!(
                    "keel should have refused to start (exit {code}, saying `{text}`): {:?}, stderr {}",
                    observed.exit, observed.stderr
                ));
            }
            if !observed.requests.trim().is_empty() {
                failures
                    .push("keel called the model although it should have refused to start".into());
            }
        }
        // A slash command may answer without the model (`/help` has no extension command).
        None if observed.requests.trim().is_empty()
            && !vector.prompt.is_some_and(|p| p.starts_with('/')) =>
        {
            failures.push("harness: keel sent no request to the mock model".into());
        }
        None => {}
    }
    if mode == Mode::PlanLandlock {
        // Without namespaces a read-only command cannot be kept off the network: keel must
        // refuse every one, and say why.
        for result in observed.bash_results() {
            let refused = result.starts_with("Blocked by permissions")
                || result.starts_with("Duplicate tool call id")
                || result.contains("[denied")
                || result.contains("cannot be enforced here");
            if !refused {
                failures.push(format!(
                    "(8) a command ran in plan mode with Landlock alone instead of failing closed: {}",
                    result.chars().take(200).collect::<String>()
                ));
            }
        }
    }
    // Commands alone (no tool of keel's, no trusted hook or server that runs outside the
    // sandbox) behind the proxy reach nothing on the loopback: it is not an allowed host.
    let commands_only = !vector.trust
        && vector
            .steps
            .iter()
            .flat_map(|step| step.iter())
            .all(|call| matches!(call, Call::Sh(_) | Call::Bg(_) | Call::Wait(_)));
    let proxied = mode.proxied() && commands_only;
    if (mode.read_only() || vector.quiet || proxied)
        && (observed.listener.connections > 0 || observed.listener.datagrams > 0)
    {
        let who = if vector.quiet {
            "the vector"
        } else if proxied {
            "a command behind the proxy"
        } else {
            "plan mode"
        };
        failures.push(format!(
            "(2) {who} reached the listener: {} connection(s), {} datagram(s), {:?}",
            observed.listener.connections,
            observed.listener.datagrams,
            String::from_utf8_lossy(
                &observed.listener.bytes[..observed.listener.bytes.len().min(160)]
            )
        ));
    }
    if vector.degraded_outlives {
        let told = observed.stderr.contains("can outlive keel")
            || observed.stdout.contains("can outlive keel");
        if !observed.leftovers.is_empty() && !told {
            failures.push(
                "(5) keel ran without namespaces but did not say that a process can outlive it"
                    .into(),
            );
        }
    } else {
        for seen in &observed.leftovers {
            failures.push(format!(
                "(5) a process was left running (killed now): pid {} `{}`",
                seen.pid, seen.cmdline
            ));
        }
    }
    match observed.exit {
        Exit::Code(_) => {}
        // The suite killed keel itself: (6) does not apply.
        Exit::Signal(_) if observed.poked.is_some() => {}
        Exit::Signal(signal) => failures.push(format!(
            "(6) keel did not finish: killed by signal {signal}; stderr: {}",
            tail(&observed.stderr)
        )),
        Exit::Hung => failures.push(format!(
            "(6) keel did not finish within {WATCHDOG:?} and was killed; stderr: {}",
            tail(&observed.stderr)
        )),
    }
    if vector.same_ids {
        let calls: usize = vector.steps.iter().map(|s| s.len()).sum();
        let results = observed.tool_results();
        let ids: std::collections::BTreeSet<&String> = results.iter().map(|r| &r.0).collect();
        if results.len() != calls || ids.len() != calls {
            failures.push(format!(
                "(7) {calls} calls sharing one id gave {} completed item(s) with {} distinct id(s) (each call needs its own item, the second an error): {results:?}",
                results.len(),
                ids.len()
            ));
        }
    }
    if let Some(typed) = observed.typed.as_deref().filter(|t| !t.trim().is_empty()) {
        failures.push(format!(
            "(8) a command typed into keel's terminal, where the user's shell reads it once keel ends: {typed:?}"
        ));
    }
    if observed.was_stopped {
        failures
            .push("(6) keel was left stopped (SIGSTOP) by the vector; the suite resumed it".into());
    }
    failures
}

fn tail(text: &str) -> String {
    let start = text.len().saturating_sub(300);
    let mut start = start;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].replace('\n', " | ")
}
