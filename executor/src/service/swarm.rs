//! Swarm services: the T0 reads (services, one service, its tasks, its
//! logs, the nodes) and the two writes (force update, rollback), through
//! the same pipeline as a container's calls. A service is resolved among
//! the engine's services by name or id; one outside `targets.services` is
//! reported exactly like a missing one. A write's approval binds the
//! service id, its spec version and its images; a grant may cover a force
//! update of a service whose tasks fail.

use super::shape::*;
use super::*;
use crate::docker::{NodeInfo, ServiceInfo, TaskInfo, MAX_TASKS};
use crate::policy::{ServicePermit, ServiceWritePermit};

/// A service write that policy and a verified approval (or grant) allow,
/// whose approval (or grant use) is spent.
pub(super) struct AuthorizedServiceWrite {
    permit: ServiceWritePermit,
    response: pb::ServiceWriteResponse,
    /// Under a grant: the tasks are checked once more right before the
    /// engine is called.
    recheck_state: bool,
    /// An update's registry side.
    job: Option<super::updates::ServiceUpdateJob>,
}

fn clean(s: &str) -> String {
    truncate_for_audit(&redact::neutralise_controls(s))
}

fn clean_text(s: &str, redactions: &mut u32) -> String {
    let (t, n) = redact::redact_text(&redact::neutralise_controls(s));
    *redactions += n;
    truncate_for_audit(&t)
}

fn summary(s: &ServiceInfo) -> (pb::ServiceSummary, u32) {
    let (labels, redactions) = shape_labels(s.labels.clone());
    (
        pb::ServiceSummary {
            id: clean(&s.id),
            name: clean(&s.name),
            stack: clean(
                s.labels
                    .get(crate::policy::STACK_NAMESPACE_LABEL)
                    .map_or("", String::as_str),
            ),
            image: clean(&s.image),
            mode: clean(s.mode.as_str()),
            desired: s.desired,
            running: s.running,
            update_state: clean(s.update_state.as_str()),
            version: s.version,
            labels,
        },
        redactions,
    )
}

fn update_policy(p: &Option<crate::docker::UpdatePolicy>) -> Option<pb::UpdatePolicy> {
    p.as_ref().map(|p| pb::UpdatePolicy {
        parallelism: p.parallelism,
        delay_ms: p.delay.as_millis() as u64,
        failure_action: clean(&p.failure_action),
        monitor_ms: p.monitor.as_millis() as u64,
        max_failure_ratio: p.max_failure_ratio,
        order: clean(&p.order),
    })
}

fn task(t: TaskInfo, redactions: &mut u32) -> pb::ServiceTask {
    pb::ServiceTask {
        id: clean(&t.id),
        slot: t.slot,
        node_id: clean(&t.node_id),
        state: clean(t.state.as_str()),
        desired_state: clean(t.desired_state.as_str()),
        message: clean_text(&t.message, redactions),
        error: clean_text(&t.error, redactions),
        timestamp: clean(&t.timestamp),
        created_at: clean(&t.created_at),
        has_exit_code: t.exit_code.is_some(),
        exit_code: t.exit_code.unwrap_or(0),
        container_id: clean(&t.container_id),
        image: clean(&t.image),
    }
}

fn node(n: NodeInfo, with_labels: bool) -> (pb::SwarmNode, u32) {
    let (labels, redactions) = if with_labels {
        shape_labels(n.labels)
    } else {
        (HashMap::new(), 0)
    };
    let mut redactions = redactions;
    let message = clean_text(&n.message, &mut redactions);
    (
        pb::SwarmNode {
            id: clean(&n.id),
            hostname: clean(&n.hostname),
            role: clean(&n.role),
            state: clean(&n.state),
            availability: clean(&n.availability),
            message,
            nano_cpus: n.nano_cpus,
            memory_bytes: n.memory_bytes,
            leader: n.leader,
            engine_version: clean(&n.engine_version),
            labels,
        },
        redactions,
    )
}

