package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/speclaunch/speclaunch/internal/safefile"
)

// Bounds on the policy layers in total, whatever names them (a profile's
// policy.files, MLXCEL_POLICY, --policy, and the tuned layer where it
// exists): one file is bounded by
// safefile.PolicyLimit, but a 700-byte profile naming a 3.4 MiB,
// 20,000-entry file 80 times took the launcher out of memory (issue 33:
// ×40 held 1.5 GB after a 19 s reload). Two full files are far above any
// real layering (a site file and a tuned one) and parse in about 1.4 s
// (docs/file-limits.md: 0.5–0.7 s per 20,000-entry file).
const (
	MaxLayerFiles   = 16                       // distinct policy files
	MaxLayerBytes   = 2 * safefile.PolicyLimit // their sizes added up
	MaxLayerEntries = 40_000                   // their [[entry]] tables added up
)

// LayerError is a refusal of the layers in total: bad input (exit 2, or a
// rejected reload under serve), naming the file that went past the bound.
type LayerError struct {
	Path string
	Msg  string
}

func (e *LayerError) Error() string { return "policy file " + e.Path + ": " + e.Msg }

// Distinct returns the indices of paths to read: a path named again (the
// same file, however spelled) is read once, at its last place, where it
// ranks highest; layering a file twice changes nothing else, since an
// entry of a later layer replaces one of the same key.
func Distinct(paths []string) []int {
	seen := map[string]bool{}
	var keep []int
	for i := len(paths) - 1; i >= 0; i-- {
		k := paths[i]
		if abs, err := filepath.Abs(k); err == nil {
			k = abs
		}
		if r, err := filepath.EvalSymlinks(k); err == nil {
			k = r
		}
		if !seen[k] {
			seen[k] = true
			keep = append(keep, i)
		}
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return keep
}

// Budget reads policy files within the bounds on the layers in total.
// The zero value holds the bounds above; a test may lower MaxEntries.
type Budget struct {
	MaxEntries     int // 0 = MaxLayerEntries
	files, entries int
	bytes          int64
	tuned          string // the tuned layer, where ReadTuned read one
}

// ReadTuned is Read for the tuned layer: it counts toward the bounds like
// any policy file, and a refusal past them names it as what counted. An
// empty layer (blank: truncated to drop its schedules) is no layer: nil,
// empty true, and nothing counted; any other needs its schema as every
// policy file does.
func (b *Budget) ReadTuned(ctx context.Context, path string) (f *File, empty bool, err error) {
	data, err := b.readBytes(ctx, path)
	if err != nil || blank(data) {
		return nil, err == nil, err
	}
	f, err = b.parse(path, data)
	if err == nil {
		b.tuned = path
	}
	return f, false, err
}

// counted says which files count toward the bounds, for a refusal: the
// operator named all but the tuned layer, which tune wrote.
func (b *Budget) counted() string {
	s := "policy.files, MLXCEL_POLICY and --policy count, each file once"
	if b.tuned != "" {
		s += ", and so does the tuned layer " + b.tuned + " (written by speclaunch tune)"
	}
	return s
}

// Read reads one more policy file: a file past MaxLayerFiles, or whose
// bytes or entries would take the total past its bound, is a *LayerError
// (its bytes are never read past the bound).
func (b *Budget) Read(ctx context.Context, path string) (*File, error) {
	data, err := b.readBytes(ctx, path)
	if err != nil {
		return nil, err
	}
	return b.parse(path, data)
}

// readBytes reads one more policy file's bytes within the bounds on the
// files and their bytes.
func (b *Budget) readBytes(ctx context.Context, path string) ([]byte, error) {
	if b.files == MaxLayerFiles {
		return nil, &LayerError{path, fmt.Sprintf("more than %d distinct policy files are layered (%s); merge them into fewer files (the bounds on the layers: docs/file-limits.md)", MaxLayerFiles, b.counted())}
	}
	left := MaxLayerBytes - b.bytes
	limit := min(int64(safefile.PolicyLimit), left)
	data, err := safefile.ReadFile(ctx, "policy file", path, limit)
	if errors.Is(err, safefile.ErrTooLarge) && limit < safefile.PolicyLimit {
		return nil, &LayerError{path, fmt.Sprintf("the policy files layered come to more than %d MiB in all (%s MiB before this one; %s); layer fewer or smaller files (docs/file-limits.md)", MaxLayerBytes>>20, tenthsMiB(b.bytes), b.counted())}
	}
	return data, err
}

// tenthsMiB is n bytes in MiB to one decimal, rounded down so that it
// never says more than was read: whole MiB said 6.74 MiB of earlier files
// as "6 MiB before this one", which did not add up to the bound.
func tenthsMiB(n int64) string {
	return strconv.FormatFloat(math.Floor(float64(n)*10/(1<<20))/10, 'f', 1, 64)
}

// parse parses the policy file read from path and counts it, within the
// bound on the entries.
func (b *Budget) parse(path string, data []byte) (*File, error) {
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	maxEntries := MaxLayerEntries
	if b.MaxEntries > 0 {
		maxEntries = b.MaxEntries
	}
	if b.entries+len(f.Entries) > maxEntries {
		return nil, &LayerError{path, fmt.Sprintf("the policy files layered hold more than %d entries in all (%d before this file's %d; %s); layer fewer files (docs/file-limits.md)", maxEntries, b.entries, len(f.Entries), b.counted())}
	}
	b.files++
	b.bytes += int64(len(data))
	b.entries += len(f.Entries)
	return f, nil
}
