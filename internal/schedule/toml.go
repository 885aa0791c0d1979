package schedule

import (
	"fmt"
	"math"
	"strconv"

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
			return nil, fmt.Errorf("bucket %d is %s, not [lo, hi, width]", i+1, tomlguard.Kind(r))
		}
		for j, x := range xs {
			n, ok := x.(int64)
			switch {
			case !ok:
				return nil, fmt.Errorf("bucket %d number %d is %s (%s), not a whole number: write it without quotes or a decimal point", i+1, j+1, tomlguard.Kind(x), clip(tomlguard.Text(x)))
			case n < -maxNumber || n > maxNumber: // in range, FromTriples says what is wrong with it
				return nil, OutOfRange(i+1, j+1, strconv.FormatInt(n, 10))
			}
			out[i] = append(out[i], int(n))
		}
	}
	return out, nil
}

// OutOfRange is the error for number j of bucket i (both from 1), written
// as text, that is far out of range: TriplesOf's for one an int64 holds,
// and a profile's for one past it, which the TOML decoder refuses before
// TriplesOf sees it (profiles/profile.go, outOfRange).
func OutOfRange(i, j int, text string) error {
	return fmt.Errorf("bucket %d number %d (%s) is far out of range: loads go up to a few hundred requests, widths to 256", i, j, clip(text))
}
