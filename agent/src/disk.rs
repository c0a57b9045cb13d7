//! Which disk is full. A "no space left on device" line names a path; the
//! container's mounts say which filesystem holds it (a tmpfs with its size
//! limit, a volume, a host directory, or the container's own layer on the
//! engine's disk), and the `DiskUsage` read says how much each holds. That
//! is the difference between "free some space" and "the 1 MiB tmpfs at
//! /run/cache is full".

use crate::model::{ContainerView, DiskUsageView, MountUsageView};
use crate::text::human_bytes;

/// The line that said the disk was full (the log line the rules matched,
/// else the engine's `State.Error`), and whether it is the engine's own,
/// whose paths are the host's, not the container's.
pub fn failed_line(matched_line: Option<&str>, c: &ContainerView) -> (String, bool) {
    match matched_line {
        Some(line) => (line.to_string(), false),
        None if says_full(&c.error) => (c.error.clone(), true),
        None => (String::new(), false),
    }
}

/// Where a line says the disk is full (`no space left on device`,
/// `ENOSPC`, `Disk is full`), as a byte offset.
fn full_at(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    [
        "no space left on device",
        "enospc",
        "disk is full",
        "disk full",
    ]
    .iter()
    .filter_map(|w| lower.find(w))
    .min()
}

fn says_full(line: &str) -> bool {
    full_at(line).is_some()
}

/// Where the write that failed went.
#[derive(Debug, Clone, PartialEq)]
pub enum Location<'a> {
    /// A mount of the container, by the longest matching destination.
    Mount {
        path: String,
        mount: &'a MountUsageView,
    },
    /// Not under any mount: the container's writable layer.
    Layer { path: String },
    /// The engine itself could not write (its data root is full).
    Engine,
    /// No absolute path in the line.
    Unknown,
}

/// The absolute paths of a line, with their byte offsets; a path right
/// after an HTTP method (`POST /api/upload`) is a URL, not a file.
fn paths(line: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, ch) in line.char_indices() {
        if ch != '/'
            || found
                .last()
                .is_some_and(|(at, p): &(usize, String)| i < at + p.len())
        {
            continue;
        }
        let before = &line[..i];
        let starts = before
            .chars()
            .next_back()
            .is_none_or(|p| p.is_whitespace() || "\"'`(=[<:".contains(p))
            && line[i + 1..]
                .chars()
                .next()
                .is_some_and(|n| n.is_alphanumeric() || "._-".contains(n));
        if !starts {
            continue;
        }
        let method = before.split_whitespace().next_back().unwrap_or("");
        if ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"].contains(&method.trim_matches('"')) {
            continue;
        }
        let path: String = line[i..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !"\"'`,;:()[]<>".contains(*c))
            .collect();
        let path = path.trim_end_matches(['.', '/']).to_string();
        if path.len() > 1 {
            found.push((i, path));
        }
    }
    found
}

/// The path a "disk full" line is about: the last absolute path before the
/// words that say so (`copy /a -> /data/b: no space left on device` is
/// `/data/b`), else the first after them (`ENOSPC: …, write '/app/x'`).
pub fn path_in(line: &str) -> Option<String> {
    let found = paths(line);
    let at = full_at(line).unwrap_or(usize::MAX);
    let before = found.iter().rev().find(|(i, _)| *i < at);
    before
        .or_else(|| found.iter().find(|(i, _)| *i > at))
        .or(found.first())
        .map(|(_, p)| p.clone())
}

/// Whether `path` is `dir` or under it, by whole components.
pub fn is_under(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    dir.is_empty()
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The path inside the container of an engine error about its root
/// filesystem: runc's `to rootfs at "/data/sub"`, else the part after an
/// overlay `…/merged` of a host path (`mkdir /var/lib/docker/overlay2/ID/
/// merged/data/sub: no space…` is `/data/sub`).
fn container_path_in_engine_error(text: &str) -> Option<String> {
    if let Some(at) = text.find("rootfs at \"") {
        let rest = &text[at + "rootfs at \"".len()..];
        let path = &rest[..rest.find('"')?];
        if path.starts_with('/') && path.len() > 1 {
            return Some(path.trim_end_matches('/').to_string());
        }
    }
    let at = text.find("/merged/")?;
    paths(&text[at + "/merged".len()..])
        .into_iter()
        .next()
        .map(|(_, p)| p)
}

/// Which filesystem the failed write was on. `engine_error` is true when
/// the line is the engine's own (`State.Error`), whose paths are the
/// host's: a path inside the container's root is taken from it, and since
/// the engine was creating it (a mountpoint), its parent's filesystem is
/// the one that is full.
pub fn locate<'a>(line: &str, engine_error: bool, usage: &'a DiskUsageView) -> Location<'a> {
    let path = if engine_error {
        container_path_in_engine_error(line)
    } else {
        path_in(line)
    };
    let Some(path) = path else {
        return if engine_error {
            Location::Engine
        } else {
            Location::Unknown
        };
    };
    match usage
        .mounts
        .iter()
        .filter(|m| !m.destination.is_empty() && is_under(&path, &m.destination))
        .filter(|m| !(engine_error && m.destination.trim_end_matches('/') == path))
        .max_by_key(|m| m.destination.len())
    {
        Some(mount) => Location::Mount { path, mount },
        // The container's root is on the engine's disk.
        None if engine_error => Location::Engine,
        None => Location::Layer { path },
    }
}

