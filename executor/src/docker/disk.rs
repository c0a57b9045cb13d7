//! Where a container's disk goes: its writable layer (inspect with sizes),
//! its mounts (volume sizes as the engine measures them, tmpfs limits), its
//! log settings, and the engine's totals (`/system/df`).
//!
//! `/system/df` changed shape in API 1.52 (`ImageUsage`… instead of
//! `LayersSize`, `Images`…), and bollard models only the new shape, so the
//! engine's answer is read raw and both shapes are understood.

use std::collections::HashMap;

use bollard::query_parameters::InspectContainerOptions;
use serde::Deserialize;

use super::{classify, DockerAdapter, DockerError};
use crate::policy::Permit;

/// One mount and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct MountUsage {
    pub kind: String,
    pub source: String,
    pub destination: String,
    /// -1: the engine does not measure it.
    pub used_bytes: i64,
    /// A tmpfs's size limit; -1: none known.
    pub limit_bytes: i64,
}

/// The engine's totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineDisk {
    pub images_bytes: i64,
    pub containers_bytes: i64,
    pub volumes_bytes: i64,
    pub build_cache_bytes: i64,
    pub reclaimable_bytes: i64,
    pub images: u32,
    pub containers: u32,
    pub volumes: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskUsage {
    pub writable_layer_bytes: i64,
    pub root_fs_bytes: i64,
    pub mounts: Vec<MountUsage>,
    pub log_driver: String,
    pub log_max_size: String,
    /// The engine's totals, or why it could not give them.
    pub engine: Result<EngineDisk, String>,
}

impl DockerAdapter {
    /// One container's disk use and the engine's. The inspect (with sizes)
    /// and `/system/df` run together; when the engine cannot compute its
    /// totals in time, the container's part is still answered.
    pub async fn disk_usage(&self, permit: &Permit) -> Result<DiskUsage, DockerError> {
        let id = permit.container_id();
        // Both walk layers on disk: the logs deadline, which is the longer.
        let deadline = self.timeouts.logs;
        let inspect = self.read("inspect", deadline, || async move {
            self.client()
                .inspect_container(id, Some(InspectContainerOptions { size: true }))
                .await
                .map_err(|e| classify("inspect", id, e))
        });
        let df = self.read("df", deadline, || async move {
            let version = self.client().client_version();
            let (status, body) = self
                .raw
                .get(&version, "/system/df?verbose=1")
                .await
                .map_err(|e| DockerError::Unavailable(format!("df: {e}")))?;
            if !status.is_success() {
                return Err(DockerError::Unavailable(format!(
                    "df: engine answered {status}"
                )));
            }
            engine_disk(&body).map_err(|e| DockerError::Rejected {
                operation: "df",
                message: e,
            })
        });
        let (inspect, engine) = tokio::join!(inspect, df);
        let r = inspect?;
        let host = r.host_config.unwrap_or_default();
        let engine = engine.map_err(|e| e.to_string());
        let volume_sizes: HashMap<String, i64> = match &engine {
            Ok((_, sizes)) => sizes.clone(),
            Err(_) => HashMap::new(),
        };
        let tmpfs_mount_limits: HashMap<String, i64> = host
            .mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let size = m.tmpfs_options.and_then(|t| t.size_bytes)?;
                Some((m.target?, if size > 0 { size } else { -1 }))
            })
            .collect();
        let mut mounts: Vec<MountUsage> = r
            .mounts
            .unwrap_or_default()
            .into_iter()
            .map(|m| {
                let kind = m.typ.map(|t| t.to_string()).unwrap_or_default();
                let name = m.name.filter(|n| !n.is_empty());
                let destination = m.destination.unwrap_or_default();
                let used_bytes = match (&name, kind.as_str()) {
                    (Some(n), "volume") => volume_sizes.get(n).copied().unwrap_or(-1),
                    _ => -1,
                };
                let limit_bytes = if kind == "tmpfs" {
                    tmpfs_mount_limits.get(&destination).copied().unwrap_or(-1)
                } else {
                    -1
                };
                MountUsage {
                    source: name.or(m.source).unwrap_or_default(),
                    kind,
                    destination,
                    used_bytes,
                    limit_bytes,
                }
            })
            .collect();
        // `--tmpfs` mounts are not in Mounts, only in HostConfig.
        let mut tmpfs: Vec<(String, String)> = host.tmpfs.unwrap_or_default().into_iter().collect();
        tmpfs.sort();
        for (destination, options) in tmpfs {
            if mounts.iter().any(|m| m.destination == destination) {
                continue;
            }
            mounts.push(MountUsage {
                kind: "tmpfs".into(),
                source: "tmpfs".into(),
                destination,
                used_bytes: -1,
                limit_bytes: tmpfs_size(&options),
            });
        }
        let log = host.log_config.unwrap_or_default();
        Ok(DiskUsage {
            writable_layer_bytes: r.size_rw.unwrap_or(-1),
            root_fs_bytes: r.size_root_fs.unwrap_or(-1),
            mounts,
            log_driver: log.typ.unwrap_or_default(),
            log_max_size: log
                .config
                .unwrap_or_default()
                .get("max-size")
                .cloned()
                .unwrap_or_default(),
            engine: engine.map(|(totals, _)| totals),
        })
    }
}

