package cuda

import (
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	vis := []GPU{{Index: 0}, {Index: 1}}
	for _, c := range []struct {
		name, out   string
		vis         []GPU
		free, total int64
		err         string
	}{
		{"one GPU", "0, 143771, 142800\n", vis[:1], 142800, 143771, ""},
		{"least free of the visible", "0, 143771, 90000\n1, 143771, 50000\n", vis, 50000, 143771, ""},
		{"hidden GPU ignored", "0, 143771, 90000\n1, 143771, 50000\n", vis[:1], 90000, 143771, ""},
		{"unified memory part", "0, [N/A], [N/A]\n", vis[:1], 0, 0, "reports no memory figures"},
		{"garbage", "hello\n", vis[:1], 0, 0, "want index, memory.total, memory.free"},
		{"none visible", "3, 1, 1\n", vis[:1], 0, 0, "none of the visible GPUs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := parseMemory(c.out, c.vis)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || m.FreeMiB != c.free || m.TotalMiB != c.total {
				t.Fatalf("got %+v, %v", m, err)
			}
		})
	}
}

func TestParseApps(t *testing.T) {
	got, err := parseApps("1234, 9000\n1234, 9000\n99, [N/A]\n")
	if err != nil || got[1234] != 18000 || len(got) != 1 {
		t.Fatalf("got %v %v", got, err)
	}
	if _, err := parseApps("x, 1\n"); err == nil {
		t.Fatal("bad pid accepted")
	}
	if got, err := parseApps(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
}
