#!/usr/bin/env bash
# Builds the image testdata/etcd-cluster/stack.hcl runs: an image FROM
# scratch holding Debian's etcd binary (/usr/bin/etcd, from the etcd-server
# package), the shared libraries ldd says it needs, and the static launcher
# (testdata/etcd-cluster/launcher) that turns the etcdmember flavor's init
# script into etcd's environment; tagged infrakit-etcd:latest (or $1). No
# registry is involved. Needs go, ldd and the docker CLI; ETCD_BIN names
# another etcd binary.
#
#   testdata/etcd-cluster/build-image.sh [TAG]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tag="${1:-infrakit-etcd:latest}"
etcd="${ETCD_BIN:-/usr/bin/etcd}"
[ -x "$etcd" ] || { echo "build-image.sh: $etcd not found; install Debian's etcd-server package or set ETCD_BIN" >&2; exit 1; }
ctx="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-etcd.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

mkdir -p "$ctx/rootfs/usr/bin"
cp "$etcd" "$ctx/rootfs/usr/bin/etcd"
(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$ctx/rootfs/launcher" ./testdata/etcd-cluster/launcher)
# The libraries (and the loader) by the paths the binary asks for them.
ldd "$etcd" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
	mkdir -p "$ctx/rootfs$(dirname "$lib")"
	cp -L "$lib" "$ctx/rootfs$lib"
done
cp "$here/Dockerfile" "$ctx/Dockerfile"
# The legacy builder warns that it is deprecated when buildx is missing;
# either builder makes the same image from this Dockerfile.
docker build -q -t "$tag" "$ctx" 2> >(grep -v -e 'DEPRECATED' -e 'buildx' -e 'BuildKit' -e '^ *$' >&2 || true) >/dev/null
echo "built $tag"
