//! `DiskUsage`: where one visible container's disk goes, and the engine's
//! totals, shaped like inspect (no control characters, nothing that looks
//! like a secret in a path).

use super::*;
use crate::docker::DiskUsage;

impl ExecutorService {
    pub(super) async fn disk_usage(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::DiskUsageResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let permit = self.permit_read(call, &req.container).await?;
        let usage = self.docker.disk_usage(&permit).await?;
        call.entry.result = format!(
            "layer={}B mounts={} engine={}",
            usage.writable_layer_bytes,
            usage.mounts.len(),
            if usage.engine.is_ok() {
                "ok"
            } else {
                "unavailable"
            }
        );
        Ok(shape_disk(usage))
    }
}

fn shape_disk(d: DiskUsage) -> pb::DiskUsageResponse {
    let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
    let (engine, engine_error) = match d.engine {
        Ok(e) => (
            Some(pb::EngineDiskUsage {
                images_bytes: e.images_bytes,
                build_cache_bytes: e.build_cache_bytes,
                reclaimable_bytes: e.reclaimable_bytes,
                images: e.images,
            }),
            String::new(),
        ),
        Err(e) => (None, text(&e)),
    };
    pb::DiskUsageResponse {
        container_id: d.container_id,
        writable_layer_bytes: d.writable_layer_bytes,
        root_fs_bytes: d.root_fs_bytes,
        mounts: d
            .mounts
            .iter()
            .map(|m| pb::MountUsage {
                r#type: redact::neutralise_controls(&m.kind),
                source: text(&m.source),
                destination: text(&m.destination),
                used_bytes: m.used_bytes,
                limit_bytes: m.limit_bytes,
            })
            .collect(),
        log_driver: text(&d.log_driver),
        log_max_size: text(&d.log_max_size),
        engine,
        engine_error,
    }
}
