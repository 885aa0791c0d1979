package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapteval"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// The measurement tool of docs/bench.md ("Measuring `serve --adapt`")
// against serve --adapt on the sim: it must report the width the loop
// settled at, the decision switch to it that needed traffic, a throughput
// after it at that width, and no failed or empty request. Which width is
// the sim's speed: internal/adapt judges the loop's choice on virtual
// time (TestLoopConvergesPerProfile); this run judges no speed.
func TestAdaptEvalReportsTheChosenWidth(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	p := filepath.Join(dir, "p.toml")
	writeFile(t, p, farAdaptProfile(t, port, 32))
	prompts := filepath.Join(dir, "prompts")
	if err := os.Mkdir(prompts, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"def fib(n):", "The quick brown fox", "for i in range(10):"} {
		writeFile(t, filepath.Join(prompts, fmt.Sprintf("%02d.txt", i)), s)
	}
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `width verified`, 1, 20*time.Second)

	ps, err := adapteval.ReadPrompts(context.Background(), prompts)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	res, err := adapteval.Run(context.Background(), adapteval.Options{
		URL: fmt.Sprintf("http://127.0.0.1:%d", port), Prompts: ps, Clients: 2, MaxTokens: 64,
		SettleTimeout: 4 * time.Minute, Measure: 2 * time.Second, Poll: 100 * time.Millisecond, Progress: &progress, Direct: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s\nlog:\n%s", err, &progress, r.log)
	}
	t.Log(res.Summary())
	want := res.Width
	if !res.Settled || res.WidthSource != "adaptive" {
		t.Fatalf("settled %v at width %d (%s), want a width chosen by the adaptive loop: %s\n%s\nlog:\n%s", res.Settled, res.Width, res.WidthSource, res.Summary(), &progress, r.log)
	}
	if res.Failed != 0 || res.Empty != 0 || res.Load.OK == 0 {
		t.Errorf("load %s\nlog:\n%s", res.Load, r.log)
	}
	if len(res.Switches) == 0 {
		t.Fatalf("no switch recorded: %s", res.Summary())
	}
	// The switch to the settled width: a decision, or a trial the next
	// decision kept (marked explore: it was made as a trial).
	last := res.Switches[len(res.Switches)-1]
	if last.To != want || !last.OK || last.RequestsBefore == 0 || last.AtS <= 0 || last.AtS > res.SettleS {
		t.Errorf("deciding switch %+v: want an OK switch to %d after some requests, before settling at %.1fs", last, want, res.SettleS)
	}
	if res.SettleRequests < last.RequestsBefore {
		t.Errorf("settled after %d requests, before the switch's %d", res.SettleRequests, last.RequestsBefore)
	}
	m := res.Measure
	if m.TokPerSec <= 0 || m.Requests == 0 || m.Width != want || m.SwitchesDuring != 0 || m.EngineSamples == 0 || m.EngineMeanPerSec <= 0 {
		t.Errorf("measure %+v", m)
	}
	if d := res.Direct; d == nil || d.TokPerSec <= 0 || d.Width != want || d.SwitchesDuring != 0 || res.DirectLoad.Bad() != 0 {
		t.Errorf("direct %+v, load %v\n%s\nlog:\n%s", d, res.DirectLoad, &progress, r.log)
	}
	if !regexp.MustCompile(`"state":\s*"watching"`).Match(res.Adapt) {
		t.Errorf("final adapt status %s", res.Adapt)
	}
}
