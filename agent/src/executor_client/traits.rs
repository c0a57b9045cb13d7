//! `ExecutorClient` behind the engine's traits: each read of `Reads` and
//! the write of `Executor` is the gRPC call of the same name.

use super::{
    container_event, health, Authority, Call, ContainerEvents, Executor, ExecutorClient, Reads,
    WriteOp, Written,
};
use crate::model::{
    BuildSourceView, ContainerEvent, ContainerSummaryView, ContainerView, DiskUsageView,
    HttpCheckView, ImageView, LogsView, NodeView, PolicyView, RegistryView, ServiceSummaryView,
    ServiceView, StatsView, TaskView,
};

impl Reads for ExecutorClient {
    fn ping<'a>(&'a self) -> Call<'a, ()> {
        Box::pin(health::ping(self.channel.clone()))
    }
    fn follow<'a>(
        &'a self,
        request_id: &'a str,
        container_id: &'a str,
    ) -> Call<'a, ContainerEvents> {
        Box::pin(async move {
            use futures::StreamExt as _;
            let container_id = container_id.to_string();
            let stream = self
                .events_for(request_id, 0)
                .await?
                // A broken stream ends; the caller polls then.
                .take_while(|e| std::future::ready(e.is_ok()))
                .filter_map(move |e| {
                    let e = e.ok().map(container_event);
                    std::future::ready(e.filter(|e| e.container_id == container_id))
                });
            Ok(Box::pin(stream) as ContainerEvents)
        })
    }
    fn list<'a>(&'a self, request_id: &'a str, all: bool) -> Call<'a, Vec<ContainerSummaryView>> {
        Box::pin(ExecutorClient::list(self, request_id, all))
    }
    fn inspect<'a>(&'a self, request_id: &'a str, container: &'a str) -> Call<'a, ContainerView> {
        Box::pin(ExecutorClient::inspect(self, request_id, container))
    }
    fn logs_window<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        tail: u32,
        since: i64,
        until: i64,
    ) -> Call<'a, LogsView> {
        Box::pin(ExecutorClient::logs_window(
            self, request_id, container, tail, since, until,
        ))
    }
    fn policy<'a>(&'a self, request_id: &'a str) -> Call<'a, PolicyView> {
        Box::pin(ExecutorClient::policy(self, request_id))
    }
    fn stats<'a>(&'a self, request_id: &'a str, container: &'a str) -> Call<'a, StatsView> {
        Box::pin(ExecutorClient::stats(self, request_id, container))
    }
    fn disk_usage<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
    ) -> Call<'a, DiskUsageView> {
        Box::pin(ExecutorClient::disk_usage(self, request_id, container))
    }
    fn container_events<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        since_unix: i64,
        limit: u32,
    ) -> Call<'a, Vec<ContainerEvent>> {
        Box::pin(ExecutorClient::container_events(
            self, request_id, container, since_unix, limit,
        ))
    }
    fn check_http<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, HttpCheckView> {
        Box::pin(ExecutorClient::check_http(self, request_id, service))
    }
    fn image<'a>(&'a self, request_id: &'a str, image_id: &'a str) -> Call<'a, ImageView> {
        Box::pin(ExecutorClient::image(self, request_id, image_id))
    }
    fn registry_digest<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
    ) -> Call<'a, RegistryView> {
        Box::pin(ExecutorClient::registry_digest(self, request_id, container))
    }
    fn build_source<'a>(
        &'a self,
        request_id: &'a str,
        container: &'a str,
        revision: &'a str,
    ) -> Call<'a, BuildSourceView> {
        Box::pin(ExecutorClient::build_source(
            self, request_id, container, revision,
        ))
    }
    fn services<'a>(&'a self, request_id: &'a str) -> Call<'a, Vec<ServiceSummaryView>> {
        Box::pin(ExecutorClient::services(self, request_id))
    }
    fn service<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, ServiceView> {
        Box::pin(ExecutorClient::service(self, request_id, service))
    }
    fn tasks<'a>(&'a self, request_id: &'a str, service: &'a str) -> Call<'a, Vec<TaskView>> {
        Box::pin(ExecutorClient::tasks(self, request_id, service))
    }
    fn service_logs<'a>(
        &'a self,
        request_id: &'a str,
        service: &'a str,
        tail: u32,
    ) -> Call<'a, LogsView> {
        Box::pin(ExecutorClient::service_logs(
            self, request_id, service, tail,
        ))
    }
    fn nodes<'a>(&'a self, request_id: &'a str) -> Call<'a, Vec<NodeView>> {
        Box::pin(ExecutorClient::nodes(self, request_id))
    }
    fn service_registry_digest<'a>(
        &'a self,
        request_id: &'a str,
        service: &'a str,
    ) -> Call<'a, RegistryView> {
        Box::pin(ExecutorClient::service_registry_digest(
            self, request_id, service,
        ))
    }
}

impl Executor for ExecutorClient {
    fn write<'a>(
        &'a self,
        request_id: &'a str,
        op: &'a WriteOp,
        authority: Authority,
    ) -> Call<'a, Written> {
        Box::pin(ExecutorClient::write(self, request_id, op, authority))
    }
}
