//! The agent's domain words: the vocabulary crate, which the API serializes
//! and the CLI reads back, seen from inside the agent.

pub use drydock_vocab::*;
