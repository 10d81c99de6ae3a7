package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build is one set of binaries the benchmarks measure: this tree, or the
// baseline revision it is compared with.
type build struct {
	name string // "this tree" or "baseline <rev>"
	bin  string
}

// builds are this tree's binaries and, when INFRAKIT_BENCH_BASELINE names a
// git revision (make bench BASELINE=rev), that revision's, so that a change
// is judged against the code before it on the same machine in the same
// run: figures from another day or another load say little here, where
// the same binary's 10k apply has been seen to take 2.8 s and 7.4 s within
// five minutes.
func builds(t *testing.T) []build {
	t.Helper()
	out := []build{{name: "this tree", bin: buildBinaries(t)}}
	if rev := os.Getenv("INFRAKIT_BENCH_BASELINE"); rev != "" {
		out = append(out, build{name: "baseline " + rev, bin: buildRevision(t, rev)})
	}
	return out
}

// buildRevision builds the binaries of git revision rev of this repository:
// its tree is exported with git archive into a temporary directory (the
// repository and its worktrees are left alone) and built there.
func buildRevision(t *testing.T, rev string) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = ".."
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("INFRAKIT_BENCH_BASELINE=%s: git archive: %v\n%s", rev, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("INFRAKIT_BENCH_BASELINE=%s: tar: %v", rev, err)
	}
	bin := t.TempDir()
	buildInto(t, src, bin)
	return bin
}

// buildInto builds infrakit and the providers the benchmarks run from the
// module in src into bin.
func buildInto(t *testing.T, src, bin string) {
	t.Helper()
	for name, pkg := range map[string]string{
		"infrakit":                    ".",
		"infrakit-provider-simulator": "./plugins/simulator",
		"infrakit-provider-vanilla":   "./plugins/vanilla",
	} {
		// Stripped, as make build builds them.
		cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s in %s: %v\n%s", pkg, src, err, out)
		}
	}
}

// compare is the line that sets this tree's figure against the baseline's.
func compare(what string, tree, base float64, unit string) string {
	return fmt.Sprintf("%-22s this tree %.3g%s, baseline %.3g%s: %+.0f%%\n", what, tree, unit, base, unit, 100*(tree-base)/base)
}
