package secret

import (
	"fmt"
	"testing"
)

// BenchmarkRedactorAdd adds the 116,508 keys of a 1 MiB key file to a
// Redactor, then adds them again (the seeding and the build each add
// them).
func BenchmarkRedactorAdd(b *testing.B) {
	keys := make([]string, 116508)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%07d", i)
	}
	for b.Loop() {
		var r Redactor
		r.Add(keys...)
		r.Add(keys...)
	}
}
