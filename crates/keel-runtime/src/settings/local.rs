//! Local model servers (Ollama, LM Studio) in the model's resolution: the window a local
//! model really gets, and, with no model named and no key anywhere, the first local server
//! that has a model.

use keel_llm::local::{self, Kind};
use keel_llm::registry::{Registry, Resolved};

/// The local providers asked when no key is set, in this order.
const LOCAL_PROVIDERS: &[&str] = &["ollama", "lmstudio"];

/// Gives a model of a local provider that the registry does not list the window its server
/// applies (instead of the default assumed for unknown models), when the server says.
pub(super) fn apply_window(resolved: &mut Resolved) {
    let Some(kind) = Kind::of_provider(&resolved.entry.provider) else {
        return;
    };
    if resolved.warning.is_none() {
        return; // The registry (or the user's config) lists it: that holds.
    }
    let Some(address) = local::loopback(&resolved.entry.base_url) else {
        return;
    };
    match local::window(kind, address, &resolved.entry.id) {
        Some(window) => {
            set_window(resolved, window);
            resolved.warning = None;
        }
        None => {
            resolved.warning = Some(format!(
                "nothing at {address} said what window `{}` gets (is the server running and \
                 the model there?); assuming {} tokens",
                resolved.entry.id, resolved.entry.context_window
            ));
        }
    }
}

/// The first local server that answers with a model, and that model with its window.
pub(super) fn find(registry: &Registry) -> Option<(Resolved, String)> {
    LOCAL_PROVIDERS.iter().find_map(|provider| {
        let kind = Kind::of_provider(provider)?;
        let base = registry.resolve(provider, "-").ok()?.entry.base_url;
        let address = local::loopback(&base)?;
        let model = local::models(kind, address)?.into_iter().next()?;
        let mut resolved = registry.resolve(provider, &model.id).ok()?;
        let window = model
            .window
            .or_else(|| local::window(kind, address, &model.id));
        let said = match window {
            Some(window) => {
                set_window(&mut resolved, window);
                format!("its window is {window} tokens")
            }
            None => format!(
                "its window is not known until it loads; assuming {}",
                resolved.entry.context_window
            ),
        };
        Some((
            resolved,
            format!(
                "{provider}/{} from the server at {address} ({said})",
                model.id
            ),
        ))
    })
}

/// `window` as the model's context, and its answers kept to at most half of it.
fn set_window(resolved: &mut Resolved, window: u32) {
    resolved.entry.context_window = window;
    resolved.entry.max_output = resolved.entry.max_output.min(window / 2).max(1);
}
