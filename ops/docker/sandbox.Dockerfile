# The image dagwright's docker sandbox runs model-written code in (settings.sandbox_image):
# Debian 12 with its python3 and nothing else: no pip, no compiler, no shell tools added.
# The container's limits (read-only root, no network, tmpfs /tmp and /scratch, uid 65534)
# are set per run by dagwright/sandbox/docker.py, not here.
#   docker build -t dagwright-sandbox:latest -f ops/docker/sandbox.Dockerfile ops/docker
# Without a registry, ops/docker/start-test-dockerd.sh builds the same content by
# debootstrap and tags it dagwright-sandbox:latest.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && mkdir -m 1777 /scratch
# "nobody" (65534) exists in Debian's base passwd; never run as root, even by mistake.
USER 65534:65534
WORKDIR /scratch
CMD ["python3"]
