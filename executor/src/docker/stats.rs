//! `ContainerStats`: resource use now, with a CPU share from two one-shot
//! engine samples.

use futures::StreamExt as _;

use super::{classify, cpu_percent, DockerAdapter, DockerError, StatsSnapshot, CPU_WINDOW};
use crate::policy::{Permit, Read};
use bollard::query_parameters::StatsOptions;

impl DockerAdapter {
    /// One stats sample of the container.
    async fn stats_sample(
        &self,
        id: &str,
        one_shot: bool,
    ) -> Result<bollard::models::ContainerStatsResponse, DockerError> {
        self.read("stats", self.timeouts.read, || async move {
            let mut stream = self.client().stats(
                id,
                Some(StatsOptions {
                    stream: false,
                    one_shot,
                }),
            );
            match stream.next().await {
                Some(item) => item.map_err(|e| classify("stats", id, e)),
                None => Err(DockerError::Unavailable("stats: empty answer".into())),
            }
        })
        .await
    }

    /// Resource use now, with the CPU share between two one-shot samples.
    /// Docker's own two-sample answer (`stream=false`) waits two cycles of
    /// its collector, about 2 s. A first one-shot sample comes at once; the
    /// second, asked for `CPU_WINDOW` later, comes at the collector's next
    /// cycle: about 1 s in all, over a window of about a second. An engine
    /// that ignores one-shot (API < 1.41) answers with both samples, which
    /// are used as they are.
    pub async fn stats(&self, permit: &Permit<Read>) -> Result<StatsSnapshot, DockerError> {
        let id = permit.container_id();
        let first = self.stats_sample(id, true).await?;
        let has_previous = |s: &bollard::models::ContainerStatsResponse| {
            s.precpu_stats
                .as_ref()
                .and_then(|p| p.system_cpu_usage)
                .is_some_and(|v| v > 0)
        };
        let s = if has_previous(&first) {
            first
        } else {
            tokio::time::sleep(CPU_WINDOW).await;
            let mut second = self.stats_sample(id, true).await?;
            if !has_previous(&second) {
                second.precpu_stats = first.cpu_stats;
            }
            second
        };
        let cpu = s.cpu_stats.clone().unwrap_or_default();
        let precpu = s.precpu_stats.clone().unwrap_or_default();
        let usage = cpu.cpu_usage.clone().unwrap_or_default();
        let pre_usage = precpu.cpu_usage.unwrap_or_default();
        let cpus = cpu
            .online_cpus
            .or_else(|| usage.percpu_usage.as_ref().map(|v| v.len() as u32))
            .unwrap_or(1);
        let (rx, tx) = s
            .networks
            .as_ref()
            .map(|n| {
                n.values().fold((0u64, 0u64), |(r, t), v| {
                    (
                        r.saturating_add(v.rx_bytes.unwrap_or(0)),
                        t.saturating_add(v.tx_bytes.unwrap_or(0)),
                    )
                })
            })
            .unwrap_or((0, 0));
        let (read, write) = s
            .blkio_stats
            .and_then(|b| b.io_service_bytes_recursive)
            .map(|entries| {
                entries.iter().fold((0u64, 0u64), |(r, w), e| {
                    let value = e.value.unwrap_or(0);
                    match e.op.as_deref().map(str::to_ascii_lowercase).as_deref() {
                        Some("read") => (r.saturating_add(value), w),
                        Some("write") => (r, w.saturating_add(value)),
                        _ => (r, w),
                    }
                })
            })
            .unwrap_or((0, 0));
        let memory = s.memory_stats.unwrap_or_default();
        Ok(StatsSnapshot {
            cpu_percent: cpu_percent(
                usage.total_usage.unwrap_or(0),
                pre_usage.total_usage.unwrap_or(0),
                cpu.system_cpu_usage.unwrap_or(0),
                precpu.system_cpu_usage.unwrap_or(0),
                cpus,
            ),
            online_cpus: cpus,
            memory_usage: memory.usage.unwrap_or(0),
            memory_limit: memory.limit.unwrap_or(0),
            network_rx: rx,
            network_tx: tx,
            block_read: read,
            block_write: write,
            pids: s.pids_stats.and_then(|p| p.current).unwrap_or(0),
        })
    }
}
