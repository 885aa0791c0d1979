package cuda

import (
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

func TestParseDevices(t *testing.T) {
	tests := []struct {
		name, in string
		want     []GPU
		err      string
	}{
		{"h200", "0, NVIDIA H200, GPU-89, 580.159.04\n",
			[]GPU{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-89", Driver: "580.159.04"}}, ""},
		{"comma in name", "0, NVIDIA, Inc. X, GPU-1, 550.1\n",
			[]GPU{{Index: 0, Name: "NVIDIA, Inc. X", UUID: "GPU-1", Driver: "550.1"}}, ""},
		{"placeholders", "0, [N/A], [Not Supported], 550.1\r\n",
			[]GPU{{Index: 0, Driver: "550.1"}}, ""},
		{"warning line skipped", "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n0, A, GPU-1, 1\n",
			[]GPU{{Index: 0, Name: "A", UUID: "GPU-1", Driver: "1"}}, ""},
		{"blank", "\n\r\n  \n", nil, ""},
		{"too few fields", "0, A, GPU-1\n", nil, "want 4 fields"},
		{"bad index", "x, A, GPU-1, 1\n", nil, `malformed gpu index "x"`},
		{"negative index", "-1, A, GPU-1, 1\n", nil, "malformed gpu index"},
		{"duplicate index", "0, A, GPU-1, 1\n0, B, GPU-2, 1\n", nil, "listed twice"},
		{"prose", "No devices were found\n", nil, "want 4 fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDevices(tt.in)
			if checkErr(t, err, tt.err) {
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("gpu %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// checkErr fails t unless err matches want ("" = no error); it reports
// whether the case expected an error, so the caller stops there.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	return true
}

func TestParseCaps(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[int]key.Capability
		err      string
	}{
		{"h200", "0, 9.0\n", map[int]key.Capability{0: {Major: 9}}, ""},
		{"gb10 and b200", "0, 12.1\r\n1, 10.0\r\n", map[int]key.Capability{0: {Major: 12, Minor: 1}, 1: {Major: 10}}, ""},
		{"n/a is unknown", "0, [N/A]\n1, 8.9\n", map[int]key.Capability{1: {Major: 8, Minor: 9}}, ""},
		{"not supported", "0, [Not Supported]\n", map[int]key.Capability{}, ""},
		{"garbage cap", "0, nine\n", nil, "malformed compute_cap"},
		{"sm form refused", "0, sm_90\n", nil, "malformed compute_cap"},
		{"three fields", "0, 9.0, x\n", nil, "want 2 fields"},
		{"old driver text", `Field "compute_cap" is not a valid field to query.`, nil, "want 2 fields"},
		{"bad index", "x, 9.0\n", nil, `malformed gpu index "x"`},
		{"duplicate index", "0, 9.0\n0, 9.0\n", nil, "gpu index 0 listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCaps(tt.in)
			if checkErr(t, err, tt.err) {
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("gpu %d = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestVisible(t *testing.T) {
	gpus := []GPU{
		{Index: 0, UUID: "GPU-aaaa1111"},
		{Index: 1, UUID: "GPU-aaaa2222"},
		{Index: 2, UUID: "GPU-bbbb3333"},
	}
	tests := []struct {
		name, cvd string
		set       bool
		want      []int
		reason    string
	}{
		{"unset", "", false, []int{0, 1, 2}, ""},
		{"empty", "", true, nil, "CUDA_VISIBLE_DEVICES is empty: no GPU visible"},
		{"spaces only", "  ", true, nil, "CUDA_VISIBLE_DEVICES is empty"},
		{"minus one", "-1", true, nil, "CUDA_VISIBLE_DEVICES=-1: no GPU visible"},
		{"NoDevFiles", "NoDevFiles", true, nil, "no GPU visible"},
		{"indices reordered", "2,0", true, []int{2, 0}, ""},
		{"spaces", " 1 , 2 ", true, []int{1, 2}, ""},
		{"uuid prefix", "GPU-bbbb", true, []int{2}, ""},
		{"uuid case", "gpu-BBBB3333", true, []int{2}, ""},
		{"ambiguous prefix ends list", "GPU-aaaa,2", true, nil, "matches no GPU"},
		{"invalid ends list", "1,9,2", true, []int{1}, ""},
		{"first invalid", "9,0", true, nil, "matches no GPU"},
		{"duplicate ends list", "1,1,2", true, []int{1}, ""},
		{"mig uuid", "MIG-aaaa1111", true, nil, "matches no GPU"},
		{"plus sign", "+1", true, nil, "matches no GPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := visible(gpus, tt.cvd, tt.set)
			var idx []int
			for _, g := range got {
				idx = append(idx, g.Index)
			}
			if !slices.Equal(idx, tt.want) {
				t.Errorf("visible = %v, want %v", idx, tt.want)
			}
			if !strings.Contains(reason, tt.reason) || (tt.reason == "" && reason != "") {
				t.Errorf("reason = %q, want %q", reason, tt.reason)
			}
		})
	}
}

func TestAgree(t *testing.T) {
	c90, c121, c89 := key.Capability{Major: 9}, key.Capability{Major: 12, Minor: 1}, key.Capability{Major: 8, Minor: 9}
	g := func(i int, c key.Capability) GPU { return GPU{Index: i, Name: "G", Capability: c, CapKnown: true} }
	tests := []struct {
		name   string
		in     []GPU
		want   key.Capability
		reason string
	}{
		{"none", nil, key.None, "no GPU visible"},
		{"one", []GPU{g(0, c90)}, c90, ""},
		{"same", []GPU{g(0, c90), g(1, c90)}, c90, ""},
		{"two differ", []GPU{g(0, c90), g(1, c121)}, key.None, "2 visible GPUs disagree: 9.0 and 12.1"},
		{"three, three caps", []GPU{g(0, c90), g(1, c89), g(2, c121)}, key.None, "3 visible GPUs disagree: 9.0, 8.9 and 12.1"},
		{"unknown", []GPU{g(0, c90), {Index: 1, Name: "X"}}, key.None, "GPU 1 (X) does not report its compute capability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := agree(tt.in)
			if got != tt.want || reason != tt.reason && !(tt.reason != "" && strings.Contains(reason, tt.reason)) {
				t.Errorf("agree = %v, %q; want %v, %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func FuzzParseDevices(f *testing.F) {
	f.Add(h200x2)
	f.Add("0, NVIDIA, Inc., GPU-1, 1\r\n\r\nWARNING: x\n")
	f.Add("x,,,\n0,[N/A],[N/A],[N/A]")
	f.Fuzz(func(t *testing.T, in string) {
		gpus, err := parseDevices(in)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, g := range gpus {
			if g.Index < 0 || seen[g.Index] {
				t.Fatalf("bad or repeated index in %+v", gpus)
			}
			seen[g.Index] = true
			if g.CapKnown {
				t.Fatalf("device list cannot know a capability: %+v", g)
			}
		}
		// Whatever parsed, visibility filtering must stay within the list.
		for _, cvd := range []string{"0", "1,0", "GPU-", "GPU-1,3"} {
			vis, reason := visible(gpus, cvd, true)
			if len(vis) > len(gpus) || (len(vis) == 0) != (reason != "") {
				t.Fatalf("visible(%q) = %v, %q", cvd, vis, reason)
			}
		}
	})
}

func FuzzParseCaps(f *testing.F) {
	f.Add("0, 9.0\n1, 12.1\r\n")
	f.Add("0, [N/A]\n")
	f.Add(oldField)
	f.Fuzz(func(t *testing.T, in string) {
		caps, err := parseCaps(in)
		if err != nil {
			return
		}
		for i, c := range caps {
			if i < 0 || !c.Known() || c.Minor < 0 || c.Minor > 9 {
				t.Fatalf("bad capability %d: %+v", i, c)
			}
			if _, err := key.ParseCapability(c.String()); err != nil {
				t.Fatalf("capability %v does not round-trip: %v", c, err)
			}
		}
	})
}
