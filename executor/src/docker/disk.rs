//! Where a container's disk goes: its writable layer (inspect with sizes),
//! its mounts (volume sizes as the engine measures them, tmpfs limits), its
//! log settings, and what the engine holds that belongs to no container
//! (images, build cache) from `/system/df`.
//!
//! `/system/df` changed shape in API 1.52 (`ImageUsage`… instead of
//! `LayersSize`, `Images`…), and bollard models only the new shape, so the
//! engine's answer is read raw and both shapes are understood. It walks
//! every layer and volume on the host, so one answer is shared by all
//! callers for `DF_FRESH` (one call in flight at a time), and only a 5xx or
//! a lost connection is tried again.
//!
//! Containers and volumes other than the one asked about may be outside the
//! caller's scope: their figures never leave here, not even as totals.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::query_parameters::InspectContainerOptions;
use serde::Deserialize;

use super::{classify, DockerAdapter, DockerError};
use crate::policy::{Permit, Read};

/// How long one `/system/df` answer is reused.
const DF_FRESH: Duration = Duration::from_secs(60);
/// How long a failed one is (so a struggling engine is not asked again at
/// once by every caller).
const DF_FAILED_FRESH: Duration = Duration::from_secs(10);

/// One `/system/df` answer and when it came.
pub(super) type DfCache = Arc<tokio::sync::Mutex<Option<(Instant, Result<Df, String>)>>>;

/// What drydock keeps of `/system/df`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Df {
    pub engine: EngineDisk,
    /// Each measured volume's size, by name (looked up only for the mounts
    /// of the container asked about).
    pub volume_sizes: HashMap<String, i64>,
}

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

/// What the engine holds that belongs to no container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineDisk {
    pub images_bytes: i64,
    pub build_cache_bytes: i64,
    pub reclaimable_bytes: i64,
    pub images: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskUsage {
    pub container_id: String,
    pub writable_layer_bytes: i64,
    pub root_fs_bytes: i64,
    pub mounts: Vec<MountUsage>,
    pub log_driver: String,
    pub log_max_size: String,
    /// The engine's totals, or why it could not give them.
    pub engine: Result<EngineDisk, String>,
}

impl DockerAdapter {
    /// One container's disk use and the engine's. Three reads together: a
    /// plain inspect (mounts, log settings: required), an inspect with
    /// sizes and `/system/df` (both walk layers on disk, so each may fail
    /// or run out of time alone, leaving -1 or `engine_error`).
    pub async fn disk_usage(&self, permit: &Permit<Read>) -> Result<DiskUsage, DockerError> {
        let id = permit.container_id();
        let deadline = self.timeouts.logs;
        let plain = self.read("inspect", self.timeouts.read, || async move {
            self.client()
                .inspect_container(id, None::<InspectContainerOptions>)
                .await
                .map_err(|e| classify("inspect", id, e))
        });
        let sized = self.read("inspect", deadline, || async move {
            self.client()
                .inspect_container(id, Some(InspectContainerOptions { size: true }))
                .await
                .map_err(|e| classify("inspect", id, e))
        });
        let (r, sized, df) = tokio::join!(plain, sized, self.df(deadline));
        let r = r?;
        let (size_rw, size_root_fs) = match sized {
            Ok(s) => (s.size_rw.unwrap_or(-1), s.size_root_fs.unwrap_or(-1)),
            Err(e) => {
                tracing::warn!(container = id, error = %e, "container sizes unavailable");
                (-1, -1)
            }
        };
        let host = r.host_config.unwrap_or_default();
        let no_sizes = HashMap::new();
        let volume_sizes = df.as_ref().map_or(&no_sizes, |d| &d.volume_sizes);
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
            container_id: id.to_string(),
            writable_layer_bytes: size_rw,
            root_fs_bytes: size_root_fs,
            mounts,
            log_driver: log.typ.unwrap_or_default(),
            log_max_size: log
                .config
                .unwrap_or_default()
                .get("max-size")
                .cloned()
                .unwrap_or_default(),
            engine: df.map(|d| d.engine),
        })
    }

    /// `/system/df`, shared: a fresh answer is reused, and while one call
    /// is in flight the others wait for it rather than start their own.
    async fn df(&self, deadline: Duration) -> Result<Df, String> {
        let fetch = async {
            let mut cached = self.df_cache.lock().await;
            if let Some((at, answer)) = cached.as_ref() {
                let fresh = if answer.is_ok() {
                    DF_FRESH
                } else {
                    DF_FAILED_FRESH
                };
                if at.elapsed() < fresh {
                    return answer.clone();
                }
            }
            let answer = self
                .read("df", deadline, || async move {
                    let version = self.client().client_version();
                    let (status, body) = self
                        .raw
                        .get(&version, "/system/df?verbose=1")
                        .await
                        .map_err(|e| match e {
                            super::transport::RawError::Connection(e) => {
                                DockerError::Unavailable(format!("df: {e}"))
                            }
                            super::transport::RawError::Answer(e) => DockerError::Rejected {
                                operation: "df",
                                message: e,
                            },
                        })?;
                    if status.is_server_error() {
                        return Err(DockerError::Unavailable(format!(
                            "df: engine answered {status}"
                        )));
                    }
                    if !status.is_success() {
                        return Err(DockerError::Rejected {
                            operation: "df",
                            message: format!("engine answered {status}"),
                        });
                    }
                    parse_df(&body).map_err(|e| DockerError::Rejected {
                        operation: "df",
                        message: e,
                    })
                })
                .await
                .map_err(|e| e.to_string());
            *cached = Some((Instant::now(), answer.clone()));
            answer
        };
        // Waiting for another caller's answer counts against the deadline.
        tokio::time::timeout(deadline, fetch)
            .await
            .unwrap_or_else(|_| Err(format!("docker did not answer df within {deadline:?}")))
    }
}

