package control

import (
	"math"
	"testing"
)

// TestStudentZ checks the bound against Student's t tables: the two-sided
// 95 % points (z 1.96) and the tail of 4 standard errors.
func TestStudentZ(t *testing.T) {
	tests := []struct {
		z    float64
		df   int
		want float64
	}{
		{1.959964, 1, 12.706},
		{1.959964, 4, 2.776},
		{1.959964, 9, 2.262},
		{1.959964, 30, 2.042},
		{4, 4, 17.45},
		{4, 9, 7.00},
		{4, 100000, 4.00},
	}
	for _, tt := range tests {
		if got := studentZ(tt.z, tt.df); math.Abs(got-tt.want) > 0.005*tt.want {
			t.Errorf("studentZ(%v, %d) = %.3f, want %.3f", tt.z, tt.df, got, tt.want)
		}
	}
	if !math.IsInf(studentZ(4, 0), 1) {
		t.Errorf("studentZ(4, 0) = %v, want +Inf (no spread to read)", studentZ(4, 0))
	}
}

// TestRecentBound: the drift test's bound reads the scrapes' spread at
// Student's bound for their count, and never below the cycles' own
// standard error.
func TestRecentBound(t *testing.T) {
	five := Engine{Recent: []float64{2.7, 2.9, 2.8, 3.0, 2.6}, RecentCycles: []float64{500, 500, 500, 500, 500}}
	se := math.Sqrt(batchVar(14, 2.7*2.7+2.9*2.9+2.8*2.8+3*3+2.6*2.6, 5)) // 0.0707
	tests := []struct {
		name    string
		e       Engine
		varL    float64
		student bool
		want    float64
	}{
		{"five scrapes, normal bound", five, 0, false, 4 * se},
		{"five scrapes, Student's bound", five, 0, true, 17.45 * se},
		{"the cycles' error is larger", five, 2500, true, 4 * math.Sqrt(2500.0/2500)},
		{"too few scrapes", Engine{Recent: []float64{3, 3}, RecentCycles: []float64{9, 9}}, 0, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, bound, ok := tt.e.recent(tt.varL, 4, tt.student)
			if tt.want < 0 {
				if ok {
					t.Fatalf("recent read %d scrapes, want none (fewer than %d)", len(tt.e.Recent), minScrapes)
				}
				return
			}
			if !ok || math.Abs(m-2.8) > 1e-9 || math.Abs(bound-tt.want) > 0.005*tt.want {
				t.Errorf("recent = %.3f, bound %.4f, %v; want 2.800, %.4f", m, bound, ok, tt.want)
			}
		})
	}
}
