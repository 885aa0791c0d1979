package evidence

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

// Every committed record validates, and its stored figures agree with its
// raw runs: the check that fails a tampered record passes the real ones.
func TestCommittedRecordsAgreeWithTheirRuns(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "docs", "benchmark_results", "*.json"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("records: %v %d", err, len(paths))
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := record.Decode(b)
			if err != nil {
				t.Fatalf("does not validate: %v", err)
			}
			for _, d := range Of(rec).Disagreements() {
				t.Error(d)
			}
		})
	}
}
