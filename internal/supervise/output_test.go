package supervise

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// reads returns its parts one Read each, then io.EOF.
type reads struct{ parts []string }

func (r *reads) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	if r.parts[0] == "" {
		r.parts = r.parts[1:]
	}
	return n, nil
}

// A key the engine prints is redacted whole however its bytes arrive: split
// across two reads of raw output, or across the cut of a line longer than
// maxLine (a hostile-input campaign found both printed in halves).
func TestNoCutSplitsAKey(t *testing.T) {
	const key = "Kq7ZpXw3mN8vLr2TzzQ9"
	long := strings.Repeat("x", maxLine-8) + " key=" + key + " end\n"
	for _, tc := range []struct {
		name  string
		raw   bool
		parts []string
	}{
		{"raw, the key across two reads", true, []string{"line 1: api_key=Kq7Zp", "Xw3mN8vLr2TzzQ9 ok\nline 2\n"}},
		{"raw, the key's first byte ending a read", true, []string{"api_key=K", "q7ZpXw3mN8vLr2TzzQ9\n"}},
		{"lines, a key across the cut of a long line", false, []string{long}},
		{"lines, the long line in reads cut inside the key", false, []string{long[:maxLine-1], long[maxLine-1:]}},
		// A key that ends with its first byte, the read ending with it (a
		// review: the cut moved back one byte, and both pieces showed).
		{"raw, a key that ends with its first byte ending a read", true, []string{"api_key=Kq7ZpXw3mN8vLr2TzzQK", " ok\n"}},
		{"raw, a second key beginning where one ends", true, []string{"a=Kq7ZpXw3mN8vLr2TzzQ9", "b=s3kq9wQ7vN2xPz8rT5mL ok\n"}},
	} {
		var red secret.Redactor
		red.Add(key, "Kq7ZpXw3mN8vLr2TzzQK", "s3kq9wQ7vN2xPz8rT5mL")
		var buf bytes.Buffer
		o := newOutput(Spec{Raw: tc.raw, Stdout: &buf, Secrets: &red}, 4)
		o.copy(&reads{parts: append([]string(nil), tc.parts...)}, "stdout")
		got := buf.String()
		for _, part := range []string{"Kq7Z", "TzzQ9", "vLr2", "s3kq9", "xPz8"} {
			if strings.Contains(got, part) {
				t.Errorf("%s: %q of the key shows:\n%.200q", tc.name, part, got[max(0, len(got)-200):])
			}
		}
		if want := strings.Join(tc.parts, ""); tc.raw && red.String(want) != got {
			t.Errorf("%s: raw output %q, want the engine's bytes with the key masked", tc.name, got)
		}
	}
}

// Both streams write to one terminal: a key an engine split between stdout
// and stderr is redacted in what the terminal shows (a second recheck: it
// showed whole when each stream held its own bytes), and what is held is
// written when the last stream ends.
func TestRawKeySplitBetweenStreams(t *testing.T) {
	const key = "sk-live-0123456789abcdefXYZ9"
	var red secret.Redactor
	red.Add(key)
	var buf bytes.Buffer
	o := newOutput(Spec{Raw: true, Stdout: &buf, Stderr: &buf, Secrets: &red}, 4)
	o.open = 2                                                   // as drain reads both
	o.copy(&reads{parts: []string{"CO:sk-live-0123"}}, "stdout") // then stdout closes
	o.copy(&reads{parts: []string{"456789abcdefXYZ9 ok\nwaiting s"}}, "stderr")
	if got, want := buf.String(), "CO:****XYZ9 ok\nwaiting s"; got != want {
		t.Errorf("raw output %q, want %q", got, want)
	}
}

// A line that ends in a key cut short (the engine's log cut it, or it
// exited) is redacted in what is written and kept.
func TestLineWithAKeyCutShort(t *testing.T) {
	var red secret.Redactor
	red.Add("sk-live-0123456789abcdefXYZ9")
	var buf bytes.Buffer
	o := newOutput(Spec{Stdout: &buf, Secrets: &red}, 4)
	o.copy(&reads{parts: []string{"prefix: sk-live-0123456789abcdefXY"}}, "stdout")
	if got := buf.String() + strings.Join(o.tailLines(), "\n"); strings.Contains(got, "0123456789") {
		t.Errorf("a key cut short shows: %q", got)
	}
}
