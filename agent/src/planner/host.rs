//! Advice for a `host_config` fault: the setting of the Docker host (or of
//! the container's limits, which come from the engine) that the log line
//! names, the command that changes it now, and how to keep it across a
//! reboot. A restart or start of the container cannot change any of them,
//! so these faults never get a write step.

use regex::Regex;

/// The number a bootstrap check asks for: `increase to at least [262144]`.
fn wanted(line: &str) -> Option<u64> {
    Regex::new(r"increase to at least \[(\d+)\]")
        .ok()?
        .captures(line)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

/// A `sysctl` of the host: set now, and kept in /etc/sysctl.d.
fn sysctl(name: &str, key: &str, value: u64, file: &str, why: &str) -> String {
    format!(
        "{name} needs the host's kernel setting {key} of at least {value} ({why}); it is a setting of the Docker host, not of the container, so a restart cannot change it. On the host: `sudo sysctl -w {key}={value}`, and to keep it after a reboot: `echo '{key}={value}' | sudo tee /etc/sysctl.d/{file}.conf`. (Docker Desktop: run the sysctl inside its VM, e.g. `wsl -d docker-desktop sysctl -w {key}={value}`.) Then start {name} again."
    )
}

/// A limit set per container (from the engine's defaults unless the
/// container sets its own).
fn ulimit(name: &str, limit: &str, value: &str, compose: &str, why: &str) -> String {
    format!(
        "{name} is held back by its {limit} limit ({why}). Containers get it from the engine's defaults (`default-ulimits` in /etc/docker/daemon.json, or `LimitNOFILE`/`LimitNPROC` of docker.service) unless they set their own: set `{compose}` for the service in its compose file (or `docker run --ulimit {limit}={value}`) and re-create it; a restart keeps the same limit."
    )
}

/// What a person does about the host setting `line` names.
pub fn advice(name: &str, line: &str, detail: Option<&str>) -> String {
    let l = line.to_ascii_lowercase();
    if l.contains("max_map_count") {
        return sysctl(
            name,
            "vm.max_map_count",
            wanted(line).unwrap_or(262_144),
            "99-max-map-count",
            "Elasticsearch, OpenSearch and SonarQube refuse to start below it",
        );
    }
    if l.contains("file watchers") || l.contains("inotify watches") {
        return sysctl(
            name,
            "fs.inotify.max_user_watches",
            524_288,
            "99-inotify",
            "every file it watches takes one, shared by all containers of the same user",
        );
    }
    if l.contains("inotify") || l.contains("fsnotify") {
        return sysctl(
            name,
            "fs.inotify.max_user_instances",
            512,
            "99-inotify",
            "each watcher it creates takes one, shared by all containers of the same user",
        );
    }
    if l.contains("max number of threads") {
        let n = wanted(line).unwrap_or(4096).to_string();
        return ulimit(
            name,
            "nproc",
            &n,
            &format!("ulimits: {{nproc: {n}}}"),
            "it checks the number of threads it may start",
        );
    }
    if l.contains("memory locking") || l.contains("lock memory") || l.contains("mlock") {
        return format!(
            "{} Locking memory also needs the IPC_LOCK capability (`cap_add: [IPC_LOCK]`, `docker run --cap-add IPC_LOCK`), or turn the program's memory locking off if it has a setting for it (Vault: `disable_mlock = true`).",
            ulimit(
                name,
                "memlock",
                "-1:-1",
                "ulimits: {memlock: {soft: -1, hard: -1}}",
                "it was asked to lock its memory and may not",
            )
        );
    }
    if l.contains("native thread")
        || l.contains("pthread_create")
        || l.contains("new thread")
        || l.contains("fork:")
    {
        return format!(
            "{name} could not start another thread or process: it reached a process limit (\"{line}\"). Check the container's `pids_limit` (`docker inspect -f '{{{{.HostConfig.PidsLimit}}}}' {name}`), its nproc ulimit, and on the host `kernel.threads-max` and `kernel.pid_max` (`sysctl kernel.threads-max kernel.pid_max`); raise the one it hits and re-create the container. If its thread count keeps growing, the program leaks threads."
        );
    }
    if l.contains("file descriptors")
        || l.contains("open files")
        || l.contains("emfile")
        || l.contains("open file resource limit")
    {
        let n = wanted(line).unwrap_or(65_535).to_string();
        return ulimit(
            name,
            "nofile",
            &format!("{n}:{n}"),
            &format!("ulimits: {{nofile: {{soft: {n}, hard: {n}}}}}"),
            "it ran out of file descriptors; if the count keeps growing, it leaks them, and a restart only resets the count",
        );
    }
    if let Some(module) = detail.filter(|d| !d.is_empty()) {
        let module = if module == "nat" || module == "filter" || module == "mangle" {
            format!("iptable_{module}")
        } else {
            module.to_string()
        };
        return format!(
            "{name} needs the kernel module {module}, which is not loaded on the Docker host, and a container cannot load modules for the host. On the host: `sudo modprobe {module}`, and to load it at boot: `echo {module} | sudo tee /etc/modules-load.d/{module}.conf`. Then start {name} again."
        );
    }
    format!(
        "{name} is held back by a setting of the Docker host (\"{line}\"). Change it on the host (sysctl, ulimit or kernel module, as the line says) and start {name} again; a restart of the container cannot change it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_gets_its_command() {
        let cases: &[(&str, Option<&str>, &[&str])] = &[
            (
                "bootstrap check failure [1] of [1]: max virtual memory areas vm.max_map_count [65530] is too low, increase to at least [262144]",
                Some("vm.max_map_count"),
                &["sudo sysctl -w vm.max_map_count=262144", "/etc/sysctl.d/99-max-map-count.conf"],
            ),
            (
                "Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'",
                None,
                &["sudo sysctl -w fs.inotify.max_user_watches=524288"],
            ),
            (
                "failed to create fsnotify watcher: too many open files",
                None,
                &["fs.inotify.max_user_instances=512"],
            ),
            (
                "max file descriptors [4096] for elasticsearch process is too low, increase to at least [65535]",
                None,
                &["ulimits: {nofile: {soft: 65535, hard: 65535}}", "--ulimit nofile=65535:65535"],
            ),
            (
                "java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory or process/resource limits reached",
                None,
                &["pids_limit", "kernel.threads-max"],
            ),
            (
                "modprobe: FATAL: Module wireguard not found in directory /lib/modules/6.1.0-13-amd64",
                Some("wireguard"),
                &["sudo modprobe wireguard", "/etc/modules-load.d/wireguard.conf"],
            ),
            (
                "iptables v1.8.7 (legacy): can't initialize iptables table `nat': Table does not exist (do you need to insmod?)",
                Some("nat"),
                &["sudo modprobe iptable_nat"],
            ),
        ];
        for (line, detail, wants) in cases {
            let said = advice("search-es-1", line, *detail);
            for want in *wants {
                assert!(
                    said.contains(want),
                    "{line}\n  advice: {said}\n  lacks: {want}"
                );
            }
            assert!(said.contains("search-es-1"), "{said}");
        }
    }
}
