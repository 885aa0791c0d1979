#!/bin/sh
# Replays the loop that ran the 2026-12-03e H200 cells (commit 5347cd0)
# on the sim's replay cells of those cells (issue 30 item 1): a detached
# worktree of 5347cd0 outside the repository, with copies of this
# checkout's internal/simcost and internal/adaptsim (adaptsim driving the
# old adapt package, which predates Target.Served), then
# BenchmarkReplay0312e there. Nothing is committed; the old code stays
# where git keeps it.
#
#   scripts/replay-0312e.sh [dir]      (default /tmp/loop-5347cd0)
#
# ADAPTSIM_REPLAY_OUT=file writes the table (as the benchmark does here).
set -eu
repo=$(git rev-parse --show-toplevel)
dir=${1:-/tmp/loop-5347cd0}
if [ ! -d "$dir" ]; then
	git -C "$repo" worktree add --detach "$dir" 5347cd0 >/dev/null
fi
rm -rf "$dir/internal/simcost" "$dir/internal/adaptsim"
cp -r "$repo/internal/simcost" "$dir/internal/simcost"
cp -r "$repo/internal/adaptsim" "$dir/internal/adaptsim"
# The adapter of internal/adapt's Loop goes once that loop is deleted;
# the replay takes it from the commit that last changed it.
[ -f "$dir/internal/adaptsim/loop.go" ] ||
	git -C "$repo" show 5394f73:internal/adaptsim/loop.go >"$dir/internal/adaptsim/loop.go"
# Only the tests the replay needs: others import packages 5347cd0 lacks.
for f in "$dir"/internal/adaptsim/*_test.go; do
	case $(basename "$f") in
	replay_test.go | adaptsim_test.go) ;;
	*) rm "$f" ;;
	esac
done
sed -i 's#speclaunch/speclaunch/internal/adapt"#speclaunch/speclaunch/adapt"#' "$dir"/internal/adaptsim/*.go
cat >"$dir/internal/adaptsim/loop_served.go" <<'GO'
package adaptsim

import "github.com/speclaunch/speclaunch/adapt"

// withServed: the loop of 5347cd0 has no Target.Served.
func withServed(*adapt.Target, func() Scrape) {}

const replayLoopName = "the loop of 5347cd0"
GO
cd "$dir"
ADAPTSIM_REPLAY_DIR="$repo/docs/benchmark_results/adapteval" \
	go test -tags replay0312e ./internal/adaptsim -run X -bench Replay0312e -benchtime 1x
