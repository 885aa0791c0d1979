package config

import (
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string // err "" = accepted as want
	}{
		{"127.0.0.1", "127.0.0.1", ""},
		{"0.0.0.0", "0.0.0.0", ""},
		{" localhost ", "localhost", ""},
		{"::", "::", ""},
		{"::1", "::1", ""},
		{"[::1]", "::1", ""},
		{"fe80::1%eth0", "fe80::1%eth0", ""},
		{"gpu-node-7.cluster.local.", "gpu-node-7.cluster.local.", ""},
		{"my_service", "my_service", ""},
		{"a b", "", `' ' is not allowed`},
		{"", "", "it is empty"},
		{"host:8080", "", "has a port"},
		{"[127.0.0.1]", "", `'[' is not allowed`},
		{"http://example.com", "", "is a URL"},
		// llama-server binds a UNIX socket for a host ending in .sock
		{"/tmp/x.sock", "", `"/tmp/x.sock" is a UNIX socket path, where llama-server would bind a socket: speclaunch's proxy listens on TCP only, and a UNIX socket is not supported; give a host name or IP address and a port, e.g. --host 127.0.0.1 --port 8080`},
		{"llama.sock", "", "a UNIX socket is not supported"},
		{"-lead.example", "", "starts or ends with '-'"},
		{"a..b", "", "must be 1 to 63"},
		{strings.Repeat("a", 64), "", "must be 1 to 63"},
		{strings.Repeat("a.", 127) + "a", "", "longer than 253"},
		{"::1::2", "", "not allowed"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseHost(tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParseHost(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
		})
	}
}
