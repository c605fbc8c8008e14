//! Running untrusted futures (hooks, subscribers, tools' callbacks) so that an error, a
//! panic, a hang or an abort can never wedge the loop.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

/// How a guarded future ended.
#[derive(Debug)]
pub(crate) enum Guarded<T> {
    /// It finished.
    Done(T),
    /// It panicked or ran past its time limit; the text says which.
    Failed(String),
    /// The run was aborted while it was pending.
    Cancelled,
}

/// Awaits `future`, catching panics, bounding it by `limit`, and giving up on `cancel`.
pub(crate) async fn guard<T>(
    what: &str,
    future: impl Future<Output = T>,
    limit: Duration,
    cancel: Option<&CancellationToken>,
) -> Guarded<T> {
    let caught = AssertUnwindSafe(future).catch_unwind();
    let bounded = tokio::time::timeout(limit, caught);
    let outcome = match cancel {
        Some(cancel) => tokio::select! {
            biased;
            outcome = bounded => outcome,
            () = cancel.cancelled() => return Guarded::Cancelled,
        },
        None => bounded.await,
    };
    match outcome {
        Ok(Ok(value)) => Guarded::Done(value),
        Ok(Err(panic)) => Guarded::Failed(format!("{what} panicked: {}", panic_text(&*panic))),
        Err(_) => Guarded::Failed(format!(
            "{what} did not finish within {} s",
            limit.as_secs()
        )),
    }
}

/// The message of a panic payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn panics_become_failures() {
        let outcome = guard(
            "hook",
            async { panic!("boom") },
            Duration::from_secs(1),
            None,
        )
        .await;
        assert!(matches!(outcome, Guarded::<()>::Failed(text) if text == "hook panicked: boom"));
    }

    #[tokio::test(start_paused = true)]
    async fn hangs_are_bounded() {
        let outcome = guard(
            "hook",
            futures::future::pending::<()>(),
            Duration::from_secs(3),
            None,
        )
        .await;
        assert!(matches!(outcome, Guarded::Failed(text) if text.contains("within 3 s")));
    }

    #[tokio::test]
    async fn cancellation_wins() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let outcome = guard(
            "hook",
            futures::future::pending::<()>(),
            Duration::from_secs(3),
            Some(&cancel),
        )
        .await;
        assert!(matches!(outcome, Guarded::Cancelled));
    }
}
