#!/usr/bin/env bash
# drydock on Docker Swarm (deploy/stack.yaml), from a DRYDOCK_HOME written by
# `drydock init --layout swarm`. Run it as root on the manager node that is
# to run drydock (docs/deploy.md, "Services on Docker Swarm"):
#
#   deploy/swarm-deploy.sh HOME audit-init   # once, for a new installation
#   deploy/swarm-deploy.sh HOME up           # deploy, or update after a change
#   deploy/swarm-deploy.sh HOME down         # remove the stack (volumes stay)
#   deploy/swarm-deploy.sh HOME restore NAME # both stores from the backups
#                                            # named NAME in their volumes
#
# `up` labels this node `drydock=true` (both services are placed on it),
# mounts a small tmpfs of its own on /run/drydock-agent (the agent's socket
# folder: the agent's user and the operator's group, 0750; the agent can
# fill nothing else of the host), names every secret and config after a
# hash of this home's files (Swarm secrets cannot change in place, so a
# changed key is a new secret) and runs `docker stack deploy`.
#
# Variables (all have defaults): DRYDOCK_STACK (drydock), DRYDOCK_TAG
# (latest), DOCKER_SOCKET (/var/run/docker.sock; the docker CLI itself
# follows DOCKER_HOST), DRYDOCK_AGENT_GID: the group, besides root, whose
# processes may use the agent's socket. By default the group of the user
# who ran sudo; run by root itself, none (root only). Never 0. It becomes
# the agent's own group, so name the operator's group, not a shared one
# like `users`. sudo drops these variables: pass them after it
# (`sudo DRYDOCK_AGENT_GID=1000 deploy/swarm-deploy.sh HOME up`).
#
#   deploy/swarm-deploy.sh HOME down         # also umounts the socket folder
#                                            # and removes the node label
set -euo pipefail

