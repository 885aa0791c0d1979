package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// zeros is an endless body; io.LimitReader gives it a length.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// refusing is an engine that reads the start of a body, then answers
// answer (raw bytes; none when "") and closes the connection with the rest
// of the body unread: the kernel resets it, so the proxy's write of the
// body still being sent fails, as llama-server's and the sim's refusal of
// a body over their limit does.
func refusing(t *testing.T, answer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.CopyN(io.Discard, r.Body, 64<<10)
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		io.WriteString(c, answer)
		c.Close()
	}
}

// oversized sends a body over the replay cap (it streams through) to the
// proxy in front of engine, and returns the answer and the log. gone:
// once engine has answered, the engine is marked gone, as the runtime
// does when it exits.
func oversized(t *testing.T, engine http.HandlerFunc, gone bool) (*httptest.ResponseRecorder, string) {
	t.Helper()
	var log testenv.Buffer
	p := New(Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	var b atomic.Pointer[Backend]
	b.Store(backend(t, func(w http.ResponseWriter, r *http.Request) {
		engine(w, r)
		if gone {
			b.Load().Gone()
		}
	}))
	p.Route(b.Load())
	size := int64(maxReplay + 24<<20)
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", io.LimitReader(zeros{}, size))
	req.ContentLength = size
	w := httptest.NewRecorder()
	p.ServeHTTP(w, req)
	return w, log.String()
}

// An engine that answers a body it refuses (413) before the proxy has
// sent it whole, and closes the connection on the rest, is passed on: the
// client gets the engine's answer, not the proxy's 502 "the engine failed
// this request (connection reset by peer)" that the write's failure gave
// whenever it reached the transport before the answer did.
func TestEngineRefusalOfABodyIsPassedOn(t *testing.T) {
	const refusal = `{"error":{"code":413,"message":"request body too large","type":"invalid_request_error"}}`
	answer := "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(refusal)) + "\r\nConnection: close\r\n\r\n" + refusal
	// Several times: the write's failure and the answer arrive together,
	// and either could reach the transport first.
	for i := range 20 {
		w, log := oversized(t, refusing(t, answer), false)
		if w.Code != http.StatusRequestEntityTooLarge || w.Body.String() != refusal {
			t.Fatalf("try %d: %d %q, want the engine's 413 %q; log:\n%s", i, w.Code, w.Body.String(), refusal, log)
		}
		if w.Header().Get("Connection") != "close" {
			t.Errorf("try %d: the answer does not close the connection: the rest of the body would be read as the next request", i)
		}
		if strings.Contains(log, "engine request failed") {
			t.Errorf("try %d: logged as the engine's failure:\n%s", i, log)
		}
	}
}

// An engine that closes the connection on a body still being sent without
// answering gets a 502 that says so, and the log says so: it may have
// refused the body as too large, which is not "the engine failed"; when
// the engine is gone (it exited), the 502 says that instead. Before, it
// always said "most likely it refused a body this large", an engine that
// died under the body included.
func TestEngineCloseDuringTheBodyIsSaid(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone bool
		want string // in the answer and the log
		not  string
	}{
		{"it serves on", false, "closed the connection while the request body was still being sent", "exited"},
		{"it exited", true, "the engine exited while the request body was still being sent", "refused a body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, log := oversized(t, refusing(t, ""), tc.gone)
			body := w.Body.String()
			if w.Code != http.StatusBadGateway || !strings.Contains(body, tc.want) || strings.Contains(body, tc.not) || strings.Contains(body, "the engine failed") {
				t.Errorf("%d %s; want a 502 that says %q, not %q", w.Code, body, tc.want, tc.not)
			}
			if !tc.gone && !strings.Contains(body, "(it may have refused a body this large, "+strconv.Itoa(maxReplay+24<<20)+" bytes, or stopped)") {
				t.Errorf("%s; want it to say the engine may have refused the body, or stopped", body)
			}
			if w.Header().Get("Connection") != "close" {
				t.Error("the 502 does not close the connection: the rest of the body would be read as the next request")
			}
			if !strings.Contains(log, tc.want) || strings.Contains(log, "engine request failed") {
				t.Errorf("log:\n%s", log)
			}
		})
	}
}
