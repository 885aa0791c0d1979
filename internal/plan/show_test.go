package plan

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// A schedule's headline names a tuned entry's record where it is, beside
// the tuned layer, not relative to a directory the operator is not in.
func TestScheduleHeadlineNamesATunedRecordWhereItIs(t *testing.T) {
	s, err := schedule.FromTriples([][]int{{1, 3, 6}, {4, 0, 1}}, "measured")
	if err != nil {
		t.Fatal(err)
	}
	e := &policy.Entry{ID: "tuned-a", Pin: "sim", Record: "records/tune.md", Origin: "/home/op/.config/speclaunch/tuned.toml:11",
		Tuned: "2026-12-05", Pair: policy.Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64), Pin: "sim"}}
	got := Headline(width.Resolution{Source: width.Measured, Reason: "tuned on this pair 2026-12-05", Entry: e, Schedule: s})
	if !strings.Contains(got, "record /home/op/.config/speclaunch/records/tune.md") {
		t.Errorf("headline %q does not name the record beside its layer", got)
	}
}
