# fleetwatch sidecar image: `fleetwatch serve --config /etc/fleetwatch/sidecar.yaml`.
#
#   tools/build_image.sh            # ./dev image: builds with docker, podman or buildah
#   docker build -t fleetwatch:0.1.0 .
#
# Two stages: the builder makes a virtualenv in /opt/fleetwatch (pip, wheels, build
# backend); the final stage copies only that virtualenv onto the same Debian base with the
# Python interpreter (no compiler, no pip, no git). It runs as an unprivileged user
# (uid/gid 65532) with a read-only root filesystem in mind: nothing is written at run time.
# The configuration is a mounted file (a ConfigMap with sidecar.yaml, models.yaml and
# slos.yaml at /etc/fleetwatch/); there is no HEALTHCHECK on purpose: Kubernetes probes
# /healthz and /readyz (see docs/deploy.md).
#
# BASE: a Debian 12 image. debian:bookworm-slim from a registry, or one made locally from
# Debian packages (tools/build_image.sh --local-base, debootstrap) where no image
# registry is reachable; both stages must use the same BASE (the venv points at its
# /usr/bin/python3).
# PIP_FIND_LINKS: a wheel directory inside the build context (e.g. build/wheels made by
# tools/build_image.sh) to install offline with --no-index; empty = PyPI.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS builder
ARG PIP_FIND_LINKS=
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY build/wheels* ./build/wheels/
RUN python3 -m venv /opt/fleetwatch \
 && if [ -n "$PIP_FIND_LINKS" ]; then \
      /opt/fleetwatch/bin/pip install --no-index --find-links "/src/$PIP_FIND_LINKS" 'fleetwatch[otel]'; \
    else /opt/fleetwatch/bin/pip install '/src[otel]'; fi \
 && /opt/fleetwatch/bin/fleetwatch --version \
 && /opt/fleetwatch/bin/pip uninstall -y pip \
 && find /opt/fleetwatch -name '__pycache__' -prune -exec rm -rf {} + \
 && /opt/fleetwatch/bin/python -m compileall -q /opt/fleetwatch/lib

FROM ${BASE} AS final
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* \
 && groupadd --gid 65532 fleetwatch \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin fleetwatch
COPY --from=builder /opt/fleetwatch /opt/fleetwatch
ENV PATH=/opt/fleetwatch/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 9810
ENTRYPOINT ["/opt/fleetwatch/bin/fleetwatch", "serve"]
CMD ["--config", "/etc/fleetwatch/sidecar.yaml"]
