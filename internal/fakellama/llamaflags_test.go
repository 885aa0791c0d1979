package fakellama

import (
	"os"
	"testing"

	"github.com/speclaunch/speclaunch/internal/llamaflags"
)

// The fake's help parser and the launcher's flag table (internal/llamaflags)
// read the same captures independently; they must agree on every flag and on
// how many values it takes, or the launcher would hand the fake (and the
// real server) a flag with the wrong number of tokens.
func TestLlamaflagsAgreesWithTheFake(t *testing.T) {
	for _, f := range []string{"testdata/new-help.txt", "testdata/old-help.txt"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		byName, _ := parseHelp(string(b))
		if len(byName) < 300 {
			t.Fatalf("%s: the fake parsed only %d names", f, len(byName))
		}
		for name, o := range byName {
			n, ok := llamaflags.Values(name)
			if !ok || n != o.nvals {
				t.Errorf("%s: %s takes %d values for the fake, %d (known %v) for llamaflags", f, name, o.nvals, n, ok)
			}
		}
	}
}
