package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ParseHost checks a listen host (--host, server.host, LLAMA_ARG_HOST) as a
// setting, so that a malformed one is named as the host from its source
// instead of surfacing later as a port that "is not available". It accepts
// an IP address (an IPv6 one with or without brackets, returned without
// them) or a host name (letters, digits, '-', '_' and dots; labels of at
// most 63 characters, 253 in all); not llama-server's UNIX socket path
// (one ending in .sock), as speclaunch's proxy listens on TCP only.
func ParseHost(v string) (string, error) {
	h := strings.TrimSpace(v)
	if inner, ok := strings.CutPrefix(h, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
				return inner, nil
			}
		}
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h, nil
	}
	switch {
	case strings.HasSuffix(h, ".sock"):
		// llama-server binds a UNIX socket where its --host ends in .sock.
		return "", fmt.Errorf("%s is a UNIX socket path, where llama-server would bind a socket: speclaunch's proxy listens on TCP only, and a UNIX socket is not supported; give a host name or IP address and a port, e.g. --host 127.0.0.1 --port 8080 (server.host and server.port, LLAMA_ARG_HOST and LLAMA_ARG_PORT)", Quoted(v))
	case strings.Contains(h, "://"):
		return "", fmt.Errorf("%s is a URL: give only the host name or IP address, e.g. 0.0.0.0", Quoted(v))
	case strings.Count(h, ":") == 1:
		return "", fmt.Errorf("%s has a port: give the host alone and the port as --port (server.port, LLAMA_ARG_PORT)", Quoted(v))
	}
	if err := hostName(h); err != nil {
		return "", fmt.Errorf("%s is not an IP address or a host name: %w; e.g. 127.0.0.1, 0.0.0.0, ::1 or localhost", Quoted(v), err)
	}
	return h, nil
}

// parseHost is ParseHost as the settings table's parser for the host row.
func parseHost(v string) (string, error) {
	h, err := ParseHost(v)
	if err != nil {
		return "", &Error{Msg: "bad host", Err: err}
	}
	return h, nil
}

// hostName checks host-name syntax (RFC 1123, plus '_' as Go's resolver
// allows); it does not look the name up.
func hostName(h string) error {
	if h == "" {
		return errors.New("it is empty")
	}
	if len(h) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %s must be 1 to 63 characters", Quoted(label))
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %s starts or ends with '-'", Quoted(label))
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("%q is not allowed in a host name", r)
			}
		}
	}
	return nil
}
