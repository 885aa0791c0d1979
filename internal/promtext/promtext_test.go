package promtext

import (
	"math"
	"testing"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		line   string
		ok     bool
		err    bool
		name   string
		labels map[string]string
		value  float64
	}{
		{line: "", ok: false},
		{line: "# HELP x y", ok: false},
		{line: "llamacpp:spec_decode_num_drafts_total 28", ok: true, name: "llamacpp:spec_decode_num_drafts_total", value: 28},
		{line: `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="4"} 0`, ok: true, name: "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", labels: map[string]string{"position": "4"}},
		{line: `m{a="1",b="x y"} 2.5 1700000000`, ok: true, name: "m", labels: map[string]string{"a": "1", "b": "x y"}, value: 2.5},
		{line: "llamacpp:prompt_tokens_seconds inf", ok: true, name: "llamacpp:prompt_tokens_seconds", value: math.Inf(1)},
		{line: "m", err: true},
		{line: "m{a=\"1\" 3", err: true},
		{line: "m{a=1} 3", err: true},
		{line: "m{} ", err: true},
		{line: "m x", err: true},
	}
	for _, c := range cases {
		s, ok, err := ParseLine(c.line)
		if (err != nil) != c.err || ok != c.ok {
			t.Errorf("%q: ok %v err %v", c.line, ok, err)
			continue
		}
		if !ok {
			continue
		}
		if s.Name != c.name || s.Value != c.value || len(s.Labels) != len(c.labels) {
			t.Errorf("%q: got %+v", c.line, s)
		}
		for k, v := range c.labels {
			if s.Labels[k] != v {
				t.Errorf("%q: label %s = %q, want %q", c.line, k, s.Labels[k], v)
			}
		}
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add(`m{position="0"} 24`)
	f.Add("llamacpp:n_busy_slots_per_decode 1 17")
	f.Fuzz(func(t *testing.T, line string) {
		s, ok, err := ParseLine(line)
		if err == nil && ok && s.Name == "" {
			t.Fatalf("sample without a name from %q", line)
		}
	})
}
