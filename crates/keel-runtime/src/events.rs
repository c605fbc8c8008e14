//! Delivery of a session's typed events to its subscribers, in order and numbered.
//!
//! Subscribers are called synchronously under one lock per session: each sees every event
//! once, in `seq` order, and a slow one slows the turn rather than letting events pile up
//! (the same back-pressure the runner applies to its own event sink). A subscriber that
//! wants a stream uses [`ChannelSink`].

use std::sync::{Arc, Mutex, PoisonError, Weak};

use keel_protocol::{SessionEvent, SessionEventBody, SessionId};
use tokio::sync::mpsc;

/// Receives a session's events.
pub trait SessionSink: Send + Sync {
    /// One event; called in `seq` order.
    fn on_event(&self, event: &SessionEvent);
    /// Every event produced so far has been delivered and no other is ready: a sink that
    /// batches its output writes it now.
    fn on_drained(&self) {}
}

/// Forwards events into an unbounded channel, for subscribers that want a stream.
pub struct ChannelSink(pub mpsc::UnboundedSender<SessionEvent>);

impl SessionSink for ChannelSink {
    fn on_event(&self, event: &SessionEvent) {
        let _ = self.0.send(event.clone());
    }
}

/// A stream of one session's events; dropping it unsubscribes.
pub fn channel() -> (Arc<ChannelSink>, mpsc::UnboundedReceiver<SessionEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(ChannelSink(tx)), rx)
}

struct Subscribers {
    next_id: u64,
    seq: u64,
    sinks: Vec<(u64, Arc<dyn SessionSink>)>,
}

/// The event hub of one session.
pub(crate) struct Hub {
    session_id: SessionId,
    subscribers: Mutex<Subscribers>,
}

impl Hub {
    pub(crate) fn new(session_id: SessionId) -> Arc<Self> {
        Arc::new(Self {
            session_id,
            subscribers: Mutex::new(Subscribers {
                next_id: 0,
                seq: 0,
                sinks: Vec::new(),
            }),
        })
    }

    /// Numbers `body` and hands it to every subscriber.
    pub(crate) fn emit(&self, body: SessionEventBody) {
        let mut subs = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let event = SessionEvent {
            session_id: self.session_id.clone(),
            seq: subs.seq,
            body,
        };
        subs.seq += 1;
        for (_, sink) in &subs.sinks {
            sink.on_event(&event);
        }
    }

    /// Tells every subscriber that nothing else is ready.
    pub(crate) fn drained(&self) {
        let subs = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (_, sink) in &subs.sinks {
            sink.on_drained();
        }
    }

    pub(crate) fn subscribe(self: &Arc<Self>, sink: Arc<dyn SessionSink>) -> Subscription {
        let mut subs = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let id = subs.next_id;
        subs.next_id += 1;
        subs.sinks.push((id, sink));
        Subscription {
            hub: Arc::downgrade(self),
            id,
        }
    }

    fn unsubscribe(&self, id: u64) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sinks
            .retain(|(sid, _)| *sid != id);
    }
}

/// A subscription to a session's events; dropping it unsubscribes.
pub struct Subscription {
    hub: Weak<Hub>,
    id: u64,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.unsubscribe(self.id);
        }
    }
}
