package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// A client's Expect: 100-continue is answered once, by speclaunch's own
// server as the proxy reads the body; passed on, the engine's 100
// reached the client too, a second one.
func TestExpectContinueAnsweredOnce(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if e := r.Header.Get("Expect"); e != "" {
			t.Errorf("the engine got Expect: %q", e)
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	})
	p := New(Options{})
	p.Route(b)
	addr := strings.TrimPrefix(front(t, p), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("first line %q, %v: want a 100 Continue", line, err)
	}
	fmt.Fprint(c, "{}")
	rest, _ := io.ReadAll(br)
	if n := strings.Count(string(rest), "HTTP/1.1 100"); n != 0 {
		t.Errorf("%d more 100 Continue after the first:\n%s", n, rest)
	}
	if !strings.Contains(string(rest), "HTTP/1.1 200") {
		t.Errorf("no 200:\n%s", rest)
	}
}

// With the keys of an engine that checks them as llama-server does, a
// request that waits for 100 Continue without one is answered that 401
// before its body is asked for; with a key, on a public path or with no
// keys, the 100 comes as before. Before, the proxy sent 100 Continue at
// once and the client streamed its body for the engine's 401. An engine
// with another rule (vLLM guards /v1 alone) answers for itself: a keyless
// POST /tokenize it serves was refused here.
func TestExpectContinueWithoutAKeyIs401First(t *testing.T) {
	reached := make(chan string, 8)
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		reached <- r.URL.Path
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	})
	for _, tc := range []struct {
		name, path, auth string
		keys             []string
		llama            bool   // the engine checks keys as llama-server does
		want             string // the first status line's code
	}{
		{"no key", "/v1/completions", "", []string{"k1"}, true, "401"},
		{"a wrong key", "/v1/completions", "Authorization: Bearer nope\r\n", []string{"k1"}, true, "401"},
		{"the key", "/v1/completions", "Authorization: Bearer k1\r\n", []string{"k1"}, true, "100"},
		{"the key as X-Api-Key", "/v1/completions", "X-Api-Key: k1\r\n", []string{"k1"}, true, "100"},
		{"a public path", "/v1/models", "", []string{"k1"}, true, "100"},
		{"no keys: open", "/v1/completions", "", nil, true, "100"},
		{"another rule: a path it serves without a key", "/tokenize", "", []string{"k1"}, false, "100"},
		{"another rule: its own 401", "/v1/completions", "", []string{"k1"}, false, "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Options{APIKeys: tc.keys, LlamaKeyRule: tc.llama})
			p.Route(b)
			c, err := net.Dial("tcp", strings.TrimPrefix(front(t, p), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n%sExpect: 100-continue\r\n\r\n", tc.path, tc.auth)
			br := bufio.NewReader(c)
			line, err := br.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 "+tc.want) {
				t.Fatalf("first line %q, %v: want %s", line, err, tc.want)
			}
			if tc.want != "401" {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line), br)), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if string(body) != secret.UnauthorizedBody || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("401 %q (%s), want the engine's: %s", body, resp.Header.Get("Content-Type"), secret.UnauthorizedBody)
			}
			select {
			case path := <-reached:
				t.Errorf("the engine was asked %s", path)
			default:
			}
		})
	}
}
