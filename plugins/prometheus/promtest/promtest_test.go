package promtest

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartScrapeStop: a Prometheus started by Start discovers the targets
// of its file_sd file, scrapes them, answers queries over them, follows
// the file when it changes, and is stopped by the test's end.
func TestStartScrapeStop(t *testing.T) {
	file := filepath.Join(t.TempDir(), "targets.json")
	s := Start(t, Config{Files: []string{file}})
	a := Exporter(t, "# TYPE promtest_value gauge\npromtest_value 2\n")
	b := Exporter(t, "# TYPE promtest_value gauge\npromtest_value 5\n")

	WriteFileSD(t, file, TargetGroup{Targets: []string{a}, Labels: map[string]string{"side": "a"}},
		TargetGroup{Targets: []string{b}, Labels: map[string]string{"side": "b"}})
	got := s.WaitTargets(t, a, b)
	if l := Labels(got[a]); l["side"] != "a" || l["job"] != Job || l["instance"] != a {
		t.Errorf("target %s has labels %v, want side=a, job=%s, instance=%s", a, l, Job, a)
	}
	s.WaitValue(t, "sum(promtest_value)", "both scraped", func(v float64) bool { return v == 7 })

	WriteFileSD(t, file, TargetGroup{Targets: []string{b}})
	s.WaitTargets(t, b)
	// The target that left is marked stale at once, not after the lookback.
	s.WaitValue(t, "sum(promtest_value)", "only b counted", func(v float64) bool { return v == 5 })

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}
