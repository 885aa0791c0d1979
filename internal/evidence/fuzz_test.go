package evidence

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

// FuzzRecord: whatever a record file holds, deriving its evidence never
// panics: a record that validates is judged (every width), checked against
// its runs and chosen from, and one that does not is refused.
func FuzzRecord(f *testing.F) {
	for _, name := range []string{"draft-block-width-default-gb10-2026-09-20.json"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmark_results", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"schema":1,"key":{"engine":"mlxcel","drafter":"dflash","capability":"12.1","quant":"affine"},"arms":[` +
		`{"kind":"classic","status":"ok","runs":[{"round":1,"phase":"measured","tok_per_s":1},{"round":1,"phase":"measured","tok_per_s":0,"bracket":"last"}]},` +
		`{"kind":"default","width":4,"status":"ok","runs":[{"round":1,"phase":"measured","tok_per_s":0},{"round":2,"phase":"measured","tok_per_s":0}]},` +
		`{"kind":"width","width":5,"status":"ok","stats":{"n":3,"min":2,"median":3,"max":4}}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := record.Decode(data)
		if err != nil {
			return
		}
		ev := Of(rec)
		ev.Disagreements()
		for w := range ev.rep {
			if _, err := ev.Judge(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Choose(context.Background(), []*Evidence{ev}); err != nil {
			t.Fatal(err)
		}
	})
}
