// Package promtext reads lines of the Prometheus text exposition format, as
// llama-server's /metrics serves them. The launcher verifies the width from
// it and bench reads acceptance by draft position from it: one reader keeps
// the two agreeing on what a line means.
package promtext

import (
	"fmt"
	"strconv"
	"strings"
)

// Sample is one metric line: `name{label="v",...} value [timestamp]`.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseLine parses one line. Blank and comment lines give ok=false and no
// error; a line that is not a sample gives an error saying why.
func ParseLine(line string) (s Sample, ok bool, err error) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return Sample{}, false, nil
	}
	rest := line
	i := strings.IndexAny(line, "{ \t")
	if i < 0 {
		return Sample{}, false, fmt.Errorf("metric %q has no value", line)
	}
	if i == 0 {
		return Sample{}, false, fmt.Errorf("line %q has no metric name", line)
	}
	s.Name, rest = line[:i], line[i:]
	if strings.HasPrefix(rest, "{") {
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return Sample{}, false, fmt.Errorf("%s: unterminated labels", s.Name)
		}
		if s.Labels, err = parseLabels(rest[1:end]); err != nil {
			return Sample{}, false, fmt.Errorf("%s: %w", s.Name, err)
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest) // value, then an optional timestamp
	if len(fields) == 0 {
		return Sample{}, false, fmt.Errorf("%s has no value", s.Name)
	}
	if s.Value, err = strconv.ParseFloat(fields[0], 64); err != nil {
		return Sample{}, false, fmt.Errorf("%s: value %q: %w", s.Name, fields[0], err)
	}
	return s, true, nil
}

// parseLabels reads `k="v",k2="v2"` (a trailing comma is allowed).
func parseLabels(text string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range strings.Split(text, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("label %q has no value", kv)
		}
		uq, err := strconv.Unquote(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("malformed label %s=%s: %w", k, v, err)
		}
		labels[strings.TrimSpace(k)] = uq
	}
	return labels, nil
}
