package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/state"
)

// hardStack is a small stack for the hardening tests: cattle of size n and
// pets with the given logical IDs, on the simulator.
func hardStack(n int, pets []string) string {
	quoted := make([]string, len(pets))
	for i, p := range pets {
		quoted[i] = strconv.Quote(p)
	}
	return fmt.Sprintf(`stack "hard" {}
provider "simulator" {}
provider "vanilla" {}

group "cattle" {
  size = %d
  instance {
    provider = simulator
    type     = "compute"
    properties = { secret = "s3cret" }
  }
  flavor { provider = vanilla }
}

group "pets" {
  logical_ids = [%s]
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`, n, strings.Join(quoted, ", "))
}

// simRecord is the part of a simulator instance file the tests read.
type simRecord struct {
	ID        string            `json:"id"`
	Tags      map[string]string `json:"tags"`
	LogicalID *string           `json:"logical_id"`
}

// simulated reads the simulator's compute instances under dir (the
// simulator's root), by group.
func simulated(t *testing.T, dir string) map[string][]simRecord {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "instances", "compute", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]simRecord{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue // destroyed while listing
		}
		if err != nil {
			t.Fatal(err)
		}
		var r simRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[r.Tags["infrakit.group"]] = append(out[r.Tags["infrakit.group"]], r)
	}
	return out
}

// duplicatePets returns the logical IDs held by more than one instance.
func duplicatePets(recs []simRecord) []string {
	seen := map[string]int{}
	var dup []string
	for _, r := range recs {
		if r.LogicalID == nil {
			continue
		}
		if seen[*r.LogicalID]++; seen[*r.LogicalID] == 2 {
			dup = append(dup, *r.LogicalID)
		}
	}
	return dup
}

// readState reads the state file at path as infrakit does (whole, valid).
func readState(t *testing.T, path string) *state.Document {
	t.Helper()
	doc, err := state.NewLocal(path).Read(t.Context())
	if err != nil {
		t.Fatalf("the state does not load: %v", err)
	}
	return doc
}

// providerPIDs lists the running processes whose executable lies under dir
// (the workdir's installed providers).
func providerPIDs(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			continue
		}
		// A zombie has no exe link; one that is still there runs.
		out = append(out, pid)
	}
	return out
}

// providersGone polls until no provider of dir runs, up to bound, and
// returns how long that took, or fails the test naming the survivors.
func providersGone(t *testing.T, dir string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		left := providerPIDs(dir)
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("provider processes %v still run %s after their infrakit was killed", left, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