if [ $# -ne 2 ] && ! { [ $# -eq 3 ] && [ "$2" = restore ]; }; then
  echo "usage: $0 DRYDOCK_HOME audit-init|up|down, or $0 DRYDOCK_HOME restore BACKUP_NAME" >&2
  exit 2
fi
home="$(cd "$1" && pwd)"
command="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stack="${DRYDOCK_STACK:-drydock}"
tag="${DRYDOCK_TAG:-latest}"
socket="${DOCKER_SOCKET:-/var/run/docker.sock}"
executor_uid=65532
agent_uid=65533
socket_dir=/run/drydock-agent

fail() { echo "$0: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (sudo $0 ...): it makes $socket_dir for uid $agent_uid"
[ -S "$socket" ] || fail "$socket is not a socket: set DOCKER_SOCKET to the Docker socket's path on this node"
if [ "$(docker info --format '{{.Swarm.ControlAvailable}}' 2>/dev/null)" != "true" ]; then
  fail "this engine is not a Swarm manager: run it on a manager node (docker swarm init, or docker node promote)"
fi
grep -q '^layout: swarm$' "$home/cli.yaml" 2>/dev/null \
  || fail "$home was not written by \`drydock init --layout swarm\` (its cli.yaml says another layout)"
for f in executor.yaml agent.token pki/ca.crt pki/executor.crt pki/executor.key \
         pki/healthcheck.crt pki/healthcheck.key pki/audit.key pki/agent.crt pki/agent.key; do
  [ -f "$home/$f" ] || fail "$home/$f is missing; run \`drydock init --layout swarm\` first"
done

# The executor's config and keys, handed to its user in a private folder
# for one run of its image on the stack's volume (the executor checks its
# whole config, keys included): `executor_once ARGS...`.
executor_once() {
  local tmp
  tmp="$(mktemp -d)"
  chmod 0711 "$tmp"
  install -d -m 0755 "$tmp/pki"
  install -m 0644 "$home/executor.yaml" "$tmp/executor.yaml"
  install -m 0644 "$home/pki/ca.crt" "$home/pki/executor.crt" "$home/pki/healthcheck.crt" "$tmp/pki/"
  install -m 0600 -o "$executor_uid" -g "$executor_uid" \
    "$home/pki/executor.key" "$home/pki/healthcheck.key" "$home/pki/audit.key" "$tmp/pki/"
  docker volume create "${stack}_executor-state" >/dev/null
  local status=0
  docker run --rm --network none --read-only --cap-drop ALL \
    --user "$executor_uid:$executor_uid" \
    -v "${stack}_executor-state:/var/lib/drydock" \
    -v "$tmp:/etc/drydock:ro" \
    "drydock-executor:$tag" "$@" || status=$?
  rm -rf "$tmp"
  return "$status"
}

case "$command" in
  audit-init)
    # The executor never creates a missing audit store by itself (a new
    # store would forget which approvals were used): make it once, in the
    # volume the stack will use, with the executor's own image and config.
    executor_once audit init
    ;;
  restore)
    # Both services stopped (scaled to 0) while their stores are replaced;
    # each old store is moved aside, never deleted; then both start again.
    name="$3"
    [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] && [ "$name" != . ] && [ "$name" != .. ] \
      || fail "BACKUP_NAME \`$name\` must be a folder name under /var/lib/drydock/backups (letters, digits, . _ -)"
    docker service scale "${stack}_agent=0" "${stack}_executor=0" >/dev/null
    executor_once audit restore --from "/var/lib/drydock/backups/$name" --move-aside
    docker run --rm --network none --read-only --cap-drop ALL \
      --user "$agent_uid:$agent_uid" \
      -v "${stack}_agent-state:/var/lib/drydock" \
      -v "$here/swarm/agent.yaml:/etc/drydock/agent.yaml:ro" \
      "drydock-agent:$tag" restore --from "/var/lib/drydock/backups/$name" --move-aside
    docker service scale "${stack}_executor=1" "${stack}_agent=1" >/dev/null
    echo "restored both stores from backup $name and started the services again"
    ;;
  up)
    if [ -n "${DRYDOCK_AGENT_GID:-}" ]; then
      agent_gid="$DRYDOCK_AGENT_GID"
      [[ "$agent_gid" =~ ^[0-9]+$ ]] || fail "DRYDOCK_AGENT_GID \`$agent_gid\` is not a group id (a number, as \`id -g\` prints it)"
      [ "$agent_gid" -ne 0 ] || fail "DRYDOCK_AGENT_GID=0 would admit every process of group root: name the operator's own group (id -g OPERATOR), or leave it unset for root only"
      admits="root and processes whose primary group is $agent_gid"
    elif [ -n "${SUDO_GID:-}" ] && [ "$SUDO_GID" -ne 0 ]; then
      agent_gid="$SUDO_GID"
      admits="root and processes whose primary group is $agent_gid (the group of ${SUDO_USER:-the user who ran sudo})"
    else
      # Root itself: the agent's own group, which nobody else has.
      agent_gid="$agent_uid"
      admits="root only (to let an operator's group in: sudo DRYDOCK_AGENT_GID=\$(id -g OPERATOR) $0 $1 up)"
    fi
    docker node update --label-add drydock=true "$(docker info --format '{{.Swarm.NodeID}}')" >/dev/null
    install -d -m 0750 -o "$agent_uid" -g "$agent_gid" "$socket_dir"
    if ! mountpoint -q "$socket_dir"; then
      mount -t tmpfs -o "size=1m,nr_inodes=64,nosuid,nodev,noexec,mode=0750,uid=$agent_uid,gid=$agent_gid" \
        drydock-agent "$socket_dir"
    fi
    # One suffix for every secret and config of this deployment: a hash of
    # the files they come from.
    suffix="$(cat "$home/executor.yaml" "$here/swarm/agent.yaml" "$home/agent.token" "$home"/pki/*.crt \
      "$home/pki/executor.key" "$home/pki/healthcheck.key" "$home/pki/audit.key" "$home/pki/agent.key" \
      | sha256sum | cut -c1-12)"
    DRYDOCK_STACK="$stack" DRYDOCK_HOME="$home" DOCKER_GID="$(stat -c %g "$socket")" DOCKER_SOCKET="$socket" \
      DRYDOCK_AGENT_GID="$agent_gid" DRYDOCK_TAG="$tag" DRYDOCK_SECRETS="$suffix" \
      docker stack deploy --prune -c "$here/stack.yaml" "$stack"
    # Secrets and configs of earlier deployments that no service uses now.
    for kind in secret config; do
      docker "$kind" ls --format '{{.Name}}' | grep "^${stack}_.*_[0-9a-f]\{12\}$" | grep -v "_$suffix\$" \
        | xargs -r docker "$kind" rm >/dev/null 2>&1 || true
    done
    echo "deployed stack $stack; the agent's socket is $socket_dir/agent.sock (cli.yaml's agent_url); it admits $admits"
    ;;
  down)
    docker stack rm "$stack"
    if mountpoint -q "$socket_dir"; then umount "$socket_dir" || true; fi
    rmdir "$socket_dir" 2>/dev/null || true
    docker node update --label-rm drydock "$(docker info --format '{{.Swarm.NodeID}}')" >/dev/null 2>&1 || true
    echo "removed stack $stack; its volumes (${stack}_executor-state holds the audit chain) stay: \`docker volume rm\` them to delete"
    ;;
  *)
    fail "unknown command \`$command\`: audit-init, up or down"
    ;;
esac
