package figures

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarizeAndPercentile(t *testing.T) {
	r := Summarize("apply_10k_stack", []float64{3, 1, 2, 9})
	if r.Median != 2 || r.Max != 9 || r.Runs != 4 {
		t.Fatalf("Summarize = %+v, want median 2 (the lower middle), max 9, 4 runs", r)
	}
	if r := Summarize("apply_10k_stack", nil); r.Skipped == "" {
		t.Fatalf("Summarize of nothing = %+v, want skipped", r)
	}
	samples := make([]float64, 20)
	for i := range samples {
		samples[i] = float64(20 - i) // 20 … 1
	}
	for _, c := range []struct{ p, want float64 }{{50, 10}, {99, 20}, {100, 20}, {1, 1}} {
		if got := Percentile(samples, c.p); got != c.want {
			t.Errorf("Percentile(1…20, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestLines(t *testing.T) {
	results := map[string]Result{
		"apply_10k_stack": {Key: "apply_10k_stack", Median: 0.9, Max: 1.2, Runs: 3},
		"plan_10k_stack":  {Key: "plan_10k_stack", Median: 0.5, Max: 0.6, Runs: 3},
		"apply_100k":      {Key: "apply_100k", Skipped: "disk full"},
		"soak_fds_growth": {Key: "soak_fds_growth", Median: 1, Max: 1, Runs: 1},
	}
	base := Baseline{Figures: map[string]BaseFigure{
		"apply_10k_stack": {Median: 0.7}, // 0.9 is 29 % worse
		"plan_10k_stack":  {Median: 0.45},
		"soak_fds_growth": {Median: 0}, // any growth is worse than none
	}}
	byKey := map[string]Line{}
	for _, l := range Lines(results, base) {
		byKey[l.Figure.Key] = l
	}
	if len(byKey) != len(Catalogue) {
		t.Fatalf("%d lines for %d figures", len(byKey), len(Catalogue))
	}
	for _, c := range []struct {
		key      string
		measured bool
		verdict  string
		worse    bool
		why      string
	}{
		{"apply_10k_stack", true, "PASS", true, ""},
		{"plan_10k_stack", true, "MISS", false, ""},
		{"soak_fds_growth", true, "MISS", true, ""},
		{"apply_100k", false, "", false, "skipped: disk full"},
		{"heal_p50_10k", false, "", false, "skipped: not run (-run 'TestBenchWatchStack10k/heal')"},
		{"rss_100k_providers", false, "", false, "skipped: not run"},
	} {
		l := byKey[c.key]
		if l.Measured != c.measured || l.Verdict != c.verdict || l.Worse != c.worse || !strings.HasPrefix(l.Why, c.why) {
			t.Errorf("%s: measured %v verdict %q worse %v why %q; want %v %q %v %q", c.key, l.Measured, l.Verdict, l.Worse, l.Why, c.measured, c.verdict, c.worse, c.why)
		}
	}
	table := Table(Lines(results, base))
	for _, want := range []string{"WORSE >20%", "skipped: disk full", "2 figures missed their target; 2 are more than 20 % worse"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

func TestResultsAndBaselineFiles(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.jsonl")
	for _, r := range []Result{
		{Key: "apply_10k_stack", Median: 2, Max: 3, Runs: 3},
		{Key: "plan_10k_stack", Skipped: "no time"},
		{Key: "apply_10k_stack", Median: 1, Max: 1.5, Runs: 3}, // a rerun: the last wins
	} {
		if err := Append(results, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadResults(results)
	if err != nil {
		t.Fatal(err)
	}
	if got["apply_10k_stack"].Median != 1 || got["plan_10k_stack"].Skipped != "no time" {
		t.Fatalf("ReadResults = %+v", got)
	}

	path := filepath.Join(dir, "baseline.json")
	empty, err := ReadBaseline(path)
	if err != nil || len(empty.Figures) != 0 {
		t.Fatalf("a missing baseline reads as %+v, %v; want empty", empty, err)
	}
	old := Baseline{Figures: map[string]BaseFigure{"plan_10k_stack": {Median: 0.3}, "apply_10k_stack": {Median: 5}}}
	if err := WriteBaseline(path, Updated(old, got, "now")); err != nil {
		t.Fatal(err)
	}
	b, err := ReadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.Figures["apply_10k_stack"].Median != 1 || b.Figures["plan_10k_stack"].Median != 0.3 || b.Recorded != "now" {
		t.Fatalf("updated baseline %+v: want the measured apply, the skipped plan kept", b)
	}
}

func TestParseResultsDiagnostics(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"{\"key\":\"apply_10k_stack\"}\nnot json\n", "r.jsonl:2:"},
		{"{\"key\":\"no_such_figure\"}\n", `r.jsonl:1: unknown figure "no_such_figure"`},
	} {
		_, err := ParseResults("r.jsonl", []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseResults(%q) = %v, want an error with %q", c.data, err, c.want)
		}
	}
}
