#!/usr/bin/env bash
# Builds the image the docker stack and demo run: testdata/docker/webserver
# compiled static (CGO_ENABLED=0) and copied into an image FROM scratch,
# tagged infrakit-docker-web:latest (or $1). No registry is involved: the
# Dockerfile needs no base image. Needs go and the docker CLI.
#
#   testdata/docker/build-image.sh [TAG]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tag="${1:-infrakit-docker-web:latest}"
ctx="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-docker-web.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$ctx/webserver" ./testdata/docker/webserver)
cp "$root/testdata/docker/Dockerfile" "$ctx/Dockerfile"
# The legacy builder warns that it is deprecated when buildx is missing;
# either builder makes the same image from this Dockerfile.
docker build -q -t "$tag" "$ctx" 2> >(grep -v -e 'DEPRECATED' -e 'buildx' -e 'BuildKit' -e '^ *$' >&2 || true) >/dev/null
echo "built $tag"
