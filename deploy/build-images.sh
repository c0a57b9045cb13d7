#!/usr/bin/env bash
# Build the drydock-executor and drydock-agent images with no registry:
# compile both daemons as fully static binaries on this host, then copy each
# into a `FROM scratch` image (deploy/images/*.Dockerfile) from a temporary
# build context that holds nothing but the binary and an empty state folder.
#
#   deploy/build-images.sh            # tags drydock-executor:latest, drydock-agent:latest
#   DRYDOCK_TAG=v1 deploy/build-images.sh
#   DRYDOCK_PROFILE=release deploy/build-images.sh   # keep symbols, for debugging
#
# It prints each image's size in bytes (the figure docs/deploy.md quotes):
#   docker image inspect -f '{{.Size}}' drydock-executor:latest drydock-agent:latest
#
# Hosts that can pull `rust:` images can use the multi-stage deploy/Dockerfile
# instead; both produce the same final images.
set -euo pipefail

tag="${DRYDOCK_TAG:-latest}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
target="$(uname -m)-unknown-linux-gnu"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
# Cargo.toml's `image` profile: the release build with symbols stripped.
profile="${DRYDOCK_PROFILE:-image}"

# RUSTFLAGS apply to the target only (because of --target), so build scripts
# and proc macros stay ordinary host programs.
(cd "$root" && RUSTFLAGS='-C target-feature=+crt-static' \
  "${CARGO:-cargo}" build --profile "$profile" --locked --target "$target" -p drydock-executor -p drydock-agent)

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
for daemon in executor agent; do
  rm -rf "${ctx:?}"/*
  cp "$target_dir/$target/$profile/drydock-$daemon" "$ctx/"
  # An empty folder: COPY --chown makes /var/lib/drydock the daemon user's,
  # and a new named volume mounted there starts with that owner.
  mkdir "$ctx/state"
  cp "$here/images/$daemon.Dockerfile" "$ctx/Dockerfile"
  docker build -q -t "drydock-$daemon:$tag" "$ctx" >/dev/null
  echo "drydock-$daemon:$tag $(docker image inspect -f '{{.Size}}' "drydock-$daemon:$tag") bytes"
done
