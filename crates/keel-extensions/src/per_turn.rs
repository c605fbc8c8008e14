//! State one extension's several handlers share within one turn. The runtime builds each
//! handler by its own factory, one after another at the turn's assembly; the first one
//! makes the turn's state and the others find it. Only weak references are kept here, so
//! the state goes when the turn's handlers do.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use keel_protocol::TurnId;

/// The live turns' states of one extension.
pub(crate) struct PerTurn<T> {
    turns: Mutex<Vec<(TurnId, Weak<T>)>>,
}

impl<T> Default for PerTurn<T> {
    fn default() -> Self {
        Self {
            turns: Mutex::new(Vec::new()),
        }
    }
}

impl<T> PerTurn<T> {
    /// The state of `turn`, made by `make` if the turn has none yet.
    pub(crate) fn get(&self, turn: &TurnId, make: impl FnOnce() -> T) -> Arc<T> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.retain(|(_, state)| state.strong_count() > 0);
        if let Some(found) = turns
            .iter()
            .find(|(t, _)| t == turn)
            .and_then(|(_, state)| state.upgrade())
        {
            return found;
        }
        let made = Arc::new(make());
        turns.push((turn.clone(), Arc::downgrade(&made)));
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handlers_of_one_turn_share_its_state_and_it_goes_with_them() {
        let states: PerTurn<Mutex<u32>> = PerTurn::default();
        let turn = TurnId::new("t-1");
        let first = states.get(&turn, || Mutex::new(1));
        let second = states.get(&turn, || Mutex::new(2));
        assert!(Arc::ptr_eq(&first, &second));
        let other = states.get(&TurnId::new("t-2"), || Mutex::new(3));
        assert_eq!(*other.lock().unwrap(), 3);
        drop((first, second));
        let again = states.get(&turn, || Mutex::new(4));
        assert_eq!(*again.lock().unwrap(), 4);
    }
}
