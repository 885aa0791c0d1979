package simcost

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// maxReplayFile bounds one committed adapteval file (the largest is under
// 1 MiB).
const maxReplayFile = 16 << 20

// LoadReplayCells reads every committed fixed-width adapteval file of an
// H200 cell in dir (docs/benchmark_results/adapteval/h200-*-fixed.json)
// with the decisions file of the same cell (its probe curve and
// acceptance), sorted by name. The cost model is the H200's (H200Q8);
// another card's fixed files have no decisions file beside them.
func LoadReplayCells(dir string) ([]ReplayCell, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "h200-*-fixed.json"))
	if err != nil {
		return nil, fmt.Errorf("replay cells in %s: %w", dir, err)
	}
	sort.Strings(paths)
	var cells []ReplayCell
	for _, p := range paths {
		c, err := loadReplayCell(p)
		if err != nil {
			return nil, err
		}
		cells = append(cells, c)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("replay cells: no h200-*-fixed.json in %s", dir)
	}
	return cells, nil
}

type fixedFile struct {
	Runs map[string]struct {
		Clients   int `json:"clients"`
		MaxTokens int `json:"max_tokens"`
		Width     int `json:"width"`
		Measure   *struct {
			TokensPerS float64 `json:"tokens_per_s"`
		} `json:"measure"`
	} `json:"runs"`
}

func loadReplayCell(path string) (ReplayCell, error) {
	c := ReplayCell{Name: strings.TrimSuffix(filepath.Base(path), "-fixed.json"), Fixed: map[int][]float64{}}
	b, err := readBounded(path)
	if err != nil {
		return c, err
	}
	var f fixedFile
	if err := json.Unmarshal(b, &f); err != nil {
		return c, fmt.Errorf("%s: not an adapteval fixed file: %w", path, err)
	}
	keys := make([]string, 0, len(f.Runs))
	for k := range f.Runs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // W before W-b before W-c
	for _, k := range keys {
		r := f.Runs[k]
		if r.Measure == nil || r.Measure.TokensPerS <= 0 || r.Width < 1 {
			continue // a run that did not measure (a crashed seam run)
		}
		c.Fixed[r.Width] = append(c.Fixed[r.Width], r.Measure.TokensPerS)
		c.Clients, c.ReqTokens = max(c.Clients, r.Clients), max(c.ReqTokens, r.MaxTokens)
	}
	if c.Clients == 0 && strings.Contains(c.Name, "-c4") { // the seam file names no clients
		c.Clients = 4
	}
	if c.ReqTokens == 0 {
		c.ReqTokens = 128
	}
	dec := strings.TrimSuffix(path, "-fixed.json") + "-decisions.jsonl"
	if c.Verify, c.Accept, err = readDecisions(dec); err != nil {
		return c, err
	}
	if len(c.Fixed) == 0 || c.Clients == 0 {
		return c, fmt.Errorf("%s: no measured width or no client count", path)
	}
	return c, nil
}

func readBounded(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("replay cell: %w", err)
	}
	if fi.Size() > maxReplayFile {
		return nil, fmt.Errorf("%s: larger than %d MiB; not an adapteval file", path, maxReplayFile>>20)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay cell: %w", err)
	}
	return b, nil
}

// sEntry is one "k:S(count/cycles)" of a decision line.
var sEntry = regexp.MustCompile(`(\d+):([0-9.]+)\((\d+)/(\d+)\)`)

// readDecisions takes the probe's curve ("curve_ms") and the acceptance of
// the decision line that saw the most positions, the most cycles at
// position 1 among those (the loop's best estimate in the cell).
func readDecisions(path string) (map[int]float64, []float64, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, nil, err
	}
	var curve map[int]float64
	var best []float64
	bestN := -1
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		var d struct {
			Msg   string `json:"msg"`
			Curve string `json:"curve_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if d.Curve != "" {
			if curve, err = parseCurve(d.Curve); err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
		}
		_, sPart, ok := strings.Cut(d.Msg, "S(k)=")
		if !ok {
			continue
		}
		sPart, _, _ = strings.Cut(sPart, ";")
		m := sEntry.FindAllStringSubmatch(sPart, -1)
		if len(m) == 0 {
			continue
		}
		n, _ := strconv.Atoi(m[0][4])
		if len(m) > len(best) || len(m) == len(best) && n >= bestN {
			best, bestN = make([]float64, len(m)), n
			for i, e := range m {
				best[i], _ = strconv.ParseFloat(e[2], 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if curve == nil || best == nil {
		return nil, nil, errors.New(path + ": no verify-cost curve or no acceptance by position")
	}
	return curve, best, nil
}

// parseCurve reads "1:3.23 2:3.27 …".
func parseCurve(s string) (map[int]float64, error) {
	curve := map[int]float64{}
	for _, f := range strings.Fields(s) {
		r, v, ok := strings.Cut(f, ":")
		rows, err1 := strconv.Atoi(r)
		ms, err2 := strconv.ParseFloat(v, 64)
		if !ok || err1 != nil || err2 != nil || rows < 1 || !(ms > 0) {
			return nil, fmt.Errorf("curve_ms: %q is not rows:ms", f)
		}
		curve[rows] = ms
	}
	return curve, nil
}
