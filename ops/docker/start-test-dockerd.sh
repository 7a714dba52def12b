#!/usr/bin/env bash
# Start a throw-away Docker engine for the sandbox tests, from Debian 12 packages, entirely
# under $ROOT (nothing installed system-wide), and build the sandbox image with no registry
# pull (debootstrap + docker import): the same content as ops/docker/sandbox.Dockerfile (a
# minimal Debian with python3; "nobody" is uid 65534), tagged with the image name dagwright
# uses by default. Needs root and the machine's Debian apt sources. Prints
# "export DOCKER_HOST=..." on success; progress and errors go to stderr.
#   eval "$(ROOT=/var/tmp/dockertest bash ops/docker/start-test-dockerd.sh)"   # start (idempotent)
#   ROOT=/var/tmp/dockertest bash ops/docker/start-test-dockerd.sh stop         # stop
# Where a registry is reachable, `docker build -t dagwright-sandbox:latest -f
# ops/docker/sandbox.Dockerfile ops/docker` gives an equivalent image.
set -euo pipefail
ROOT=${ROOT:-/var/tmp/dockertest}
IMAGE=${IMAGE:-dagwright-sandbox:latest}
SOCK=unix://$ROOT/docker.sock
# dockerd runs iptables inside each container's network namespace for its embedded DNS
# (how compose services find each other by name), even with --iptables=false: it must be
# on dockerd's PATH, which a minimal environment (env -i) leaves without /usr/sbin.
export PATH=$ROOT/pkg/usr/bin:$ROOT/pkg/usr/sbin:$PATH:/usr/sbin:/sbin

if [[ ${1:-} == stop ]]; then
  if [[ -f $ROOT/dockerd.pid ]]; then
    pid=$(cat "$ROOT/dockerd.pid"); kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  fi
  # shims of containers whose start failed can outlive dockerd: end only ours, by pid
  for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $ROOT/" || true); do kill -KILL "$p" || true; done
  exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/debian-mirror.sh"

mkdir -p "$ROOT"/{debs,pkg,data,exec}
if [[ ! -x $ROOT/pkg/usr/sbin/dockerd ]]; then
  echo "downloading docker.io containerd runc tini debootstrap into $ROOT" >&2
  download() { (cd "$ROOT/debs" && apt-get download docker.io containerd runc tini debootstrap >/dev/null); }
  download || { apt-get update -qq && download; }  # a fresh machine may have no package lists
  for d in "$ROOT"/debs/*.deb; do dpkg-deb -x "$d" "$ROOT/pkg"; done
fi
if ! command -v iptables >/dev/null; then  # Debian's docker.io depends on it
  apt-get install -y -qq iptables >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq iptables >/dev/null; }
fi
if ! DOCKER_HOST=$SOCK docker version >/dev/null 2>&1; then
  echo "starting dockerd on $SOCK (log: $ROOT/dockerd.log)" >&2
  nohup dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" \
        --pidfile "$ROOT/dockerd.pid" -H "$SOCK" --iptables=false --ip6tables=false --ip-masq=false \
        --bridge=none --userland-proxy=false >"$ROOT/dockerd.log" 2>&1 &
  for _ in $(seq 60); do DOCKER_HOST=$SOCK docker version >/dev/null 2>&1 && break; sleep 0.5; done
  DOCKER_HOST=$SOCK docker version >/dev/null || { echo "dockerd did not start: see $ROOT/dockerd.log" >&2; exit 1; }
fi
if ! DOCKER_HOST=$SOCK docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "building $IMAGE by debootstrap (log: $ROOT/debootstrap.log)" >&2
  rm -rf "$ROOT/rootfs"
  DEBOOTSTRAP_DIR=$ROOT/pkg/usr/share/debootstrap "$ROOT/pkg/usr/sbin/debootstrap" --variant=minbase \
     --include=python3 --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
     bookworm "$ROOT/rootfs" "$(mirror)" >"$ROOT/debootstrap.log" 2>&1
  rm -rf "$ROOT"/rootfs/var/cache/apt/archives/*.deb "$ROOT"/rootfs/var/lib/apt/lists/*
  tar -C "$ROOT/rootfs" -c . | DOCKER_HOST=$SOCK docker import -c 'USER 65534:65534' \
     -c 'CMD ["/usr/bin/python3"]' - "$IMAGE" >/dev/null
  rm -rf "$ROOT/rootfs"
fi
echo "export DOCKER_HOST=$SOCK"
