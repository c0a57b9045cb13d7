//! Docker's own words, parsed once where an engine's answer enters
//! drydock (the executor's adapter, and the agent's executor client for
//! what the executor sends on): a container's state, its health, an engine
//! event's action, a Swarm task's state, a service's mode and update
//! state, a node's state and availability. Everything past that point
//! matches on these enums; none compares Docker's strings.
//!
//! Each type serializes as the engine's word (so the agent's API, its
//! stored requests and the OpenAPI document are unchanged), and a word an
//! engine says that this release does not know is kept as `Other`, never
//! lost or refused: engines add states over time.

use serde::{Deserialize, Serialize};

macro_rules! docker_words {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A word this release does not know, as the engine said it.
            Other(String),
        }

        impl $name {
            /// The known words, in the order of the table.
            pub const KNOWN: &'static [&'static str] = &[$($text),*];

            pub fn parse(word: &str) -> $name {
                match word {
                    $( $text => $name::$variant, )*
                    other => $name::Other(other.to_string()),
                }
            }

            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )*
                    $name::Other(word) => word,
                }
            }
        }

        /// For tables and tests; parsing, so an unknown word is `Other`.
        impl From<&str> for $name {
            fn from(word: &str) -> $name {
                $name::parse(word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let word = std::borrow::Cow::<'de, str>::deserialize(d)?;
                Ok($name::parse(&word))
            }
        }

        /// A string in the schema, as the engine's word always was.
        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string"})
            }
        }
    };
}

docker_words! {
    /// A container's state (`State.Status`, `docker ps`'s `State`).
    ContainerState {
        #[default]
        Created = "created",
        Running = "running",
        Paused = "paused",
        Restarting = "restarting",
        Removing = "removing",
        Exited = "exited",
        Dead = "dead",
    }
}

docker_words! {
    /// A container's healthcheck verdict; `none` without a healthcheck.
    HealthStatus {
        #[default]
        None = "none",
        Starting = "starting",
        Healthy = "healthy",
        Unhealthy = "unhealthy",
    }
}

docker_words! {
    /// What an engine event says happened. A Swarm service's and a node's
    /// actions carry a `service_` or `node_` prefix (the agent adds it),
    /// an image's an `image_` one.
    EventAction {
        #[default]
        Create = "create",
        Start = "start",
        Die = "die",
        Oom = "oom",
        Kill = "kill",
        HealthStatus = "health_status",
        Restart = "restart",
        Rename = "rename",
        Destroy = "destroy",
        Stop = "stop",
        Pause = "pause",
        Unpause = "unpause",
        ImagePull = "image_pull",
        ImageTag = "image_tag",
        ImageUntag = "image_untag",
        ImageDelete = "image_delete",
        ServiceCreate = "service_create",
        ServiceUpdate = "service_update",
        ServiceRemove = "service_remove",
        NodeCreate = "node_create",
        NodeUpdate = "node_update",
        NodeRemove = "node_remove",
    }
}

docker_words! {
    /// A Swarm task's state (or the state it is desired in).
    TaskState {
        #[default]
        New = "new",
        Allocated = "allocated",
        Pending = "pending",
        Assigned = "assigned",
        Accepted = "accepted",
        Preparing = "preparing",
        Ready = "ready",
        Starting = "starting",
        Running = "running",
        Complete = "complete",
        Shutdown = "shutdown",
        Failed = "failed",
        Rejected = "rejected",
        Remove = "remove",
        Orphaned = "orphaned",
    }
}

docker_words! {
    /// A Swarm service's mode.
    ServiceMode {
        #[default]
        Replicated = "replicated",
        Global = "global",
        ReplicatedJob = "replicated-job",
        GlobalJob = "global-job",
    }
}

docker_words! {
    /// A Swarm service's last update; `None` ("") when it has had none.
    UpdateState {
        #[default]
        None = "",
        Updating = "updating",
        Paused = "paused",
        Completed = "completed",
        RollbackStarted = "rollback_started",
        RollbackPaused = "rollback_paused",
        RollbackCompleted = "rollback_completed",
    }
}

docker_words! {
    /// A Swarm node's state.
    NodeState {
        #[default]
        Unknown = "unknown",
        Down = "down",
        Ready = "ready",
        Disconnected = "disconnected",
    }
}

docker_words! {
    /// Whether Swarm may place tasks on a node.
    NodeAvailability {
        #[default]
        Active = "active",
        Pause = "pause",
        Drain = "drain",
    }
}

impl ContainerState {
    /// Stopped for good until someone starts it: exited or dead.
    pub fn is_down(&self) -> bool {
        matches!(self, ContainerState::Exited | ContainerState::Dead)
    }
}

impl TaskState {
    /// A task that ended badly: it failed, or no node would take it.
    pub fn is_failure(&self) -> bool {
        matches!(self, TaskState::Failed | TaskState::Rejected)
    }
}

impl UpdateState {
    /// Swarm (or a person) is changing the service now.
    pub fn in_progress(&self) -> bool {
        matches!(self, UpdateState::Updating | UpdateState::RollbackStarted)
    }

    /// An update or rollback stopped part-way, waiting for a person.
    pub fn paused(&self) -> bool {
        matches!(self, UpdateState::Paused | UpdateState::RollbackPaused)
    }
}

impl ServiceMode {
    /// A job runs to completion; forcing an update runs it again.
    pub fn is_job(&self) -> bool {
        matches!(self, ServiceMode::ReplicatedJob | ServiceMode::GlobalJob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_read_back_as_the_engine_said_them_known_or_not() {
        for word in ContainerState::KNOWN {
            let parsed = ContainerState::parse(word);
            assert!(!matches!(parsed, ContainerState::Other(_)), "{word}");
            assert_eq!(parsed.as_str(), *word);
            assert_eq!(serde_json::to_value(&parsed).unwrap(), *word);
        }
        let new = ContainerState::parse("hibernating");
        assert_eq!(new, ContainerState::Other("hibernating".into()));
        let back: ContainerState = serde_json::from_str("\"hibernating\"").unwrap();
        assert_eq!(back, new);
        assert_eq!(serde_json::to_string(&back).unwrap(), "\"hibernating\"");
        assert_eq!(UpdateState::parse(""), UpdateState::None);
        assert_eq!(HealthStatus::default().as_str(), "none");
        assert!(TaskState::parse("rejected").is_failure());
        assert!(ServiceMode::parse("global-job").is_job());
    }

    #[test]
    fn each_table_names_each_word_once() {
        for known in [
            ContainerState::KNOWN,
            HealthStatus::KNOWN,
            EventAction::KNOWN,
            TaskState::KNOWN,
            ServiceMode::KNOWN,
            UpdateState::KNOWN,
            NodeState::KNOWN,
            NodeAvailability::KNOWN,
        ] {
            let mut words = known.to_vec();
            words.sort();
            words.dedup();
            assert_eq!(words.len(), known.len(), "{known:?}");
        }
    }
}
