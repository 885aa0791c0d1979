//go:build linux

package supervise

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

// health-sequence.txt is what a real llama-server's /health answered on an
// H200 (2026-11-30) while it started: "<t> <status> <body>" per change.
func TestH200HealthSequenceDetail(t *testing.T) {
	b, err := os.ReadFile("../../engine/testdata/h200/health-sequence.txt")
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(strings.TrimSpace(l), " ", 3)
		if len(f) != 3 {
			t.Fatalf("line %q", l)
		}
		bodies[f[1]] = f[2]
	}
	if len(bodies) != 3 || bodies["0"] != "refused" {
		t.Fatalf("health sequence %v; want refused, 503, 200", bodies)
	}
	for _, tt := range []struct {
		code       int
		wantReady  bool
		wantDetail string
	}{
		{503, false, "503 Loading model"},
		{200, true, ""},
	} {
		body := bodies[strconv.Itoa(tt.code)]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(tt.code)
			w.Write([]byte(body))
		}))
		ready, detail, err := HTTPReady(srv.URL + "/health")(context.Background())
		srv.Close()
		if err != nil || ready != tt.wantReady || detail != tt.wantDetail {
			t.Errorf("%d %s: (%v, %q, %v), want (%v, %q, nil)", tt.code, body, ready, detail, err, tt.wantReady, tt.wantDetail)
		}
	}
}
