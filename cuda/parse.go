package cuda

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
)

// The parsers below are pure: they take nvidia-smi's text and the
// environment's value and return data, so every arm is a table test.

// parseDevices parses the output of
// `nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader,nounits`.
// A record's first field must be an index. Blank lines and nvidia-smi's
// "WARNING: ..." lines (infoROM and similar notices go to stdout) are
// skipped; any other line that is not a record is an error, so a changed
// output format is reported instead of silently hiding a GPU.
func parseDevices(out string) ([]GPU, error) {
	var gpus []GPU
	err := rows(out, func(n int) bool { return n >= 4 }, "4 fields (index, name, uuid, driver)", func(idx int, f []string) error {
		// A name containing commas splits into extra fields: uuid and
		// driver are always the last two.
		n := len(f)
		gpus = append(gpus, GPU{
			Index:  idx,
			Name:   value(strings.Join(f[1:n-2], ", ")),
			UUID:   value(f[n-2]),
			Driver: value(f[n-1]),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gpus, nil
}

// parseCaps parses the output of
// `nvidia-smi --query-gpu=index,compute_cap --format=csv,noheader,nounits`
// into index -> capability. A GPU reporting [N/A] or [Not Supported] is
// absent from the map (unknown), which is not an error.
func parseCaps(out string) (map[int]key.Capability, error) {
	caps := map[int]key.Capability{}
	err := rows(out, func(n int) bool { return n == 2 }, "2 fields (index, compute_cap)", func(idx int, f []string) error {
		v := value(f[1])
		if v == "" {
			return nil
		}
		c, err := key.ParseCapability(v)
		if err != nil || strings.HasPrefix(strings.ToLower(v), "sm_") {
			return fmt.Errorf("malformed compute_cap %q for gpu %d", v, idx)
		}
		caps[idx] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return caps, nil
}

// rows walks the records of an nvidia-smi CSV query whose first field is
// the GPU index: each line is split, its field count checked by fieldsOK
// (want describes it), its index parsed and checked for repeats, then
// handed to row with its fields. The first problem stops the walk.
func rows(out string, fieldsOK func(int) bool, want string, row func(idx int, f []string) error) error {
	seen := map[int]bool{}
	for _, line := range lines(out) {
		f := splitCSV(line)
		if !fieldsOK(len(f)) {
			return fmt.Errorf("want %s, got %d in %q", want, len(f), clip(line))
		}
		idx, err := parseIndex(f[0])
		if err != nil {
			return fmt.Errorf("%w in %q", err, clip(line))
		}
		if seen[idx] {
			return fmt.Errorf("gpu index %d listed twice", idx)
		}
		seen[idx] = true
		if err := row(idx, f); err != nil {
			return err
		}
	}
	return nil
}

// lines splits on LF, drops CR, surrounding space, blank lines and
// nvidia-smi warning lines.
func lines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(strings.TrimRight(l, "\r"))
		if l == "" || strings.HasPrefix(strings.ToUpper(l), "WARNING") {
			continue
		}
		ls = append(ls, l)
	}
	return ls
}

func splitCSV(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<16 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("malformed gpu index %q", s)
	}
	return n, nil
}

// value maps nvidia-smi's placeholders for a missing value to "".
func value(s string) string {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]":
		return ""
	}
	return s
}

func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// errNoneVisible reports that CUDA_VISIBLE_DEVICES hides every GPU.
var errNoneVisible = errors.New("no GPU visible")

// visible applies CUDA_VISIBLE_DEVICES to the GPUs nvidia-smi listed, the
// way the CUDA driver does: unset means all; empty, "-1" or "NoDevFiles"
// means none; otherwise a comma list of indices or GPU UUIDs ("GPU-" plus a
// unique prefix of the UUID), where the first entry that matches nothing
// ends the list and hides every device after it. The returned GPUs are in
// the list's order. reason is set when nothing is visible.
func visible(gpus []GPU, cvd string, set bool) (vis []GPU, reason string) {
	if !set {
		return gpus, ""
	}
	v := strings.TrimSpace(cvd)
	switch v {
	case "":
		return nil, "CUDA_VISIBLE_DEVICES is empty: no GPU visible"
	case "-1", "NoDevFiles":
		return nil, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s: no GPU visible", v)
	}
	byIndex := map[int]int{}
	for i, g := range gpus {
		byIndex[g.Index] = i
	}
	taken := map[int]bool{}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		i, ok := -1, false
		if n, err := strconv.Atoi(e); err == nil && !strings.HasPrefix(e, "+") {
			i, ok = byIndex[n]
		} else if strings.HasPrefix(strings.ToUpper(e), "GPU-") {
			i, ok = uuidMatch(gpus, e)
		}
		if !ok || taken[i] {
			break // CUDA ignores this entry and everything after it
		}
		taken[i] = true
		vis = append(vis, gpus[i])
	}
	if len(vis) == 0 {
		return nil, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q matches no GPU that nvidia-smi lists", cvd)
	}
	return vis, ""
}

// uuidMatch finds the one GPU whose UUID starts with prefix
// (case-insensitively); an ambiguous prefix matches nothing, as in CUDA.
func uuidMatch(gpus []GPU, prefix string) (int, bool) {
	p := strings.ToLower(prefix)
	found := -1
	for i, g := range gpus {
		if g.UUID != "" && strings.HasPrefix(strings.ToLower(g.UUID), p) {
			if found >= 0 {
				return -1, false
			}
			found = i
		}
	}
	return found, found >= 0
}

// agree returns the capability every visible GPU shares, or None and a
// reason naming what is unknown or which capabilities differ.
func agree(vis []GPU) (key.Capability, string) {
	if len(vis) == 0 {
		return key.None, "no GPU visible"
	}
	var distinct []key.Capability
	for _, g := range vis {
		if !g.CapKnown {
			return key.None, fmt.Sprintf("GPU %d (%s) does not report its compute capability", g.Index, nameOr(g.Name))
		}
		if !containsCap(distinct, g.Capability) {
			distinct = append(distinct, g.Capability)
		}
	}
	if len(distinct) == 1 {
		return distinct[0], ""
	}
	names := make([]string, len(distinct))
	for i, c := range distinct {
		names[i] = c.String()
	}
	list := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	return key.None, fmt.Sprintf("%d visible GPUs disagree: %s", len(vis), list)
}

func containsCap(cs []key.Capability, c key.Capability) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

func nameOr(s string) string {
	if s == "" {
		return "unnamed"
	}
	return s
}