impl ExecutorService {
    /// A service by exact name, exact id or unique id prefix, among the
    /// services policy shows; anything else is "not found". A hidden
    /// service never shadows a visible one (its name would show through
    /// the difference); alone, it goes on to the permit, which refuses it
    /// as missing and audits why.
    async fn resolve_service(
        &self,
        call: &mut Call,
        reference: &str,
    ) -> Result<ServiceInfo, ExecError> {
        validate_service_ref(reference)?;
        let all = self.docker.list_services().await?;
        let missing = |why: Option<PolicyError>| ExecError::ServiceNotFound {
            service: truncate_for_audit(reference),
            why,
        };
        let exact = all
            .iter()
            .find(|s| s.name == reference || s.id == reference)
            .cloned();
        let (exact, hidden) = match exact {
            Some(s) if self.policy.service_allowed(&s.name, &s.labels) => (Some(s), None),
            other => (None, other),
        };
        let found = match exact {
            Some(s) => s,
            None => {
                let prefix = reference.to_ascii_lowercase();
                let visible: Vec<&ServiceInfo> = all
                    .iter()
                    .filter(|s| s.id.starts_with(&prefix))
                    .filter(|s| self.policy.service_allowed(&s.name, &s.labels))
                    .collect();
                match (visible.as_slice(), hidden) {
                    ([one], _) => (*one).clone(),
                    ([], Some(hidden)) => hidden,
                    ([], None) => return Err(missing(None)),
                    (_, _) => {
                        return Err(ExecError::InvalidArgument(format!(
                        "`{}` matches more than one service; use a longer id prefix or the name",
                        truncate_for_audit(reference)
                    )))
                    }
                }
            }
        };
        call.entry.container_id = clean(&found.id);
        Ok(found)
    }

    pub(super) async fn permit_service_read(
        &self,
        call: &mut Call,
        reference: &str,
    ) -> Result<(ServicePermit<Read>, ServiceInfo), ExecError> {
        let service = self.resolve_service(call, reference).await?;
        let permit = self
            .policy
            .permit_service_read(&service.resolved())
            .map_err(|why| ExecError::ServiceNotFound {
                service: truncate_for_audit(reference),
                why: Some(why),
            })?;
        Ok((permit, service))
    }

