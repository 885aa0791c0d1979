package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/policy"
)

// `policy propose` over the two committed H200 Q8_0 records: under the
// bootstrap rule width 6 fails (probability 0.938 against the default in
// pair 1234) and the rule falls back to width 5. The entry it prints parses
// as policy and passes `policy check` against the same records, cost
// tables included.
func TestPolicyProposeH200Q8RoundTrip(t *testing.T) {
	root := filepath.Join("..")
	var recs []string
	for _, p := range []string{"1234", "4321"} {
		recs = append(recs, filepath.Join(root, "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair"+p+"-2026-11-30.json"))
	}
	out := &syncBuffer{}
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, out, out, nil)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	text := out.String()
	for _, want := range []string{
		"width 6   0.972  <- runner-up  (fails: width 6 beats the default in h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30 with probability 0.938",
		"width 5   0.903  <- chosen  (passes)",
		"fell back past width 6",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	block := text[strings.Index(text, "[[entry]]"):]
	f, err := policy.Parse("proposed.toml", []byte("schema = 1\n"+block))
	if err != nil {
		t.Fatalf("the proposed entry does not parse: %v\n%s", err, block)
	}
	e := f.Entries[0]
	if e.Width != 5 || e.RunnerUp != 6 || len(e.Records) != 2 || len(e.Cost) != 2 {
		t.Errorf("entry %+v", e)
	}
	vs := policy.Check(policy.Merge(f), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(p))) })
	if !vs[0].OK {
		t.Errorf("the proposed entry fails its own check: %q", vs[0].Problems)
	}
}
