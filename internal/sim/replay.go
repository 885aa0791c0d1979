package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/speclaunch/speclaunch/internal/record"
)

// maxRecordBytes bounds a --sim-record file; committed records are ~100 KiB.
const maxRecordBytes = 64 << 20

// LoadRecord reads a bench record (docs/benchmark_results/*.json) for
// --sim-record.
func LoadRecord(path string) (record.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return record.Record{}, fmt.Errorf("--sim-record: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return record.Record{}, fmt.Errorf("--sim-record %s: %w", path, err)
	}
	if len(b) > maxRecordBytes {
		return record.Record{}, fmt.Errorf("--sim-record %s: larger than %d MiB; not a bench record", path, maxRecordBytes>>20)
	}
	var r record.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return record.Record{}, fmt.Errorf("--sim-record %s: not a bench record: %w", path, err)
	}
	return r, nil
}

// ReplayCost makes a record's measurements the sim's model: the classic
// arm's time per token is one row's cost, each width arm's median time per
// draft+verify cycle is that width's verify cost (a record does not split
// drafting from verifying, so the whole cycle sits in the verify step and
// the drafting terms are zero), and the acceptance by draft position of the
// arm that observed the most positions is the acceptance profile, made
// non-increasing (a later position can never accept more often). Noise and
// prefill cost are kept from base.
func ReplayCost(r record.Record, base CostModel) (CostModel, error) {
	c := base
	c.Verify = map[int]float64{}
	c.Emitted = map[int]float64{}
	c.DraftMS, c.DraftTokenMS = 0, 0
	c.ClassicMS = 0
	var accept []float64
	for _, a := range r.Arms {
		if a.Status != record.StatusOK || a.Cost.MSPerCycle <= 0 {
			continue
		}
		switch a.Kind {
		case "classic":
			c.ClassicMS = a.Cost.MSPerCycle
			c.Verify[1] = a.Cost.MSPerCycle
		case "width":
			if a.Width >= 2 {
				c.Verify[a.Width] = a.Cost.MSPerCycle
			}
			if len(a.Acceptance.ByPosition) > len(accept) {
				accept = a.Acceptance.ByPosition
			}
		}
	}
	var errs []error
	if c.ClassicMS <= 0 {
		errs = append(errs, errors.New("no classic arm with a cost per cycle"))
	}
	if len(c.Verify) < 2 {
		errs = append(errs, errors.New("no width arm with a cost per cycle"))
	}
	if len(accept) == 0 {
		errs = append(errs, errors.New("no acceptance.by_position (only llama.cpp records with per-position counters can be replayed)"))
	}
	if err := errors.Join(errs...); err != nil {
		return CostModel{}, fmt.Errorf("record %q: %w", r.Name, err)
	}
	c.Accept = monotone(accept)
	for w := range c.Verify {
		if w >= 2 {
			c.Emitted[w] = emittedFromProfile(c.Accept, w)
		}
	}
	return c, nil
}

// monotone clamps S into [0, 1] and makes it non-increasing.
func monotone(s []float64) []float64 {
	out := slices.Clone(s)
	prev := 1.0
	for i, v := range out {
		v = max(0, min(v, prev))
		out[i], prev = v, v
	}
	return out
}
