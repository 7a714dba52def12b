# The image dagwright's docker sandbox runs model-written code in (settings.sandbox_image):
# Debian 12 with its python3 and nothing else: no pip, no compiler, no shell tools added.
# The container's limits (read-only root, no network, tmpfs /tmp and /scratch, uid 65534)
# are set per run by dagwright/sandbox/docker.py, not here.
#   docker build -t dagwright-sandbox:latest -f ops/docker/sandbox.Dockerfile ops/docker
# Packages the code may import (settings.sandbox_packages) are installed here, at build
# time, from the package index pip reaches during the build: the container never has a
# network, and pip is removed again. Space-separated requirement specifiers:
#   docker build --build-arg SANDBOX_PACKAGES="six attrs==23.2.0" -t dagwright-sandbox:latest \
#     -f ops/docker/sandbox.Dockerfile ops/docker
# run_python's description and the coder's prompt list what the image holds (asked of a
# container), so rebuild the image and restart the workers after changing the list.
# Without a registry, ops/docker/start-test-dockerd.sh builds the same content by
# debootstrap and tags it dagwright-sandbox:latest (with no packages).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG SANDBOX_PACKAGES=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && if [ -n "$SANDBOX_PACKAGES" ]; then \
      apt-get install -y --no-install-recommends python3-pip \
      && pip3 install --no-cache-dir --break-system-packages $SANDBOX_PACKAGES \
      && apt-get purge -y --auto-remove python3-pip; \
    fi \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && chmod -R a+rX /usr/local/lib \
 && mkdir -m 1777 /scratch
# "nobody" (65534) exists in Debian's base passwd; never run as root, even by mistake.
USER 65534:65534
WORKDIR /scratch
CMD ["python3"]