fn size(n: i64) -> Option<String> {
    u64::try_from(n).ok().map(human_bytes)
}

/// One line of evidence: each part of the container's disk and the
/// engine's totals.
pub fn summary(u: &DiskUsageView) -> String {
    let mut parts = Vec::new();
    if let Some(layer) = size(u.writable_layer_bytes) {
        parts.push(format!("writable layer {layer}"));
    }
    for m in &u.mounts {
        let held = match (size(m.used_bytes), size(m.limit_bytes)) {
            (Some(used), _) => format!(" {used}"),
            (None, Some(limit)) => format!(" limit {limit}"),
            _ => String::new(),
        };
        let what = match m.kind.as_str() {
            "volume" => format!("volume {}", m.source),
            "bind" => format!("host {}", m.source),
            other => other.to_string(),
        };
        parts.push(format!("{what} at {}{held}", m.destination));
    }
    if !u.log_driver.is_empty() {
        parts.push(if u.log_max_size.is_empty() {
            format!("log {}, no max-size", u.log_driver)
        } else {
            format!("log {} max-size {}", u.log_driver, u.log_max_size)
        });
    }
    match &u.engine {
        Some(e) => parts.push(format!(
            "engine: {} images {}, build cache {}; {} reclaimable",
            e.images,
            human_bytes(e.images_bytes.max(0) as u64),
            human_bytes(e.build_cache_bytes.max(0) as u64),
            human_bytes(e.reclaimable_bytes.max(0) as u64),
        )),
        None if !u.engine_error.is_empty() => {
            parts.push(format!("engine totals unavailable ({})", u.engine_error))
        }
        None => {}
    }
    parts.join("; ")
}

/// What the location says, for the cause's reason.
pub fn finding(location: &Location<'_>, u: &DiskUsageView) -> Option<String> {
    Some(match location {
        Location::Mount { path, mount } => match mount.kind.as_str() {
            "tmpfs" => format!(
                "{path} is on the tmpfs at {}{}: that mount is what is full, not the host's disk.",
                mount.destination,
                size(mount.limit_bytes)
                    .map(|l| format!(" (limited to {l})"))
                    .unwrap_or_default()
            ),
            "volume" => format!(
                "{path} is on volume {} at {}{}.",
                mount.source,
                mount.destination,
                size(mount.used_bytes)
                    .map(|b| format!(", which holds {b}"))
                    .unwrap_or_default()
            ),
            _ => format!(
                "{path} is on the host's {} (mounted at {}): the host filesystem there is full.",
                mount.source, mount.destination
            ),
        },
        Location::Layer { path } => format!(
            "{path} is in the container's own writable layer{}, on the engine's disk.",
            size(u.writable_layer_bytes)
                .map(|b| format!(" ({b} written)"))
                .unwrap_or_default()
        ),
        Location::Engine => "The engine itself could not write: its data root is full.".into(),
        Location::Unknown => return None,
    })
}

