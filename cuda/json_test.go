package cuda

import (
	"encoding/json"
	"testing"
)

// resolve --json's facts.gpus speaks snake_case as every other key does;
// it printed Go's Index, Name, UUID, Driver, Capability and CapKnown, and
// the capability as {"Major":…,"Minor":…}.
func TestGPUJSONKeys(t *testing.T) {
	b, err := json.Marshal(GPU{Index: 1, Name: "H100", UUID: "GPU-1", Driver: "580", CapKnown: true})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"index", "name", "uuid", "driver", "capability", "cap_known"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no key %q in %s", k, b)
		}
	}
	if m["capability"] != "none" {
		t.Errorf("capability %v, want \"none\" as resolve's other facts write it", m["capability"])
	}
	if len(m) != 6 {
		t.Errorf("%d keys in %s, want 6", len(m), b)
	}
}
