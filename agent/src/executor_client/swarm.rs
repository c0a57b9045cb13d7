//! The executor's Swarm RPCs, as the agent uses them: `pb::` types become
//! the vocabulary's service, task and node views here.

use drydock_proto::approval::ServiceWrite;
use drydock_proto::pb;

use super::{logs_view, Authority, ExecutorClient, ExecutorError, Written};
use crate::model::{
    HealthcheckView, LogsView, NodeAvailability, NodeState, NodeView, RegistryView, ServiceMode,
    ServiceSummaryView, ServiceView, TaskState, TaskView, UpdatePolicyView, UpdateState,
};

/// A registry's answer, for a container or a service.
pub(super) fn registry_view(r: pb::RegistryDigestResponse) -> RegistryView {
    RegistryView {
        container_id: r.container_id,
        reference: r.reference,
        registry_digest: r.registry_digest,
        image_id: r.image_id,
        running_digests: r.running_digests,
        oci_labels: r.oci_labels.into_iter().collect(),
        update_available: r.update_available,
        new_oci_labels: r.new_oci_labels.into_iter().collect(),
        new_labels_unread: r.new_labels_unread,
        new_tag: r.new_tag,
        tags_unread: r.tags_unread,
    }
}

fn summary(s: pb::ServiceSummary) -> ServiceSummaryView {
    ServiceSummaryView {
        id: s.id,
        name: s.name,
        stack: s.stack,
        image: s.image,
        mode: ServiceMode::parse(&s.mode),
        desired: s.desired,
        running: s.running,
        update_state: UpdateState::parse(&s.update_state),
        version: s.version,
        labels: s.labels.into_iter().collect(),
    }
}

fn update_policy(p: pb::UpdatePolicy) -> UpdatePolicyView {
    UpdatePolicyView {
        parallelism: p.parallelism,
        delay_ms: p.delay_ms,
        failure_action: p.failure_action,
        monitor_ms: p.monitor_ms,
        max_failure_ratio: p.max_failure_ratio,
        order: p.order,
    }
}

impl ExecutorClient {
    pub(super) async fn services(
        &self,
        request_id: &str,
    ) -> Result<Vec<ServiceSummaryView>, ExecutorError> {
        let r = self
            .inner
            .clone()
            .list_services(pb::ListServicesRequest {
                request_id: request_id.into(),
            })
            .await?
            .into_inner();
        Ok(r.services.into_iter().map(summary).collect())
    }

    pub(super) async fn service(
        &self,
        request_id: &str,
        service: &str,
    ) -> Result<ServiceView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .inspect_service(pb::ServiceRequest {
                request_id: request_id.into(),
                service: service.into(),
            })
            .await?
            .into_inner();
        Ok(ServiceView {
            summary: r.summary.map(summary).unwrap_or_default(),
            constraints: r.constraints,
            reserve_nano_cpus: r.reserve_nano_cpus,
            reserve_memory_bytes: r.reserve_memory_bytes,
            limit_nano_cpus: r.limit_nano_cpus,
            limit_memory_bytes: r.limit_memory_bytes,
            update_config: r.update_config.map(update_policy),
            rollback_config: r.rollback_config.map(update_policy),
            env: r.env,
            env_hashes: r.env_hashes.into_iter().map(|h| (h.name, h.hash)).collect(),
            healthcheck: r.healthcheck.map(|h| HealthcheckView {
                test: h.test,
                interval_ms: h.interval_ms,
                timeout_ms: h.timeout_ms,
                retries: h.retries,
                start_period_ms: h.start_period_ms,
            }),
            update_message: r.update_message,
            update_started_at: r.update_started_at,
            update_completed_at: r.update_completed_at,
            previous_image: r.previous_image,
            created_at: r.created_at,
            updated_at: r.updated_at,
            command: r.command,
            args: r.args,
            restart_condition: r.restart_condition,
            redactions: r.redactions,
        })
    }

    pub(super) async fn tasks(
        &self,
        request_id: &str,
        service: &str,
    ) -> Result<Vec<TaskView>, ExecutorError> {
        let r = self
            .inner
            .clone()
            .service_tasks(pb::ServiceRequest {
                request_id: request_id.into(),
                service: service.into(),
            })
            .await?
            .into_inner();
        Ok(r.tasks
            .into_iter()
            .map(|t| TaskView {
                id: t.id,
                slot: t.slot,
                node_id: t.node_id,
                state: TaskState::parse(&t.state),
                desired_state: TaskState::parse(&t.desired_state),
                message: t.message,
                error: t.error,
                timestamp: t.timestamp,
                exit_code: t.has_exit_code.then_some(t.exit_code),
                container_id: t.container_id,
                image: t.image,
            })
            .collect())
    }

    pub(super) async fn service_logs(
        &self,
        request_id: &str,
        service: &str,
        tail: u32,
    ) -> Result<LogsView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .service_logs(pb::ServiceLogsRequest {
                request_id: request_id.into(),
                service: service.into(),
                tail,
                ..Default::default()
            })
            .await?
            .into_inner();
        Ok(logs_view(r))
    }

    pub(super) async fn nodes(&self, request_id: &str) -> Result<Vec<NodeView>, ExecutorError> {
        let r = self
            .inner
            .clone()
            .list_nodes(pb::ListNodesRequest {
                request_id: request_id.into(),
            })
            .await?
            .into_inner();
        Ok(r.nodes
            .into_iter()
            .map(|n| NodeView {
                id: n.id,
                hostname: n.hostname,
                role: n.role,
                state: NodeState::parse(&n.state),
                availability: NodeAvailability::parse(&n.availability),
                message: n.message,
                nano_cpus: n.nano_cpus,
                memory_bytes: n.memory_bytes,
                leader: n.leader,
                engine_version: n.engine_version,
                labels: n.labels.into_iter().collect(),
            })
            .collect())
    }

    pub(super) async fn service_registry_digest(
        &self,
        request_id: &str,
        service: &str,
    ) -> Result<RegistryView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .service_registry_digest(pb::ServiceRequest {
                request_id: request_id.into(),
                service: service.into(),
            })
            .await?
            .into_inner();
        Ok(registry_view(r))
    }

    /// A service's write, with what authorises it (a grant only for a
    /// force update; the executor refuses one for another write anyway).
    pub(super) async fn write_service(
        &self,
        write: &ServiceWrite,
        request_id: &str,
        service_id: &str,
        authority: Authority,
    ) -> Result<Written, ExecutorError> {
        let mut req = pb::ServiceWriteRequest {
            request_id: request_id.into(),
            service: service_id.into(),
            ..Default::default()
        };
        (req.approval, req.grant, req.fault_class) = authority.into_wire();
        let mut client = self.writes.clone();
        let answer = match write {
            ServiceWrite::ForceUpdate => client.force_update_service(req).await?,
            ServiceWrite::Rollback => client.rollback_service(req).await?,
            ServiceWrite::Update { digest } => {
                let pb::ServiceWriteRequest {
                    request_id,
                    service,
                    approval,
                    ..
                } = req;
                client
                    .update_service(pb::ServiceUpdateRequest {
                        request_id,
                        service,
                        digest: digest.to_string(),
                        approval,
                    })
                    .await?
            }
        }
        .into_inner();
        Ok(Written {
            new_container_id: None,
            service_version: Some(answer.version),
            built: None,
        })
    }
}
