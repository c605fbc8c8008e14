//! Where a sandboxed command's network leads: in `workspace-write`, the session's own
//! network namespace, whose one way out is keel's proxy (see [`crate::netproxy`]).

use std::sync::{Arc, OnceLock};

use keel_sandbox as sandbox;

use crate::netproxy::{PORT, Proxy};
use crate::{SandboxMode, ToolEnv};

/// The session's network: its namespace and the proxy that serves it.
pub(super) struct SessionNetwork {
    pub namespace: sandbox::NetworkNamespace,
    pub proxy: Arc<Proxy>,
}

/// What a command's network is.
pub(super) enum Access<'a> {
    /// The host's (full access; a configuration that allows every host; a system that
    /// cannot make a network namespace, which the degraded note says).
    Host,
    /// The session's namespace behind the proxy.
    Proxied(&'a SessionNetwork),
    /// None at all (`read-only`, blocked by configuration, or the session's network could
    /// not be made: closed rather than open).
    Blocked,
}

/// The network a command gets under `env`, making the session's on first use.
pub(super) fn access<'a>(env: &ToolEnv, slot: &'a OnceLock<Option<SessionNetwork>>) -> Access<'a> {
    if env.sandbox == SandboxMode::DangerFullAccess {
        return Access::Host;
    }
    if env.sandbox == SandboxMode::ReadOnly || env.sandbox_blocks_network {
        return Access::Blocked;
    }
    if env.network.allows_everything() {
        return Access::Host;
    }
    match &sandbox::support().namespaces {
        Ok(ns) if ns.network => {}
        // Landlock alone cannot route a command through a proxy.
        _ => return Access::Host,
    }
    let made = slot.get_or_init(|| {
        let (namespace, listener) = match sandbox::private_network(PORT) {
            Ok(made) => made,
            Err(error) => {
                tracing::warn!(%error, "commands get no network");
                return None;
            }
        };
        match Proxy::start(listener, env.network.clone(), env.network_asker.clone()) {
            Ok(proxy) => Some(SessionNetwork { namespace, proxy }),
            Err(error) => {
                tracing::warn!(%error, "the sandbox's proxy did not start; commands get no network");
                None
            }
        }
    });
    match made {
        Some(network) => Access::Proxied(network),
        None => Access::Blocked,
    }
}

/// Points a command's HTTP, HTTPS and SOCKS clients at the proxy; its own loopback (a
/// server it started) stays direct.
pub(super) fn use_proxy(vars: &mut Vec<(String, String)>) {
    vars.retain(|(key, _)| !key.to_ascii_lowercase().ends_with("_proxy"));
    let http = format!("http://127.0.0.1:{PORT}");
    let socks = format!("socks5h://127.0.0.1:{PORT}");
    for (key, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
    ] {
        vars.push((key.to_owned(), value.clone()));
        vars.push((key.to_ascii_lowercase(), value.clone()));
    }
    let local = "localhost,127.0.0.1,::1".to_owned();
    vars.push(("NO_PROXY".to_owned(), local.clone()));
    vars.push(("no_proxy".to_owned(), local));
}
