//! Typed identifiers. Each is opaque to callers but validated on parse, so a
//! malformed id is refused at the edge with `INVALID_ID` instead of travelling
//! into the store.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdError {
    /// The identifier family that was expected, for example `run`.
    pub kind: &'static str,
    /// What was wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} id: {}", self.kind, self.reason)
    }
}

impl std::error::Error for IdError {}

/// Parses `<prefix>_<32 lowercase hex>`; the hex part is a UUID without dashes.
fn check_prefixed(s: &str, prefix: &str, kind: &'static str) -> Result<(), IdError> {
    let hex = s
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .ok_or(IdError { kind, reason: "wrong prefix" })?;
    if hex.len() != 32 {
        return Err(IdError { kind, reason: "expected 32 hex digits after the prefix" });
    }
    if !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(IdError { kind, reason: "expected lowercase hex digits" });
    }
    Ok(())
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The textual prefix of this id family.
            pub const PREFIX: &'static str = $prefix;

            /// Wraps 16 random or time-ordered bytes (a UUID) as an id.
            pub fn from_uuid_bytes(bytes: [u8; 16]) -> Self {
                let mut s = String::with_capacity($prefix.len() + 33);
                s.push_str($prefix);
                s.push('_');
                for b in bytes {
                    s.push_str(&format!("{b:02x}"));
                }
                Self(s)
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                check_prefixed(s, $prefix, $kind)?;
                Ok(Self(s.to_owned()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "pattern": concat!("^", $prefix, "_[0-9a-f]{32}$"),
                    "description": concat!("Opaque ", $kind, " id")
                })
            }
        }
    };
}

prefixed_id!(
    /// A run: one root goal and the workers spawned for it.
    RunId, "run", "run"
);
impl RunId {
    /// The system stream: events about executors rather than one run. No run
    /// ever gets this id (UUIDv7s are never all zero).
    pub fn system() -> Self {
        Self::from_uuid_bytes([0; 16])
    }

    /// Whether this is the system stream.
    pub fn is_system(&self) -> bool {
        self.0.bytes().skip(4).all(|b| b == b'0')
    }

    /// The ownership stream: worktree ownership outlives runs (a handoff
    /// crosses them, a pruned run keeps its provenance), so its events are
    /// a log of their own. No run gets this id either (a UUIDv7's version
    /// nibble is 7).
    pub fn ownership() -> Self {
        let mut bytes = [0; 16];
        bytes[15] = 1;
        Self::from_uuid_bytes(bytes)
    }

    /// Whether this is the ownership stream.
    pub fn is_ownership(&self) -> bool {
        *self == Self::ownership()
    }
}

prefixed_id!(
    /// A logical worker. Never the same thing as a conversation or a tab.
    WorkerId, "wrk", "worker"
);
prefixed_id!(
    /// A durable message between workers of one run.
    MessageId, "msg", "message"
);
prefixed_id!(
    /// One executor command; unique per external effect attempt.
    CommandId, "cmd", "command"
);
prefixed_id!(
    /// One worktree ownership record: a claim of a Git worktree, its
    /// holders, and what it submitted and landed. Never a conversation id.
    OwnershipId, "own", "ownership"
);

/// A ChatGPT conversation identity: the UUID from `/c/<uuid>`, lowercase.
///
/// Accepted only from an executor binding, never from model text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationId(String);

impl ConversationId {
    /// The UUID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ConversationId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        const KIND: &str = "conversation";
        let groups: Vec<&str> = s.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        if groups.len() != 5 || groups.iter().zip(lens).any(|(g, n)| g.len() != n) {
            return Err(IdError { kind: KIND, reason: "expected a UUID (8-4-4-4-12)" });
        }
        if !groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))) {
            return Err(IdError { kind: KIND, reason: "expected lowercase hex digits" });
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ConversationId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ConversationId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for ConversationId {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ConversationId")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_ids_round_trip() {
        let id = WorkerId::from_uuid_bytes([0xab; 16]);
        assert_eq!(id.as_str(), "wrk_abababababababababababababababab");
        let json = serde_json::to_string(&id).unwrap();
        let back: WorkerId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn malformed_ids_are_refused() {
        let cases = [
            ("", "wrong prefix"),
            ("run_0123", "wrong prefix"),
            ("wrk_0123", "expected 32 hex digits after the prefix"),
            ("wrk_0123456789abcdef0123456789ABCDEF", "expected lowercase hex digits"),
            ("wrk_0123456789abcdef0123456789abcdeg", "expected lowercase hex digits"),
            ("wrk-0123456789abcdef0123456789abcdef", "wrong prefix"),
        ];
        for (input, reason) in cases {
            let err = input.parse::<WorkerId>().unwrap_err();
            assert_eq!(err.reason, reason, "{input:?}");
        }
        assert!(serde_json::from_str::<RunId>("\"wrk_0123456789abcdef0123456789abcdef\"").is_err());
        assert!(serde_json::from_str::<RunId>("42").is_err());
    }

    #[test]
    fn conversation_ids_are_lowercase_uuids() {
        let ok = "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293";
        assert_eq!(ok.parse::<ConversationId>().unwrap().as_str(), ok);
        for bad in [
            "0196B2C4-8E1F-7A3B-9C2D-4E5F60718293",
            "0196b2c48e1f7a3b9c2d4e5f60718293",
            "0196b2c4-8e1f-7a3b-9c2d-4e5f6071829",
            "../../etc/passwd",
        ] {
            assert!(bad.parse::<ConversationId>().is_err(), "{bad}");
        }
    }
}
