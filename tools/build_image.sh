#!/usr/bin/env bash
# Build the fleetwatch sidecar image (the `./dev image` developer tool; never run in CI).
#
#   tools/build_image.sh [--tag NAME] [--local-base] [--offline]
#
# Uses the first container builder that works here: docker (with a running daemon),
# podman, then buildah. --local-base makes the Debian 12 base image from Debian packages
# with debootstrap (for machines that reach Debian's package mirror but no image
# registry) and tags it localhost/fleetwatch-base:bookworm. --offline first builds the
# project's wheels on the host (pip wheel, with the host's pip configuration) into
# build/wheels/ and installs from them with --no-index inside the build.
# After the build it runs `fleetwatch --version` in the image and prints the image's size.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=fleetwatch:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
LOCAL_BASE=0
OFFLINE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --local-base) LOCAL_BASE=1; shift ;;
    --offline) OFFLINE=1; shift ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  BUILD=(docker build); RUN=(docker run --rm); TOOL=docker
elif command -v podman >/dev/null 2>&1; then
  BUILD=(podman build); RUN=(podman run --rm); TOOL=podman
elif command -v buildah >/dev/null 2>&1; then
  BUILD=(buildah bud --isolation chroot); RUN=(); TOOL=buildah
else
  echo "build_image: no container builder (docker with a daemon, podman or buildah);" \
       "on Debian: apt-get install buildah (or podman)" >&2
  exit 3
fi
echo "build_image: using $TOOL" >&2

ARGS=()
if [ "$LOCAL_BASE" = 1 ]; then
  BASE=localhost/fleetwatch-base:bookworm
  if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "build_image: apt-get install debootstrap" >&2; exit 3; }
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    debootstrap --variant=minbase bookworm "$mnt" http://deb.debian.org/debian >&2
    rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/*
    buildah umount "$ctr" >/dev/null
    buildah config --cmd /bin/bash "$ctr"
    buildah commit --rm "$ctr" "$BASE" >&2
  fi
  ARGS+=(--build-arg "BASE=$BASE")
fi
if [ "$OFFLINE" = 1 ]; then
  rm -rf build/wheels
  python3 -m pip wheel -q --wheel-dir build/wheels '.[otel]'
  ARGS+=(--build-arg PIP_FIND_LINKS=build/wheels)
else
  mkdir -p build/wheels  # the Dockerfile's COPY build/wheels* needs it to exist (empty)
fi

"${BUILD[@]}" "${ARGS[@]}" -t "$TAG" -f Dockerfile .
if [ "$TOOL" = buildah ]; then
  ctr=$(buildah from "$TAG")
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT  # also when a check fails
  buildah run --isolation chroot "$ctr" -- /opt/fleetwatch/bin/fleetwatch --version
  buildah run --isolation chroot "$ctr" -- id
  # no build tools in the final stage: no pip, compiler or make on PATH
  buildah run --isolation chroot "$ctr" -- /bin/sh -c \
    'for t in pip pip3 gcc cc make git; do command -v $t && exit 1; done; echo "no build tools"'
  buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$TAG"
else
  "${RUN[@]}" --entrypoint /opt/fleetwatch/bin/fleetwatch "$TAG" --version
  "${RUN[@]}" --entrypoint id "$TAG"
fi
echo "build_image: built $TAG" >&2
