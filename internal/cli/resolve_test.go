package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// resolve's schedule rows say each load with the count's own number, the
// widths lined up: "1      requests in flight" was the row of one request.
func TestWriteScheduleRowsCountRequests(t *testing.T) {
	for _, c := range []struct {
		sched string
		want  []string
	}{
		{"1:1,2+:4", []string{
			"schedule 1 request in flight:   width 1 (speculation off) (operator)",
			"         2+ requests in flight: width 4 (operator)"}},
		{"1:6,2-3:4,4+:1", []string{
			"schedule 1 request in flight:    width 6 (operator)",
			"         2-3 requests in flight: width 4 (operator)",
			"         4+ requests in flight:  width 1 (speculation off) (operator)"}},
	} {
		s, err := schedule.Parse(c.sched, "operator")
		if err != nil {
			t.Fatal(err)
		}
		p := &plan.Plan{Resolution: width.Resolution{Source: width.Measured, Schedule: s}}
		p.Settings.Engine.Value = key.VLLM
		var rows []string
		writeSchedule(func(k, v string) { rows = append(rows, fmt.Sprintf("%-8s %s", k, v)) }, p)
		if got := strings.Join(rows[:len(s)], "\n"); got != strings.Join(c.want, "\n") {
			t.Errorf("%s: rows\n%s\nwant\n%s", c.sched, got, strings.Join(c.want, "\n"))
		}
	}
}

// policy explain shows no engine command, so it does not warn that a key
// query (no target model) leaves none to show; resolve, which shows one
// when it can, still does. explain's notes ended with that warning.
func TestExplainDoesNotWarnOfNoCommand(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	keyQuery := []string{"--engine", "mlxcel", "--draft-kind", "dflash", "--capability", "12.1", "--quant", "affine"}
	for _, tc := range []struct {
		cmd  []string
		warn bool // "no engine command to show" said
	}{
		{[]string{"policy", "explain"}, false},
		{[]string{"policy", "explain", "--json"}, false},
		{[]string{"resolve"}, true},
	} {
		code, o, e := runCLI(t, append(tc.cmd, keyQuery...)...)
		if said := strings.Contains(o+e, "no engine command to show"); code != 0 || said != tc.warn {
			t.Errorf("%s: exit %d, the warning said %v, want 0 and %v:\n%s%s", strings.Join(tc.cmd, " "), code, said, tc.warn, o, e)
		}
	}
}
