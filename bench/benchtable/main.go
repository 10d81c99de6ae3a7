// Command benchtable prints the closing table of `make bench`: every
// figure of the results file the INFRAKIT_BENCH=1 tests wrote, beside its
// target and bench/baseline.json, flagging a figure more than 20 % worse
// than its baseline. With -update it also writes the measured figures into
// the baseline (figures this run skipped keep their previous values).
//
//	go run ./bench/benchtable -results bin/bench-results.jsonl -baseline bench/baseline.json [-update]
//
// It exits 0 whatever the figures say: timings are reported, not asserted.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/infrakit/infrakit/bench/figures"
)

func main() {
	results := flag.String("results", "bin/bench-results.jsonl", "the results file the benchmarks appended to")
	baseline := flag.String("baseline", "bench/baseline.json", "the baseline to compare with")
	update := flag.Bool("update", false, "write this run's figures into the baseline")
	flag.Parse()
	if err := run(*results, *baseline, *update); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(resultsPath, baselinePath string, update bool) error {
	results, err := figures.ReadResults(resultsPath)
	if err != nil {
		return err
	}
	base, err := figures.ReadBaseline(baselinePath)
	if err != nil {
		return err
	}
	fmt.Printf("\n== infrakit benchmarks (issue 19 targets); baseline %s: %s\n", baselinePath, orNone(base.Recorded))
	fmt.Print(figures.Table(figures.Lines(results, base)))
	if !update {
		return nil
	}
	host, _ := os.Hostname()
	next := figures.Updated(base, results, figures.Recorded(time.Now(), revision(), host))
	if err := figures.WriteBaseline(baselinePath, next); err != nil {
		return err
	}
	fmt.Printf("wrote %d figures to %s (commit it with the change it measures)\n", len(results), baselinePath)
	return nil
}

// revision is the checked-out commit, marked when the tree has changes.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func orNone(s string) string {
	if s == "" {
		return "none yet (make bench BENCH_UPDATE_BASELINE=1 writes one)"
	}
	return s
}