/// What to do, in order: the full filesystem first, then what else holds
/// space (an unbounded log, what the engine could reclaim).
pub fn advice(name: &str, location: &Location<'_>, u: &DiskUsageView) -> Vec<String> {
    let mut out = Vec::new();
    match location {
        Location::Mount { mount, .. } if mount.kind == "tmpfs" => out.push(format!(
            "The tmpfs at {dest} of {name} is full{limit}. Give it more room (`--tmpfs {dest}:size=…`, or the tmpfs size in its compose file) or keep less there, then recreate {name}; a restart empties it, and it fills again.",
            dest = mount.destination,
            limit = size(mount.limit_bytes).map(|l| format!(" (limit {l})")).unwrap_or_default(),
        )),
        Location::Mount { mount, .. } if mount.kind == "volume" => out.push(format!(
            "Volume {vol} at {dest} of {name} is full{held}: free space in it (old data, logs, dumps) or move it to a larger disk, then restart {name}.",
            vol = mount.source,
            dest = mount.destination,
            held = size(mount.used_bytes).map(|b| format!(" ({b})")).unwrap_or_default(),
        )),
        Location::Mount { mount, .. } => out.push(format!(
            "The host filesystem behind {src} (at {dest} in {name}) is full: free space there (`df -h {src}` on the host shows it), then restart {name}.",
            src = mount.source,
            dest = mount.destination,
        )),
        Location::Layer { path } => out.push(format!(
            "{name} writes {path} into its own layer{written}, which lives on the engine's disk: put that directory on a volume, free space on the engine's disk, then recreate {name}.",
            written = size(u.writable_layer_bytes).map(|b| format!(" ({b} so far)")).unwrap_or_default(),
        )),
        Location::Engine => out.push(format!(
            "The engine's own disk is full, so it cannot even start {name}: free space on the Docker data root (`docker system df`), then start it."
        )),
        Location::Unknown => out.push(format!(
            "The disk behind {name} is full. Free space (`docker system df`, old volumes and logs) or grow the volume, then restart it."
        )),
    }
    // What else fills the engine's disk matters unless the full one is a
    // tmpfs (memory).
    if matches!(location, Location::Mount { mount, .. } if mount.kind == "tmpfs") {
        return out;
    }
    if u.log_driver == "json-file" && u.log_max_size.is_empty() {
        out.push(format!(
            "The log of {name} (json-file) has no max-size, so it grows without bound: set `--log-opt max-size=10m --log-opt max-file=3` (compose: `logging.options`)."
        ));
    }
    if let Some(e) = u.engine.as_ref().filter(|e| e.reclaimable_bytes > 0) {
        let free = human_bytes(e.reclaimable_bytes as u64);
        out.push(format!(
            "About {free} on the engine's disk is images no container uses and build cache not in use: `docker image prune -a` and `docker builder prune` free it (`docker system df -v` lists it first)."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EngineDiskView;

    fn mount(kind: &str, source: &str, destination: &str, used: i64, limit: i64) -> MountUsageView {
        MountUsageView {
            kind: kind.into(),
            source: source.into(),
            destination: destination.into(),
            used_bytes: used,
            limit_bytes: limit,
        }
    }

    fn usage() -> DiskUsageView {
        DiskUsageView {
            writable_layer_bytes: 6 << 20,
            root_fs_bytes: 20 << 20,
            mounts: vec![
                mount("volume", "pgdata", "/var/lib/postgresql/data", 4 << 30, -1),
                mount("bind", "/srv/uploads", "/app/uploads", -1, -1),
                mount("tmpfs", "tmpfs", "/run", -1, 1 << 20),
                mount("tmpfs", "tmpfs", "/run/cache", -1, 64 << 10),
            ],
            log_driver: "json-file".into(),
            log_max_size: String::new(),
            engine: Some(EngineDiskView {
                images_bytes: 2 << 30,
                reclaimable_bytes: 700 << 20,
                ..Default::default()
            }),
            container_id: "c0ffee".into(),
            engine_error: String::new(),
        }
    }

    #[test]
    fn paths_are_found_in_the_wordings_of_several_runtimes() {
        for (line, want) in [
            ("write /data/x: no space left on device", Some("/data/x")),
            (
                "Error: ENOSPC: no space left on device, write '/app/cache/a.json'",
                Some("/app/cache/a.json"),
            ),
            (
                "mysqld: Disk is full writing '/var/lib/mysql/tmp/#sql_41a0_0.MAD' (Errcode: 28)",
                Some("/var/lib/mysql/tmp/#sql_41a0_0.MAD"),
            ),
            (
                "OSError: [Errno 28] No space left on device: '/tmp/upload.bin'",
                Some("/tmp/upload.bin"),
            ),
            (
                "write /small/fill.bin: No space left on device (os error 28)",
                Some("/small/fill.bin"),
            ),
            (
                "PANIC:  could not write to file \"pg_wal/xlogtemp.32\": No space left on device",
                None,
            ),
            ("No space left on device", None),
            ("read 3/4 of it: no space", None),
            // The destination, not the source; not a URL.
            (
                "copyfile '/app/a' -> '/data/b': no space left on device",
                Some("/data/b"),
            ),
            (
                "POST /api/upload 500 ENOSPC: no space left on device, write '/srv/up/1.bin'",
                Some("/srv/up/1.bin"),
            ),
        ] {
            assert_eq!(path_in(line).as_deref(), want, "{line}");
        }
    }

    #[test]
    fn only_an_engine_error_about_space_stands_for_the_failed_write() {
        let port = ContainerView {
            error: "driver failed programming external connectivity: port is already allocated"
                .into(),
            ..Default::default()
        };
        assert_eq!(failed_line(None, &port), (String::new(), false));
        let full = ContainerView {
            error: "mkdir /var/lib/docker/overlay2/x/merged/data: no space left on device".into(),
            ..Default::default()
        };
        assert!(failed_line(None, &full).1, "the engine's own");
        assert!(
            !failed_line(Some("write /a: ENOSPC"), &full).1,
            "the log line first"
        );
    }

    #[test]
    fn the_longest_mount_holding_the_path_is_the_one_that_is_full() {
        let u = usage();
        let at = |line: &str| match locate(line, false, &u) {
            Location::Mount { mount, .. } => mount.destination.clone(),
            Location::Layer { .. } => "layer".into(),
            other => format!("{other:?}"),
        };
        let at_engine = |line: &str| match locate(line, true, &u) {
            Location::Mount { mount, .. } => mount.destination.clone(),
            Location::Engine => "engine".into(),
            other => format!("{other:?}"),
        };
        assert_eq!(
            at("write /run/cache/x: no space left on device"),
            "/run/cache"
        );
        assert_eq!(at("write /run/pid: no space left on device"), "/run");
        // `/running` is not under `/run`.
        assert_eq!(at("write /running/x: no space left on device"), "layer");
        assert_eq!(at("ERROR: could not extend file \"/var/lib/postgresql/data/base/1/2\": No space left on device"), "/var/lib/postgresql/data");
        assert_eq!(
            locate(
                "mkdir /var/lib/docker/overlay2/x: no space left on device",
                true,
                &u
            ),
            Location::Engine
        );
        // runc creating a mountpoint (`/run/cache`) inside the tmpfs at
        // `/run`: the parent is full, not the mount being made.
        assert_eq!(at_engine("error mounting \"/var/lib/docker/volumes/v/_data\" to rootfs at \"/run/cache\": mkdir /var/lib/docker/btrfs/subvolumes/3fe6/run/cache: no space left on device"), "/run");
        let runc = "error mounting \"tmpfs\" to rootfs at \"/run/cache\": mkdir /var/lib/docker/fuse-overlayfs/3fe6/merged/run/cache: no space left on device: unknown";
        assert_eq!(at_engine(runc), "/run");
        assert_eq!(
            at_engine("mkdir /var/lib/docker/overlay2/3fe6/merged/srv/x: no space left on device"),
            "engine"
        );
        assert_eq!(
            locate("No space left on device", false, &u),
            Location::Unknown
        );
    }

    #[test]
    fn the_finding_and_the_advice_name_the_full_filesystem_and_its_size() {
        let u = usage();
        let l = locate("write /run/cache/x: no space left on device", false, &u);
        let f = finding(&l, &u).expect("a finding");
        assert!(
            f.contains("tmpfs at /run/cache") && f.contains("64.0 KiB"),
            "{f}"
        );
        let said = advice("web-1", &l, &u);
        assert!(said[0].contains("--tmpfs /run/cache:size="), "{said:?}");
        assert_eq!(
            said.len(),
            1,
            "a tmpfs is memory: the engine's disk is beside the point: {said:?}"
        );
        let said = advice(
            "web-1",
            &Location::Layer {
                path: "/srv/x".into(),
            },
            &u,
        );
        assert!(
            said[0].contains("put that directory on a volume"),
            "{said:?}"
        );
        assert!(
            said.iter().any(|a| a.contains("max-size")),
            "unbounded log: {said:?}"
        );
        assert!(
            said.iter().any(|a| a.contains("700.0 MiB")),
            "reclaimable: {said:?}"
        );

        let l = locate(
            "could not extend file \"/var/lib/postgresql/data/base/1\": No space left on device",
            false,
            &u,
        );
        let f = finding(&l, &u).expect("a finding");
        assert!(f.contains("volume pgdata") && f.contains("4.0 GiB"), "{f}");

        let l = locate("write /srv/x: no space left on device", false, &u);
        assert!(finding(&l, &u)
            .expect("a finding")
            .contains("writable layer (6.0 MiB written)"));

        let mut bounded = usage();
        bounded.log_max_size = "10m".into();
        bounded.engine = None;
        bounded.engine_error = "df: engine answered 500".into();
        let said = advice("web-1", &Location::Unknown, &bounded);
        assert_eq!(said.len(), 1, "nothing more to say: {said:?}");
        let s = summary(&bounded);
        assert!(
            s.contains("engine totals unavailable (df: engine answered 500)"),
            "{s}"
        );
        assert!(
            s.contains("tmpfs at /run/cache limit 64.0 KiB")
                && s.contains("volume pgdata at /var/lib/postgresql/data 4.0 GiB"),
            "{s}"
        );
    }
}
