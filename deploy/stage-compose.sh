#!/usr/bin/env bash
# Stage, from a DRYDOCK_HOME written by `drydock init --executor-name executor`,
# exactly the files each container of deploy/compose.yaml may read, each
# owned by the user that container runs as:
#
#   <dest>/executor/executor.yaml                 root 0644  (from the home: approvers, policy)
#   <dest>/executor/pki/{ca,executor,healthcheck}.crt  root 0644
#   <dest>/executor/pki/{executor,healthcheck,audit}.key  65532 0600  (the executor refuses
#                                                        a key readable by others)
#   <dest>/agent/agent.yaml                       root 0644  (deploy/compose/agent.yaml)
#   <dest>/agent/pki/{ca,agent}.crt               root 0644
#   <dest>/agent/pki/agent.key, agent.token       65533 0600
#
# The approver's private key, the CA's key and the agent token never reach
# the executor's folder; the approver key, the CA key, the executor's key and
# the health-check key never reach the agent's. Run it as root (it sets
# owners), again after `drydock init --force` or an edit of executor.yaml,
# then restart the stack.
#
# It also writes deploy/.env, which docker-compose reads for every command
# run with `-f deploy/compose.yaml` (up, exec, restart, down): the project
# name, DRYDOCK_STAGED, DOCKER_GID, DOCKER_SOCKET, the agent's port (from the
# home's cli.yaml) and the image tag. Variables set when the script runs win
# (COMPOSE_PROJECT_NAME, DOCKER_SOCKET, DRYDOCK_TAG, DRYDOCK_AGENT_PORT,
# DRYDOCK_HEALTH_INTERVAL). The file belongs to the checkout's owner, who
# writes it (root never writes into a folder another user can change).
#
#   sudo deploy/stage-compose.sh "$DRYDOCK_HOME" /etc/drydock-compose
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 DRYDOCK_HOME DEST" >&2
  exit 2
fi
home="$1"
dest="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Must match `user:` in deploy/compose.yaml and USER in the images.
executor_uid=65532
agent_uid=65533

if [ "$(id -u)" -ne 0 ]; then
  echo "$0: run as root (sudo $0 ...): the keys are handed to uid $executor_uid (executor) and $agent_uid (agent)" >&2
  exit 1
