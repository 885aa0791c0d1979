#!/bin/sh
# Build the scratch image of deploy/Containerfile: the static binary, then
# `podman build` (or docker) on a context holding only that binary.
#
#   scripts/build_image.sh [TAG]        default TAG: localhost/speclaunch:latest
#
# Exits 0 after a build; 77 (the "skipped" code) when neither podman nor
# docker is installed, so a test can tell a skip from a failure.
set -eu
tag=${1:-localhost/speclaunch:latest}
root=$(cd "$(dirname "$0")/.." && pwd)

if command -v podman >/dev/null 2>&1; then
	builder=podman
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
	builder=docker
else
	echo "build_image.sh: neither podman nor a running docker found; install podman" >&2
	exit 77
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/speclaunch" .)
"$builder" build -f "$root/deploy/Containerfile" -t "$tag" "$ctx"
echo "built $tag with $builder"
