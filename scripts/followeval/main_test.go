package main

import (
	"net"
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
