//! End-to-end tests against a real Docker engine and real drydock processes.
//! Run with `cargo test --workspace`; a missing Docker engine fails them.
// Test code: a failed unwrap is the failure report.
#![allow(clippy::unwrap_used)]

mod agent_lifecycle;
mod architecture;
mod automation;
mod backups;
mod build;
mod build_bases;
mod closed_loop;
mod dependency_rules;
mod deploy;
mod deploy_hosts;
mod discovery;
mod disk;
mod engine_restart;
mod evidence;
mod executor_behaviour;
mod executor_boundary;
mod executor_events;
mod executor_load;
mod fault_classes;
mod followups;
mod generalizes;
mod hostile_model;
mod hosts;
mod hosts_many;
mod llm_injection;
mod mcp;
mod memory;
mod openapi;
mod operator_cli;
mod past_deaths;
mod quorum;
mod reference_docs;
mod rollback;
mod ssh_approver;
mod swarm;
mod swarm_deploy;
mod swarm_repairs;
mod swarm_update;
mod troubleshoot_bench;
mod ui;
mod update;
mod update_flow;
mod update_grants;
mod update_line;
mod update_resume;
mod upgrade;
mod webhooks;
mod writes_in_doubt;
