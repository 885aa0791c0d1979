package schedule

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/tomlguard"
)

// maxNumber bounds a load or width read from a file: far above any real
// one (widths stop at 256), and an int on every platform.
const maxNumber = math.MaxInt32

// TriplesOf reads the rows of a decoded TOML schedule, [[lo, hi, width],
// ...], into numbers for FromTriples; the error names the bucket and the
// number, what was written and why it is refused. Profiles and policy
// files read schedules through it.
func TriplesOf(rows []any) ([][]int, error) {
	if len(rows) > MaxBuckets {
		return nil, fmt.Errorf("%d buckets, above the limit of %d: merge neighbouring loads that share a width", len(rows), MaxBuckets)
	}
	out := make([][]int, len(rows))
	for i, r := range rows {
		xs, ok := r.([]any)
		if !ok {
			return nil, inBucket(i+1, fmt.Errorf("bucket %d is %s, not [lo, hi, width]", i+1, tomlguard.Kind(r)))
		}
		for j, x := range xs {
			n, ok := x.(int64)
			switch {
			case isNested(x):
				// [[[1, 1, 6]], ...]: a bracket too many, which no
				// quotes or decimal point explain.
				return nil, inBucket(i+1, fmt.Errorf("bucket %d number %d is %s (%s), not a whole number: a bucket is one [lo, hi, width] of whole numbers, one level of brackets per bucket", i+1, j+1, tomlguard.Kind(x), clip(tomlguard.Text(x))))
			case !ok:
				return nil, inBucket(i+1, fmt.Errorf("bucket %d number %d is %s (%s), not a whole number: write it without quotes or a decimal point", i+1, j+1, tomlguard.Kind(x), clip(tomlguard.Text(x))))
			case n < -maxNumber || n > maxNumber: // in range, FromTriples says what is wrong with it
				return nil, OutOfRange(i+1, j+1, rowText(xs), strconv.FormatInt(n, 10))
			}
			out[i] = append(out[i], int(n))
		}
	}
	return out, nil
}

// isNested reports a decoded value that is an array or a table, where a
// bucket's number goes.
func isNested(x any) bool {
	switch x.(type) {
	case []any, map[string]any, []map[string]any:
		return true
	}
	return false
}

// rowText is a decoded bucket as FromTriples names one: [2, 0, 4].
func rowText(xs []any) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = tomlguard.Text(x)
	}
	return "[" + clip(strings.Join(parts, ", ")) + "]"
}

// OutOfRange is the error for number j of bucket i (both from 1), written
// as text, that an int cannot hold: TriplesOf's, and a profile's or a
// policy file's for one past int64, which the TOML decoder refuses before
// TriplesOf sees it (profiles/profile.go, internal/policy/parse.go). It
// says what validate says of a number merely too large, so that the
// message does not change with the number's size; row names the bucket
// as written, "[1, 0, 99999999999999999999]", or is "" where unknown.
func OutOfRange(i, j int, row, text string) error {
	if j > 3 {
		return notATriple(i, "more than 3")
	}
	where := fmt.Sprintf("bucket %d", i)
	if row != "" {
		where += " " + row
	}
	n := maxNumber // beyond every bound, on the side the sign says
	if strings.HasPrefix(text, "-") {
		n = -maxNumber
	}
	return inBucket(i, fmt.Errorf("%s %s", where, outside(j-1, n, text)))
}