/// The `size=` of tmpfs options (`rw,noexec,size=1m`), in bytes, in the
/// kernel's binary suffixes; -1 when none is given or it is a percentage
/// of memory.
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
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        "e" => 60,
        _ => return -1,
    };
    n.checked_mul(1i64 << shift).unwrap_or(-1)
}

/// `/system/df`: before API 1.52 the lists, from 1.52 the engine's own
/// totals per category. Unknown fields are ignored.
#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct DfAnswer {
    layers_size: Option<i64>,
    images: Option<Vec<LegacyImage>>,
    volumes: Option<Vec<Volume>>,
    build_cache: Option<Vec<LegacyCache>>,
    image_usage: Option<Usage>,
    volume_usage: Option<VolumeUsage>,
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
struct Volume {
    name: String,
    usage_data: Option<VolumeUsageData>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct VolumeUsageData {
    size: i64,
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
}

/// The volumes' category, whose items (with `verbose=1`) carry each
/// volume's size; the other categories' items are not read at all.
#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct VolumeUsage {
    items: Option<Vec<Volume>>,
}

fn sum(values: impl Iterator<Item = i64>) -> i64 {
    values.fold(0i64, |a, v| a.saturating_add(v.max(0)))
}

/// What drydock keeps of either shape of `/system/df`.
pub(crate) fn parse_df(body: &[u8]) -> Result<Df, String> {
    let df: DfAnswer = serde_json::from_slice(body)
        .map_err(|e| format!("the engine's disk usage is not the JSON expected: {e}"))?;
    let volumes = df
        .volumes
        .or_else(|| df.volume_usage.and_then(|u| u.items))
        .unwrap_or_default();
    let volume_sizes = volumes
        .into_iter()
        .filter_map(|v| {
            let size = v.usage_data?.size;
            (size >= 0 && !v.name.is_empty()).then_some((v.name, size))
        })
        .collect();
    let engine = match (&df.images, &df.image_usage) {
        // Before 1.52: as `docker system df` sums them.
        (Some(images), _) => {
            let caches = df.build_cache.as_deref().unwrap_or_default();
            let images_bytes = df.layers_size.unwrap_or(0).max(0);
            let images_used = sum(images
                .iter()
                .filter(|i| i.containers > 0 && i.size >= 0 && i.shared_size >= 0)
                .map(|i| i.size - i.shared_size));
            let cache = || caches.iter().filter(|c| !c.shared);
            EngineDisk {
                images_bytes,
                build_cache_bytes: sum(cache().map(|c| c.size)),
                reclaimable_bytes: (images_bytes - images_used)
                    .max(0)
                    .saturating_add(sum(cache().filter(|c| !c.in_use).map(|c| c.size))),
                images: u32::try_from(images.len()).unwrap_or(u32::MAX),
            }
        }
        // From 1.52: the engine's own totals.
        (None, images) => {
            let images = images.as_ref();
            let cache = df.build_cache_usage.as_ref();
            EngineDisk {
                images_bytes: images.map_or(0, |u| u.total_size.max(0)),
                build_cache_bytes: cache.map_or(0, |u| u.total_size.max(0)),
                reclaimable_bytes: sum([
                    images.map(|u| u.reclaimable),
                    cache.map(|u| u.reclaimable),
                ]
                .into_iter()
                .flatten()),
                images: images.map_or(0, |u| {
                    u32::try_from(u.total_count.max(0)).unwrap_or(u32::MAX)
                }),
            }
        }
    };
    Ok(Df {
        engine,
        volume_sizes,
    })
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
            "Containers": [{"SizeRw": 50, "State": "running", "Names": ["/hidden"]}],
            "Volumes": [
                {"Name": "pgdata", "UsageData": {"Size": 4000, "RefCount": 1}},
                {"Name": "nfs", "UsageData": {"Size": -1, "RefCount": 1}}
            ],
            "BuildCache": [
                {"Size": 20, "InUse": true, "Shared": false},
                {"Size": 30, "InUse": false, "Shared": false},
                {"Size": 99, "InUse": false, "Shared": true}
            ],
            "BuilderSize": 0
        }"#;
        let df = parse_df(body).expect("parsed");
        assert_eq!(
            df.engine,
            EngineDisk {
                images_bytes: 1000,
                build_cache_bytes: 50,
                // images 1000 - 500 in use, the cache not in use.
                reclaimable_bytes: 500 + 30,
                images: 2,
            }
        );
        assert_eq!(df.volume_sizes.get("pgdata"), Some(&4000));
        assert_eq!(
            df.volume_sizes.get("nfs"),
            None,
            "an unmeasured volume has no size"
        );
    }

    #[test]
    fn the_shape_from_api_1_52_uses_the_engines_totals() {
        let body = br#"{
            "ImageUsage": {"ActiveCount": 1, "TotalCount": 4, "Reclaimable": 300, "TotalSize": 1000,
                "Items": [{"Id": "sha256:aa", "Size": 1000}]},
            "ContainerUsage": {"ActiveCount": 1, "TotalCount": 2, "Reclaimable": 70, "TotalSize": 120},
            "VolumeUsage": {"ActiveCount": 1, "TotalCount": 2, "Reclaimable": 900, "TotalSize": 4900,
                "Items": [{"Name": "pgdata", "UsageData": {"Size": 4000, "RefCount": 1}}]},
            "BuildCacheUsage": {"TotalCount": 1, "Reclaimable": 5, "TotalSize": 7}
        }"#;
        let df = parse_df(body).expect("parsed");
        assert_eq!(
            df.engine,
            EngineDisk {
                images_bytes: 1000,
                build_cache_bytes: 7,
                reclaimable_bytes: 305,
                images: 4,
            }
        );
        assert_eq!(df.volume_sizes.get("pgdata"), Some(&4000));
    }

    #[test]
    fn an_answer_that_is_not_json_is_an_error_and_absurd_sizes_do_not_overflow() {
        let err = parse_df(b"<html>").expect_err("refused");
        assert!(err.contains("not the JSON expected"), "{err}");
        // An empty object is an engine with nothing on it.
        assert_eq!(parse_df(b"{}").expect("parsed"), Df::default());
        let huge = format!(
            r#"{{"LayersSize": 0, "Images": [], "BuildCache": [{{"Size": {m}}}, {{"Size": {m}}}]}}"#,
            m = i64::MAX
        );
        let df = parse_df(huge.as_bytes()).expect("parsed");
        assert_eq!(df.engine.build_cache_bytes, i64::MAX);
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_engine_df_and_a_fresh_answer_is_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        // `/system/df` answers after a pause and is counted; every other
        // path answers `{}`.
        let df_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = df_calls.clone();
        let engine = super::super::fake_engine::start(
            dir.path(),
            Arc::new(move |head: String| {
                let counted = counted.clone();
                Box::pin(async move {
                    if !head.contains("/system/df") {
                        return ("application/json", "{}".to_string());
                    }
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    (
                        "application/json",
                        r#"{"LayersSize": 7, "Images": [], "Volumes": [{"Name": "v", "UsageData": {"Size": 3}}]}"#.to_string(),
                    )
                })
            }),
        )
        .await;
        let adapter = DockerAdapter::connect(
            &engine.endpoint,
            super::super::Timeouts {
                read: Duration::from_secs(5),
                logs: Duration::from_secs(5),
                write: Duration::from_secs(5),
            },
        )
        .await
        .expect("adapter");
        let answers =
            futures::future::join_all((0..8).map(|_| adapter.df(Duration::from_secs(5)))).await;
        for a in &answers {
            let df = a.as_ref().expect("answer");
            assert_eq!(df.engine.images_bytes, 7);
            assert_eq!(df.volume_sizes.get("v"), Some(&3));
        }
        assert_eq!(
            df_calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "one in flight"
        );
        adapter.df(Duration::from_secs(5)).await.expect("answer");
        assert_eq!(
            df_calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "reused while fresh"
        );
        // A caller whose deadline ends while another's call is in flight
        // gets an error, not a wait beyond its deadline.
        *adapter.df_cache.lock().await = None;
        let slow = adapter.df(Duration::from_secs(5));
        let impatient = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            adapter.df(Duration::from_millis(50)).await
        };
        let (slow, impatient) = tokio::join!(slow, impatient);
        assert!(slow.is_ok());
        let err = impatient.expect_err("timed out");
        assert!(err.contains("did not answer df"), "{err}");
    }

    #[test]
    fn tmpfs_sizes_are_read_in_the_kernels_units() {
        assert_eq!(tmpfs_size("rw,noexec,size=1m"), 1 << 20);
        assert_eq!(tmpfs_size("size=64k"), 64 << 10);
        assert_eq!(tmpfs_size("size=2G,mode=1777"), 2 << 30);
        assert_eq!(tmpfs_size("size=1t"), 1 << 40);
        assert_eq!(tmpfs_size("size=4096"), 4096);
        assert_eq!(tmpfs_size("size=50%"), -1);
        assert_eq!(tmpfs_size("rw"), -1);
        assert_eq!(tmpfs_size("size=99999999999999999g"), -1);
    }
}