/// The `size=` of tmpfs options (`rw,noexec,size=1m`), in bytes; -1 when
/// none is given or it is a percentage of memory.
pub(crate) fn tmpfs_size(options: &str) -> i64 {
    let Some(size) = options
        .split(',')
        .find_map(|o| o.trim().strip_prefix("size="))
    else {
        return -1;
    };
    let (digits, unit) = size.split_at(
        size.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(size.len()),
    );
    let Ok(n) = digits.parse::<i64>() else {
        return -1;
    };
    let multiplier: i64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return -1,
    };
    n.checked_mul(multiplier).unwrap_or(-1)
}

/// `/system/df` before API 1.52.
#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct LegacyDf {
    layers_size: Option<i64>,
    images: Option<Vec<LegacyImage>>,
    containers: Option<Vec<LegacyContainer>>,
    volumes: Option<Vec<Volume>>,
    build_cache: Option<Vec<LegacyCache>>,
    // From API 1.52.
    image_usage: Option<Usage>,
    container_usage: Option<Usage>,
    volume_usage: Option<Usage>,
    build_cache_usage: Option<Usage>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct LegacyImage {
    size: i64,
    shared_size: i64,
    containers: i64,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct LegacyContainer {
    size_rw: i64,
    state: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Volume {
    name: String,
    usage_data: Option<VolumeUsageData>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct VolumeUsageData {
    size: i64,
    ref_count: i64,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct LegacyCache {
    size: i64,
    in_use: bool,
    shared: bool,
}

/// A category of `/system/df` from API 1.52 on.
#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Usage {
    total_count: i64,
    reclaimable: i64,
    total_size: i64,
    /// Only with `verbose=1`; volumes are `Volume` objects.
    items: Option<Vec<serde_json::Value>>,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The engine's totals and each volume's measured size (by name), from
/// either shape of `/system/df`.
pub(crate) fn engine_disk(body: &[u8]) -> Result<(EngineDisk, HashMap<String, i64>), String> {
    let df: LegacyDf = serde_json::from_slice(body)
        .map_err(|e| format!("the engine's disk usage is not the JSON expected: {e}"))?;
    let mut volume_sizes = HashMap::new();
    let mut add_volume = |v: &Volume| {
        if let Some(u) = &v.usage_data {
            if u.size >= 0 && !v.name.is_empty() {
                volume_sizes.insert(v.name.clone(), u.size);
            }
        }
    };
    let totals = if let Some(images) = &df.images {
        // Before 1.52: sum what the lists give, as `docker system df` does.
        let containers = df.containers.as_deref().unwrap_or_default();
        let volumes = df.volumes.as_deref().unwrap_or_default();
        let caches = df.build_cache.as_deref().unwrap_or_default();
        volumes.iter().for_each(&mut add_volume);
        let images_bytes = df.layers_size.unwrap_or(0).max(0);
        let images_used: i64 = images
            .iter()
            .filter(|i| i.containers > 0 && i.size >= 0 && i.shared_size >= 0)
            .map(|i| i.size - i.shared_size)
            .sum();
        let sized = || {
            volumes
                .iter()
                .filter_map(|v| v.usage_data.as_ref())
                .filter(|u| u.size >= 0)
        };
        let volumes_bytes: i64 = sized().map(|u| u.size).sum();
        let volumes_free: i64 = sized().filter(|u| u.ref_count == 0).map(|u| u.size).sum();
        let containers_bytes: i64 = containers.iter().map(|c| c.size_rw.max(0)).sum();
        let containers_free: i64 = containers
            .iter()
            .filter(|c| c.state != "running")
            .map(|c| c.size_rw.max(0))
            .sum();
        let cache_bytes: i64 = caches
            .iter()
            .filter(|c| !c.shared)
            .map(|c| c.size.max(0))
            .sum();
        let cache_free: i64 = caches
            .iter()
            .filter(|c| !c.shared && !c.in_use)
            .map(|c| c.size.max(0))
            .sum();
        EngineDisk {
            images_bytes,
            containers_bytes,
            volumes_bytes,
            build_cache_bytes: cache_bytes,
            reclaimable_bytes: (images_bytes - images_used).max(0)
                + containers_free
                + volumes_free
                + cache_free,
            images: count(images.len()),
            containers: count(containers.len()),
            volumes: count(volumes.len()),
        }
    } else {
        // From 1.52: the engine's own totals per category.
        let of = |u: &Option<Usage>| {
            let u = u.as_ref();
            (
                u.map_or(0, |u| u.total_size.max(0)),
                u.map_or(0, |u| u.reclaimable.max(0)),
                u.map_or(0, |u| {
                    u32::try_from(u.total_count.max(0)).unwrap_or(u32::MAX)
                }),
            )
        };
        let (images_bytes, images_free, images) = of(&df.image_usage);
        let (containers_bytes, containers_free, containers) = of(&df.container_usage);
        let (volumes_bytes, volumes_free, volumes) = of(&df.volume_usage);
        let (build_cache_bytes, cache_free, _) = of(&df.build_cache_usage);
        for item in df
            .volume_usage
            .as_ref()
            .and_then(|u| u.items.as_ref())
            .into_iter()
            .flatten()
        {
            if let Ok(v) = serde_json::from_value::<Volume>(item.clone()) {
                add_volume(&v);
            }
        }
        EngineDisk {
            images_bytes,
            containers_bytes,
            volumes_bytes,
            build_cache_bytes,
            reclaimable_bytes: images_free + containers_free + volumes_free + cache_free,
            images,
            containers,
            volumes,
        }
    };
    Ok((totals, volume_sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_before_api_1_52_is_summed_as_docker_system_df_does() {
        let body = br#"{
            "LayersSize": 1000,
            "Images": [
                {"Size": 600, "SharedSize": 100, "Containers": 1},
                {"Size": 300, "SharedSize": 100, "Containers": 0}
            ],
            "Containers": [
                {"SizeRw": 50, "State": "running"},
                {"SizeRw": 70, "State": "exited"},
                {"SizeRw": -1, "State": "created"}
            ],
            "Volumes": [
                {"Name": "pgdata", "UsageData": {"Size": 4000, "RefCount": 1}},
                {"Name": "old", "UsageData": {"Size": 900, "RefCount": 0}},
                {"Name": "nfs", "UsageData": {"Size": -1, "RefCount": 1}}
            ],
            "BuildCache": [
                {"Size": 20, "InUse": true, "Shared": false},
                {"Size": 30, "InUse": false, "Shared": false},
                {"Size": 99, "InUse": false, "Shared": true}
            ],
            "BuilderSize": 0
        }"#;
        let (t, sizes) = engine_disk(body).expect("parsed");
        assert_eq!(t.images_bytes, 1000);
        assert_eq!(t.containers_bytes, 120);
        assert_eq!(t.volumes_bytes, 4900);
        assert_eq!(t.build_cache_bytes, 50);
        // images 1000 - 500 in use, a stopped container, an unused volume,
        // the cache not in use.
        assert_eq!(t.reclaimable_bytes, 500 + 70 + 900 + 30);
        assert_eq!((t.images, t.containers, t.volumes), (2, 3, 3));
        assert_eq!(sizes.get("pgdata"), Some(&4000));
        assert_eq!(sizes.get("nfs"), None, "an unmeasured volume has no size");
    }

    #[test]
    fn the_shape_from_api_1_52_uses_the_engines_totals() {
        let body = br#"{
            "ImageUsage": {"ActiveCount": 1, "TotalCount": 4, "Reclaimable": 300, "TotalSize": 1000},
            "ContainerUsage": {"ActiveCount": 1, "TotalCount": 2, "Reclaimable": 70, "TotalSize": 120},
            "VolumeUsage": {"ActiveCount": 1, "TotalCount": 2, "Reclaimable": 900, "TotalSize": 4900,
                "Items": [{"Name": "pgdata", "UsageData": {"Size": 4000, "RefCount": 1}}]},
            "BuildCacheUsage": {"TotalCount": 0, "Reclaimable": 0, "TotalSize": 0}
        }"#;
        let (t, sizes) = engine_disk(body).expect("parsed");
        assert_eq!(
            t,
            EngineDisk {
                images_bytes: 1000,
                containers_bytes: 120,
                volumes_bytes: 4900,
                build_cache_bytes: 0,
                reclaimable_bytes: 1270,
                images: 4,
                containers: 2,
                volumes: 2,
            }
        );
        assert_eq!(sizes.get("pgdata"), Some(&4000));
    }

    #[test]
    fn an_answer_that_is_not_json_is_an_error_that_says_so() {
        let err = engine_disk(b"<html>").expect_err("refused");
        assert!(err.contains("not the JSON expected"), "{err}");
        // An empty object is an engine with nothing on it.
        let (t, _) = engine_disk(b"{}").expect("parsed");
        assert_eq!(t, EngineDisk::default());
    }

    #[test]
    fn tmpfs_sizes_are_read_in_docker_units() {
        assert_eq!(tmpfs_size("rw,noexec,size=1m"), 1 << 20);
        assert_eq!(tmpfs_size("size=64k"), 64 << 10);
        assert_eq!(tmpfs_size("size=2G,mode=1777"), 2 << 30);
        assert_eq!(tmpfs_size("size=4096"), 4096);
        assert_eq!(tmpfs_size("size=50%"), -1);
        assert_eq!(tmpfs_size("rw"), -1);
        assert_eq!(tmpfs_size("size=99999999999999999g"), -1);
    }
}
