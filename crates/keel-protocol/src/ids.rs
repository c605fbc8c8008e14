//! Identifier newtypes. Backed by `Arc<str>` because ids are cloned into many events.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps an existing identifier.
            pub fn new(value: impl AsRef<str>) -> Self {
                Self(Arc::from(value.as_ref()))
            }

            /// A fresh, time-ordered identifier (UUID v7).
            pub fn generate() -> Self {
                Self(Arc::from(uuid::Uuid::now_v7().to_string()))
            }

            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::new(value)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(Arc::from(value))
            }
        }
    };
}

id_type!(
    /// A session: a conversation that outlives processes.
    SessionId
);
id_type!(
    /// One accepted unit of work in a session.
    TurnId
);
id_type!(
    /// One invocation of a front end (a `keel exec` run), named in everything it prints.
    RunId
);
id_type!(
    /// A host-assigned message identifier.
    MessageId
);
id_type!(
    /// The provider-assigned identifier of one tool call.
    ToolCallId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_plain_strings() {
        let id = ToolCallId::new("call_1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"call_1\"");
        let back: ToolCallId = serde_json::from_str("\"call_1\"").unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn generated_ids_are_unique() {
        assert_ne!(TurnId::generate(), TurnId::generate());
    }
}
