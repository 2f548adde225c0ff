package bench

import (
	"slices"
	"testing"
)

func TestThresholdsOverrideAndReportUnknownKeys(t *testing.T) {
	th, err := parseThresholds(" scale.heapP95MB=150, quota.learned.refused = 2,typo.key=1")
	if err != nil {
		t.Fatal(err)
	}
	b := &Bench{Report: &Report{}, thresholds: th}
	if got := b.Threshold("scale.heapP95MB", 120); got != 150 {
		t.Errorf("overridden threshold = %g, want 150", got)
	}
	if got := b.Threshold("scale.averageCores", 0.5); got != 0.5 {
		t.Errorf("default threshold = %g, want 0.5", got)
	}
	b.Threshold("quota.learned.refused", 1)
	if got := b.Report.Overrides["scale.heapP95MB"]; got != "150 (default 120)" {
		t.Errorf("override recorded as %q", got)
	}
	if _, ok := b.Report.Overrides["scale.averageCores"]; ok {
		t.Error("a default recorded as an override")
	}
	met, missed := true, false
	b.Report.Checks = []Check{{Measure: "kept", Met: &met}, {Measure: "missed", Met: &missed, Value: "9", Target: "< 1"}, {Measure: "unmeasured"}}
	got := b.missed()
	if len(got) != 2 || !slices.ContainsFunc(got, func(s string) bool { return s == "[] missed: 9, target < 1" }) ||
		!slices.ContainsFunc(got, func(s string) bool { return s == `BENCH_THRESHOLDS names "typo.key", which no check of this run has` }) {
		t.Errorf("missed = %q", got)
	}
}

func TestThresholdsRefuseMalformedOverrides(t *testing.T) {
	for _, v := range []string{"scale.heapP95MB", "scale.heapP95MB=lots"} {
		if _, err := parseThresholds(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}