    pub(super) async fn list_services(
        &self,
        call: &mut Call,
        req: pb::ListServicesRequest,
    ) -> Result<pb::ListServicesResponse, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let services: Vec<pb::ServiceSummary> = self
            .docker
            .list_services()
            .await?
            .iter()
            .filter(|s| self.policy.service_allowed(&s.name, &s.labels))
            .map(|s| summary(s).0)
            .collect();
        call.entry.result = format!("services={}", services.len());
        Ok(pb::ListServicesResponse { services })
    }

    pub(super) async fn inspect_service(
        &self,
        call: &mut Call,
        req: pb::ServiceRequest,
    ) -> Result<pb::InspectServiceResponse, ExecError> {
        call.record(&req.request_id, &req.service);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let (_permit, s) = self.permit_service_read(call, &req.service).await?;
        let (summary, mut redactions) = summary(&s);
        let env = s
            .env
            .iter()
            .map(|e| {
                let (line, n) = redact::redact_env_with(e, &self.env_policy);
                redactions += n;
                line
            })
            .collect();
        // Command and arguments as one list, so a flag in one and its value
        // in the other are seen together, then split back.
        let argv: Vec<String> = s.command.iter().chain(&s.args).cloned().collect();
        let (argv, n) = redact::redact_argv(&argv);
        redactions += n;
        let (command, args) = argv.split_at(s.command.len().min(argv.len()));
        let update_message = clean_text(&s.update_message, &mut redactions);
        let constraints = s
            .constraints
            .iter()
            .map(|c| clean_text(c, &mut redactions))
            .collect();
        let response = pb::InspectServiceResponse {
            summary: Some(summary),
            constraints,
            reserve_nano_cpus: s.reserve_nano_cpus,
            reserve_memory_bytes: s.reserve_memory,
            limit_nano_cpus: s.limit_nano_cpus,
            limit_memory_bytes: s.limit_memory,
            update_config: update_policy(&s.update_config),
            rollback_config: update_policy(&s.rollback_config),
            env,
            env_hashes: env_hashes(&s.env, self.env_key()?),
            healthcheck: s.healthcheck.clone().map(shape_healthcheck),
            update_message,
            update_started_at: clean(&s.update_started_at),
            update_completed_at: clean(&s.update_completed_at),
            previous_image: clean(s.previous_image.as_deref().unwrap_or_default()),
            created_at: clean(&s.created_at),
            updated_at: clean(&s.updated_at),
            redactions,
            command: command.to_vec(),
            args: args.to_vec(),
            restart_condition: clean(&s.restart_condition),
        };
        call.entry.result = format!("version={} redactions={redactions}", s.version);
        Ok(response)
    }

    pub(super) async fn service_tasks(
        &self,
        call: &mut Call,
        req: pb::ServiceRequest,
    ) -> Result<pb::ServiceTasksResponse, ExecError> {
        call.record(&req.request_id, &req.service);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let (permit, s) = self.permit_service_read(call, &req.service).await?;
        let all = self.docker.service_tasks(&permit).await?;
        let truncated = all.len() > MAX_TASKS;
        let mut redactions = 0;
        let tasks: Vec<pb::ServiceTask> = all
            .into_iter()
            .take(MAX_TASKS)
            .map(|t| task(t, &mut redactions))
            .collect();
        call.entry.result = format!("tasks={} truncated={truncated}", tasks.len());
        Ok(pb::ServiceTasksResponse {
            service_id: clean(&s.id),
            tasks,
            truncated,
            redactions,
        })
    }

    pub(super) async fn service_logs(
        &self,
        call: &mut Call,
        req: pb::ServiceLogsRequest,
    ) -> Result<pb::LogsResponse, ExecError> {
        call.record(&req.request_id, &req.service);
        call.entry.input = format!(
            "tail={} since={} streams={}",
            req.tail, req.since, req.streams
        );
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let window = self.log_window(req.tail, req.since, 0, req.streams)?;
        let (permit, s) = self.permit_service_read(call, &req.service).await?;
        let (raw, truncated) = self
            .docker
            .service_logs(
                &permit,
                window.query(!s.tty),
                self.limits.logs_max_bytes as usize,
            )
            .await?;
        Ok(shape_log_lines(call, raw, truncated))
    }

    pub(super) async fn list_nodes(
        &self,
        call: &mut Call,
        req: pb::ListNodesRequest,
    ) -> Result<pb::ListNodesResponse, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if self.policy.targets().services.is_none() {
            return Err(ExecError::NotConfigured(
                "no Swarm service is in scope (targets.services), so the nodes are not shown"
                    .into(),
            ));
        }
        let with_labels = self.policy.node_labels();
        let nodes: Vec<pb::SwarmNode> = self
            .docker
            .list_nodes()
            .await?
            .into_iter()
            .map(|n| node(n, with_labels).0)
            .collect();
        call.entry.result = format!("nodes={}", nodes.len());
        Ok(pb::ListNodesResponse { nodes })
    }

    /// `ForceUpdateService` and `RollbackService`: authorise (which spends
    /// the approval or the grant's use), then run the write to completion.
    pub(super) async fn service_write_rpc(
        &self,
        request: Request<pb::ServiceWriteRequest>,
        action: ServiceAction,
        write: Result<ServiceWrite, ExecError>,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        let mut call = self.begin(
            &request,
            action.as_str(),
            Policy::tier(WriteAction::from(action)),
        );
        let req = request.into_inner();
        let authorized = match call
            .open_write(
                &req.request_id,
                &req.service,
                req.approval.as_ref(),
                req.grant.as_ref(),
            )
            .and(write)
        {
            Ok(write) => self.authorize_service_write(&mut call, req, write).await,
            Err(e) => Err(e),
        };
        match authorized {
            Ok(write) => self.run_service_write(call, write).await,
            Err(e) => self.finish(call, Err(e)).await,
        }
    }

    /// The write path of a service, in the container write's order: the
    /// service resolved now, policy (a disabled action is refused whatever
    /// was signed), then the approval bound to the service id, its spec
    /// version and images (or a grant, its rules and the tasks' state),
    /// and the approval or the grant's use spent last, with the intent row.
    async fn authorize_service_write(
        &self,
        call: &mut Call,
        req: pb::ServiceWriteRequest,
        write: ServiceWrite,
    ) -> Result<AuthorizedServiceWrite, ExecError> {
        let action = write.action();
        let service = self.resolve_service(call, &req.service).await?;
        let resolved = service.resolved();
        let permit = self
            .policy
            .permit_service_write(&write, &resolved)
            .map_err(|e| match e {
                PolicyError::ServiceNotAllowed { .. } | PolicyError::Drydock { .. } => {
                    ExecError::ServiceNotFound {
                        service: truncate_for_audit(&req.service),
                        why: Some(e),
                    }
                }
                other => ExecError::Policy(other),
            })?;
        call.entry.input = format!(
            "version={} image={}",
            service.version,
            clean(&service.image)
        );
        if let Some(grant) = &req.grant {
            return self
                .authorize_service_grant(call, grant, &req.fault_class, &service, permit)
                .await;
        }
        let input = req.approval.as_ref().map(ApprovalInput::of);
        let approved =
            self.approvals
                .verify_service(input, &write, &resolved, &req.request_id, unix_now())?;
        // An update's registry: allowed, and its tag naming the approved
        // digest now, before the approval is spent.
        let job = match write.digest() {
            Some(digest) => Some(self.service_update_job(call, &service, digest).await?),
            None => None,
        };
        call.entry.approval_id = truncate_for_audit(&approved.claims.approval_id);
        call.entry.input.push_str(&format!(
            " plan_digest={} expires_at={}",
            truncate_for_audit(&approved.claims.plan_digest),
            approved.claims.expires_at
        ));
        if let Some(previous) = &resolved.previous_image {
            call.entry
                .input
                .push_str(&format!(" previous_image={}", clean(previous)));
        }
        self.spend_approval(
            call,
            &approved,
            &req.request_id,
            action.into(),
            &resolved.id,
        )?;
        Ok(AuthorizedServiceWrite {
            permit,
            response: pb::ServiceWriteResponse {
                service_id: resolved.id,
                action: action.as_str().into(),
                approval_id: approved.claims.approval_id,
                grant_id: String::new(),
                version: 0,
            },
            recheck_state: false,
            job,
        })
    }

    /// A force update under a grant: the grant verified, the service's
    /// tasks checked now (only a service whose tasks fail), the use spent
    /// against the caps with the intent row.
    async fn authorize_service_grant(
        &self,
        call: &mut Call,
        grant: &pb::Grant,
        fault_class: &str,
        service: &ServiceInfo,
        permit: ServiceWritePermit,
    ) -> Result<AuthorizedServiceWrite, ExecError> {
        validate_fault_class(fault_class)?;
        let action = permit.action();
        let input = GrantInput {
            claims: &grant.claims,
            signature: &grant.signature,
            key_id: &grant.key_id,
            fault_class,
        };
        let now = unix_now();
        let verified =
            self.grants
                .verify(&input, action.into(), &service.name, &service.labels, now)?;
        let claims = &verified.claims;
        call.entry.approval_id = truncate_for_audit(&claims.grant_id);
        crate::grants::check_store_age(claims, self.audit.counts_since()?)?;
        call.entry.input.push_str(&format!(
            " grant={} class={fault_class} expires_at={} max={}/{}s total={}",
            claims.grant_id,
            claims.expires_at,
            claims.max_per_container,
            claims.window_secs,
            claims.max_total
        ));
        let tasks = self.docker.service_tasks(&permit.to_read()).await?;
        crate::grants::service_precondition(action, service, &tasks, now)?;
        crate::grants::service_class_consistent(fault_class, service, &tasks, now)?;
        let mut intent = call.entry.clone();
        intent.decision = crate::audit::Decision::Intent;
        intent.code = crate::audit::Code::NONE;
        intent.reason = format!(
            "grant {} used for {} of service {} ({fault_class}); calling Docker",
            claims.grant_id,
            action.as_str(),
            service.name
        );
        self.spend_grant_use(call, claims, &service.id, now, &intent)?;
        Ok(AuthorizedServiceWrite {
            permit,
            response: pb::ServiceWriteResponse {
                service_id: service.id.clone(),
                action: action.as_str().into(),
                approval_id: String::new(),
                grant_id: claims.grant_id.clone(),
                version: 0,
            },
            recheck_state: true,
            job: None,
        })
    }

    /// Call the engine for an authorised service write and audit the
    /// outcome, in a task of its own (as `run_write` does).
    async fn run_service_write(
        &self,
        mut call: Call,
        write: AuthorizedServiceWrite,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        let docker = self.docker.clone();
        let audit = self.audit.clone();
        let task = tokio::spawn(async move {
            let AuthorizedServiceWrite {
                permit,
                mut response,
                recheck_state,
                job,
            } = write;
            let action = permit.action();
            let still_failing = if recheck_state {
                let read = permit.to_read();
                match (
                    docker.service(&read).await,
                    docker.service_tasks(&read).await,
                ) {
                    (Ok(s), Ok(tasks)) => {
                        crate::grants::service_precondition(action, &s, &tasks, unix_now())
                            .map_err(ExecError::from)
                    }
                    (Err(e), _) | (_, Err(e)) => Err(ExecError::from(e)),
                }
            } else {
                Ok(())
            };
            let result = match still_failing {
                Ok(()) => {
                    // Each write takes only the permit for itself.
                    let done = match &permit {
                        ServiceWritePermit::ForceUpdate(p) => docker.force_update(p).await,
                        ServiceWritePermit::Rollback(p) => docker.rollback_service(p).await,
                        ServiceWritePermit::Update { permit, .. } => match &job {
                            Some(job) => job.run(&docker, permit).await,
                            None => Err(crate::docker::DockerError::Rejected {
                                operation: "service_update",
                                message: "an update without its registry".into(),
                            }),
                        },
                    };
                    done.map_err(ExecError::from).map(|version| {
                        call.entry.result =
                            format!("{} done: spec version {version}", action.as_str());
                        response.version = version;
                        response
                    })
                }
                Err(e) => Err(e),
            };
            finish_call(audit, call, result).await
        });
        super::writes::write_task_result(task.await)
    }
}
