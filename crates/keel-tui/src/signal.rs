//! Job control and termination signals.

/// Stops this process as a terminal's Ctrl+Z would (raw mode turns the key into input,
/// so keel raises the signal itself); returns once the shell resumes it.
pub fn stop_self() {
    use rustix::process::{Signal, getpid, kill_process};
    // SIGTSTP's default action stops the whole process; the call returns on SIGCONT. A
    // process may always signal itself, so there is no failure to report.
    let _ = kill_process(getpid(), Signal::TSTP);
}

/// Resolves when the terminal hangs up or keel is asked to terminate.
pub async fn hangup_or_terminate() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut hangup), Ok(mut terminate)) = (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
    ) else {
        // Without handlers the default actions apply: keel ends and the session stays
        // resumable from the store.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = hangup.recv() => {}
        _ = terminate.recv() => {}
    }
}
