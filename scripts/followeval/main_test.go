package main

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A URL where nothing listens is exit 2 at once, not a run of failed
// requests.
func TestDeadURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	if got := run([]string{"-url", url, "-prompts", "../../internal/bench/prompts/code", "-phase", "1s", "-run", "1s"}); got != 2 {
		t.Errorf("run against %s = %d, want 2", url, got)
	}
}

// A server with an API key: followeval sends LLAMA_API_KEY's first key, and
// without it says that the key is what is missing.
func TestAPIKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-test-1234" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"switches":[]}`))
	}))
	defer srv.Close()
	if _, err := status(srv.URL, http.Header{}); !errors.Is(err, errUnauthorized) {
		t.Errorf("status without a key: %v, want errUnauthorized", err)
	}
	if _, err := status(srv.URL, http.Header{"Authorization": {"Bearer sk-test-1234"}}); err != nil {
		t.Errorf("status with the key: %v", err)
	}
}

// A length spread outside [0, 1) is bad input, said before any request
// (against a server that answers, so that only the flag can make it 2).
func TestBadSpread(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"switches_total":0}`))
	}))
	defer srv.Close()
	for _, v := range []string{"1", "-0.1", "NaN"} {
		if got := run([]string{"-url", srv.URL, "-prompts", "../../internal/bench/prompts/code", "-phase", "1s", "-run", "1s", "-length-spread", v}); got != 2 {
			t.Errorf("-length-spread %s: exit %d, want 2", v, got)
		}
	}
}

// The phases' requests vary in length by -length-spread: the flag was
// parsed and reported but never reached loadgen, and every request of
// four H100 runs asked for -max-tokens exactly.
func TestPhasesVaryLengths(t *testing.T) {
	tr := traffic{maxTokens: 128, spread: 0.5, prompts: []string{"a", "b", "c", "d", "e"}}
	o := tr.options(4, time.Second)
	ls := loadgen.Lengths(o.MaxTokens, o.Spread, len(o.Prompts))
	if slices.Min(ls) >= 128 || slices.Max(ls) <= 128 {
		t.Errorf("lengths %v for -max-tokens 128 -length-spread 0.5, want some below 128 and some above", ls)
	}
}

// The key sent is the first serve would read: LLAMA_API_KEY's (a list,
// empty items skipped; not LLAMA_ARG_API_KEY), a key file's, else
// VLLM_API_KEY's.
func TestAuthHeader(t *testing.T) {
	read := func(path string) ([]byte, error) { return []byte("# keys\nsk-f\n"), nil }
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LLAMA_API_KEY": "sk-a,sk-b"}, "Bearer sk-a"},
		{map[string]string{"LLAMA_API_KEY": ",sk-a"}, "Bearer sk-a"},
		{map[string]string{"VLLM_API_KEY": "sk-v"}, "Bearer sk-v"},
		{map[string]string{"LLAMA_ARG_API_KEY": "sk-x"}, ""},
		{map[string]string{"LLAMA_ARG_API_KEY_FILE": "keys.txt"}, "Bearer sk-f"},
	} {
		var env []string
		for k, v := range tc.env {
			env = append(env, k+"="+v)
		}
		h, err := authHeader(env, read)
		if got := h.Get("Authorization"); err != nil || got != tc.want {
			t.Errorf("%v: %q (%v), want %q", tc.env, got, err, tc.want)
		}
	}
}

// Bad flags are said by the rule each breaks, not by a list of every rule.
func TestFlagProblems(t *testing.T) {
	ok := func() (string, error, time.Duration, time.Duration, int, float64, float64, int) {
		return "p", nil, time.Second, time.Second, 128, 0.5, 0, 0
	}
	dir, le, ph, tot, mt, sp, te, na := ok()
	if got := flagProblems(dir, le, ph, tot, mt, sp, te, na); len(got) != 0 {
		t.Errorf("good flags: %q", got)
	}
	if got := flagProblems("", le, 0, tot, mt, sp, te, na); len(got) != 2 || !strings.Contains(got[0], "-prompts") || !strings.Contains(got[1], "-phase > 0") {
		t.Errorf("no -prompts and -phase 0: %q, want those two", got)
	}
	if got := flagProblems(dir, le, ph, tot, mt, 1, te, 2); len(got) != 2 || !strings.Contains(got[0], "-length-spread") || !strings.Contains(got[1], "positional") {
		t.Errorf("-length-spread 1 and two arguments: %q, want those two", got)
	}
}
