//! A full disk is followed to the filesystem that is full: the `DiskUsage`
//! read becomes evidence, and the disk_full cause says which mount (or
//! layer, or the engine itself) the failed write was on.

use super::{Engine, Stop};
use crate::disk;
use crate::model::*;
use crate::rules;

impl Engine {
    /// For a `disk_full` finding: read where the target's disk goes, keep
    /// it as evidence, and name the full filesystem in the cause. A failed
    /// read leaves the cause as it was (the log line still stands).
    pub(super) async fn examine_disk(
        &self,
        req: &Request,
        finding: &rules::Finding,
        c: &ContainerView,
        diagnosis: &mut Diagnosis,
    ) -> Result<(), Stop> {
        let Some(cause) = diagnosis
            .causes
            .iter_mut()
            .find(|c| c.class == FaultClass::DiskFull)
        else {
            return Ok(());
        };
        let usage = match self.exec(&req.id).disk_usage(&req.id, &c.id).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(request_id = %req.id, error = %e, "disk usage unavailable");
                return Ok(());
            }
        };
        let (line, engine_error) = disk::failed_line(finding.matched_line.as_deref(), c);
        let location = disk::locate(&line, engine_error, &usage);
        let ev = self
            .add_evidence(
                &req.id,
                "DiskUsage",
                EvidencePayload::DiskUsage(usage.clone()),
                disk::summary(&usage),
            )
            .await?;
        if let Some(said) = disk::finding(&location, &usage) {
            cause.reason = format!("{} {said}", cause.reason.trim_end());
        }
        cause.evidence_ids.push(ev);
        Ok(())
    }
}
