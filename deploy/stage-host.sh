#!/usr/bin/env bash
# Stage, from the folder `drydock host add NAME --layout compose` wrote,
# exactly the files deploy/host.yaml's executor may read, each owned by the
# user it runs as:
#
#   <dest>/executor/executor.yaml                          root 0644
#   <dest>/executor/pki/{ca,executor,healthcheck}.crt      root 0644
#   <dest>/executor/pki/{executor,healthcheck,audit}.key   65532 0600
#
# and write <dest>/host.env, which every later command reads with
# `docker-compose --env-file <dest>/host.env -f deploy/host.yaml`: the
# project name, DRYDOCK_STAGED, DOCKER_GID, DOCKER_SOCKET, the address and
# port to publish on, and the image tag. Everything it writes is in <dest>,
# a folder only root may change: nothing goes into the checkout, which its
# user could swap for a link while root writes. Variables set when the script runs
# win (COMPOSE_PROJECT_NAME, DOCKER_SOCKET, DRYDOCK_EXECUTOR_PORT,
# DRYDOCK_TAG, DRYDOCK_HEALTH_INTERVAL). Run it as root, again after a new
# `drydock host add --force`, then restart the executor.
#
#   sudo deploy/stage-host.sh HOST_FOLDER /etc/drydock-host ADDRESS
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 HOST_FOLDER DEST ADDRESS   (HOST_FOLDER: what \`drydock host add\` wrote; ADDRESS: this host's private IPv4 address)" >&2
  exit 2
fi
src="$1"
dest="$2"
address="$3"
# Must match `user:` in deploy/host.yaml and USER in the image.
executor_uid=65532

if [ "$(id -u)" -ne 0 ]; then
  echo "$0: run as root (sudo $0 ...): the keys are handed to uid $executor_uid" >&2
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
for f in executor.yaml pki/ca.crt pki/executor.crt pki/executor.key pki/healthcheck.crt pki/healthcheck.key; do
  if [ ! -f "$src/$f" ]; then
    echo "$0: $src/$f is missing; copy the whole folder \`drydock host add NAME --layout compose\` wrote" >&2
    exit 1
  fi
done
if ! grep -q '^host:' "$src/executor.yaml"; then
  echo "$0: $src/executor.yaml names no host: it is not from \`drydock host add\`" >&2
  exit 1
fi
# The port the host's executor.yaml listens on is the one the agent dials.
port="${DRYDOCK_EXECUTOR_PORT:-$(sed -n 's|^listen: .*:\([0-9][0-9]*\)$|\1|p' "$src/executor.yaml" | head -n 1)}"
if ! [[ "$port" =~ ^[0-9]{1,5}$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
  echo "$0: no port (1-65535) in $src/executor.yaml's listen line; set DRYDOCK_EXECUTOR_PORT" >&2
  exit 1
fi
# The executor is published on this address only: a private IPv4 address,
# never every interface.
if ! [[ "$address" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || [ "$address" = "0.0.0.0" ]; then
  echo "$0: \`$address\` is not an IPv4 address of this host (0.0.0.0 would publish the executor on every interface)" >&2
  exit 1
fi
# Every value written into host.env: plain characters only, so that none
# can add a line or be interpolated by compose.
for value in "$dest" "$socket" "$address" "${COMPOSE_PROJECT_NAME:-drydock-host}" "${DRYDOCK_TAG:-latest}" "${DRYDOCK_HEALTH_INTERVAL:-10s}"; do
  if ! [[ "$value" =~ ^[A-Za-z0-9_./:-]+$ ]]; then
    echo "$0: \`$value\` has characters host.env cannot hold safely (allowed: letters, digits, _ . / : -)" >&2
    exit 1
  fi
done

umask 077
install -d -m 0755 -o root -g root "$dest"
if [ -L "$dest" ] || [ "$(stat -c %u "$dest")" -ne 0 ] || [ -n "$(find "$dest" -maxdepth 0 -perm /022)" ]; then
  echo "$0: $dest must be a folder owned by root that no one else may write (it holds the executor's keys)" >&2
  exit 1
fi
e="$dest/executor.new"
rm -rf "${e:?}"
install -d -m 0755 "$e" "$e/pki"
install -m 0644 "$src/executor.yaml" "$e/executor.yaml"
install -m 0644 "$src/pki/ca.crt" "$src/pki/executor.crt" "$src/pki/healthcheck.crt" "$e/pki/"
install -m 0600 -o "$executor_uid" -g "$executor_uid" \
  "$src/pki/executor.key" "$src/pki/healthcheck.key" "$e/pki/"
if [ -f "$src/pki/audit.key" ]; then
  install -m 0600 -o "$executor_uid" -g "$executor_uid" "$src/pki/audit.key" "$e/pki/"
fi
rm -rf "${dest:?}/executor.old"
if [ -e "$dest/executor" ]; then mv "$dest/executor" "$dest/executor.old"; fi
mv "$e" "$dest/executor"
rm -rf "${dest:?}/executor.old"
echo "staged $dest/executor"

env_file="$dest/host.env"
env_tmp="$(mktemp "$dest/host.env.XXXXXX")"
{
  echo "# Written by deploy/stage-host.sh; read with docker-compose --env-file $env_file -f deploy/host.yaml."
  echo "COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-drydock-host}"
  echo "DRYDOCK_STAGED=$dest"
  echo "DOCKER_GID=$(stat -c %g "$socket")"
  echo "DOCKER_SOCKET=$socket"
  echo "DRYDOCK_EXECUTOR_ADDRESS=$address"
  echo "DRYDOCK_EXECUTOR_PORT=$port"
  echo "DRYDOCK_TAG=${DRYDOCK_TAG:-latest}"
  if [ -n "${DRYDOCK_HEALTH_INTERVAL:-}" ]; then
    echo "DRYDOCK_HEALTH_INTERVAL=$DRYDOCK_HEALTH_INTERVAL"
  fi
} > "$env_tmp"
chmod 0644 "$env_tmp"
mv -f "$env_tmp" "$env_file"
echo "wrote $env_file: docker-compose --env-file $env_file -f deploy/host.yaml up -d (and run, logs, down)"