fi
case "$dest" in
  /*) ;;
  *) dest="$(pwd)/$dest" ;;
esac
socket="${DOCKER_SOCKET:-/var/run/docker.sock}"
if [ ! -S "$socket" ]; then
  echo "$0: $socket is not a socket: set DOCKER_SOCKET to the Docker socket's path" >&2
  exit 1
fi
# The port cli.yaml's agent_url names is the one compose must publish.
agent_port="${DRYDOCK_AGENT_PORT:-$(sed -n 's|^agent_url: http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$home/cli.yaml" 2>/dev/null | head -n 1 || true)}"
if ! [[ "$agent_port" =~ ^[0-9]{1,5}$ ]] || [ "$agent_port" -lt 1 ] || [ "$agent_port" -gt 65535 ]; then
  echo "$0: $home/cli.yaml does not name a loopback TCP agent_url with a port (1-65535); run \`drydock init --layout compose\` (or set DRYDOCK_AGENT_PORT)" >&2
  exit 1
fi
# Every value written into deploy/.env: plain characters only, so that none
# can add a line or be interpolated by compose.
for value in "$dest" "$socket" "${COMPOSE_PROJECT_NAME:-drydock}" "${DRYDOCK_TAG:-latest}" "${DRYDOCK_HEALTH_INTERVAL:-10s}"; do
  if ! [[ "$value" =~ ^[A-Za-z0-9_./:-]+$ ]]; then
    echo "$0: \`$value\` has characters deploy/.env cannot hold safely (allowed: letters, digits, _ . / : -)" >&2
    exit 1
  fi
done
for f in executor.yaml agent.token pki/ca.crt pki/executor.crt pki/executor.key \
         pki/healthcheck.crt pki/healthcheck.key pki/agent.crt pki/agent.key; do
  if [ ! -f "$home/$f" ]; then
    echo "$0: $home/$f is missing; run \`drydock init --executor-name executor\` first" >&2
    exit 1
  fi
done

umask 077
# Replace rather than update: a file the new home no longer has (or a file
# that should never have been here) must not survive a re-stage.
rm -rf "${dest:?}/executor.new" "${dest:?}/agent.new"
install -d -m 0755 "$dest"

e="$dest/executor.new"
install -d -m 0755 "$e" "$e/pki"
install -m 0644 "$home/executor.yaml" "$e/executor.yaml"
install -m 0644 "$home/pki/ca.crt" "$home/pki/executor.crt" "$home/pki/healthcheck.crt" "$e/pki/"
install -m 0600 -o "$executor_uid" -g "$executor_uid" \
  "$home/pki/executor.key" "$home/pki/healthcheck.key" "$e/pki/"
# The key that signs audit checkpoints (executor.yaml: audit.signing_key).
# Its public half, pki/audit.pub, stays with the operator for `audit verify`.
if [ -f "$home/pki/audit.key" ]; then
  install -m 0600 -o "$executor_uid" -g "$executor_uid" "$home/pki/audit.key" "$e/pki/"
fi

a="$dest/agent.new"
install -d -m 0755 "$a" "$a/pki"
install -m 0644 "$here/compose/agent.yaml" "$a/agent.yaml"
install -m 0644 "$home/pki/ca.crt" "$home/pki/agent.crt" "$a/pki/"
install -m 0600 -o "$agent_uid" -g "$agent_uid" "$home/pki/agent.key" "$a/pki/"
install -m 0600 -o "$agent_uid" -g "$agent_uid" "$home/agent.token" "$a/agent.token"

# Swap the folders in. A running container keeps seeing the old folder (its
# bind mount pins the old directory) until it is restarted:
# `docker-compose restart` mounts the new one.
for d in executor agent; do
  rm -rf "${dest:?}/$d.old"
  if [ -e "$dest/$d" ]; then mv "$dest/$d" "$dest/$d.old"; fi
  mv "$dest/$d.new" "$dest/$d"
  rm -rf "${dest:?}/$d.old"
done
echo "staged $dest/executor and $dest/agent"

# What every later docker-compose command needs: compose reads .env from the
# compose file's folder. Written whole into a temporary file, then renamed.
# The folder is the checkout's, which its owner can change while this runs:
# the file is written as that owner (setpriv), so root never writes through
# a link they swapped in.
env_file="$here/.env"
as_owner=()
if [ "$(stat -c %u "$here")" -ne 0 ]; then
  as_owner=(setpriv --reuid="$(stat -c %u "$here")" --regid="$(stat -c %g "$here")" --clear-groups)
fi
{
  echo "# Written by deploy/stage-compose.sh; read by docker-compose -f deploy/compose.yaml."
  echo "COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-drydock}"
  echo "DRYDOCK_STAGED=$dest"
  echo "DOCKER_GID=$(stat -c %g "$socket")"
  echo "DOCKER_SOCKET=$socket"
  echo "DRYDOCK_AGENT_PORT=$agent_port"
  echo "DRYDOCK_TAG=${DRYDOCK_TAG:-latest}"
  if [ -n "${DRYDOCK_HEALTH_INTERVAL:-}" ]; then
    echo "DRYDOCK_HEALTH_INTERVAL=$DRYDOCK_HEALTH_INTERVAL"
  fi
} | "${as_owner[@]}" bash -c 'set -euo pipefail
  # A new file of our own (O_EXCL), never one planted under a fixed name.
  tmp="$(mktemp "$1.XXXXXX")"
  cat > "$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$1"' stage-env "$env_file"
echo "wrote $env_file (project ${COMPOSE_PROJECT_NAME:-drydock}): docker-compose -f deploy/compose.yaml up -d, exec, restart and down need no other variables"
