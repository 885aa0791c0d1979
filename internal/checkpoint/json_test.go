package checkpoint

import (
	"encoding/json"
	"testing"
)

func jsonValid(b []byte) bool { return json.Valid(b) }

func TestParseJSONNumbers(t *testing.T) {
	tests := []struct {
		in  string
		nk  int
		u64 uint64
		isU bool
	}{
		{"0", numU64, 0, true},
		{"16", numU64, 16, true},
		{"18446744073709551615", numU64, 1<<64 - 1, true},
		{"18446744073709551616", numF64, 0, false},
		{"-0", numF64, 0, false},
		{"-1", numI64, 0, false},
		{"-9223372036854775808", numI64, 0, false},
		{"-9223372036854775809", numF64, 0, false},
		{"16.0", numF64, 0, false},
		{"1e1", numF64, 0, false},
	}
	for _, tt := range tests {
		v, err := parseJSON([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		u, ok := v.asU64()
		if v.nk != tt.nk || ok != tt.isU || u != tt.u64 {
			t.Errorf("%s: kind %d as_u64 %d,%v; want kind %d %d,%v", tt.in, v.nk, u, ok, tt.nk, tt.u64, tt.isU)
		}
	}
	for _, bad := range []string{"01", "1.", ".5", "-", "1e", "+1", "NaN", "Infinity", "0x10"} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseJSONKeyOrder(t *testing.T) {
	v, err := parseJSON([]byte(`{"b":1,"a":2,"b":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.keys) != 2 || v.keys[0] != "b" || v.keys[1] != "a" || !v.dups["b"] {
		t.Fatalf("keys %v dups %v", v.keys, v.dups)
	}
	if u, _ := v.obj["b"].asU64(); u != 3 {
		t.Fatalf("b = %d, want the last value 3", u)
	}
}
