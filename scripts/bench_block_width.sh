#!/usr/bin/env bash
# bench_block_width.sh: the common width sweep, a thin wrapper over
# `speclaunch bench` (as upstream mlxcel's script of the same name is over its
# harness). Everything it does is speclaunch's; this only fills in defaults.
#
#   scripts/bench_block_width.sh PROFILE [WIDTH...]
#
#   PROFILE   a profile path or name (see docs/profiles.md)
#   WIDTH...  widths to sweep (default: the profile's bench.widths, else 2 3 4 6 8 16)
#
# Environment:
#   ROUNDS=5            measured rounds per arm (at least 3)
#   SCHEDULE=restart    restart (one server at a time) | resident (all at once)
#   MAX_TOKENS=200      tokens per request
#   OUT=DIR/NAME        output path without extension (default: bench-PROFILE-DATE)
#   SPECLAUNCH=speclaunch   the binary to run (e.g. "go run ." from the repo)
#   extra arguments for speclaunch bench can follow a -- : ... 2 4 8 -- --force
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
	sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
profile=$1
shift
widths=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	case $1 in
	*[!0-9]*) echo "bench_block_width.sh: width '$1' is not a number" >&2; exit 2 ;;
	esac
	widths+=("$1")
	shift
done
[ "${1:-}" = "--" ] && shift

name=$(basename "${profile%.toml}")
out=${OUT:-bench-$name-$(date +%Y%m%d-%H%M%S)}
args=(bench --profile "$profile" --rounds "${ROUNDS:-5}" --max-tokens "${MAX_TOKENS:-200}" --out "$out")
[ -n "${SCHEDULE:-}" ] && args+=(--schedule "$SCHEDULE")
if [ ${#widths[@]} -gt 0 ]; then
	args+=(--widths "$(IFS=,; echo "${widths[*]}")")
fi
# shellcheck disable=SC2086
exec ${SPECLAUNCH:-speclaunch} "${args[@]}" "$@"
