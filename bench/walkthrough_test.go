package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// targetFollow is issue 19's target (issue 5's was 2 s): from `group scale
// cattle 10 → 1000` to lb3 and the NFS authorizations showing all 1,000
// members. It is judged on the whole span, from invoking the command
// (whose plan creates the instances and registers and authorizes each one
// once it runs, all before it returns) until both listings, asked of the
// providers, show 1,000.
const targetFollow = 1 * time.Second

// walkthroughStack is DESIGN.md's e2e stack.
func walkthroughStack(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "e2e", "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countListed runs an infrakit listing with -json and counts the entries
// of its array field.
func countListed(t *testing.T, bin, dir, field string, args ...string) int {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "infrakit"), args...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("infrakit %v: %v\n%s", args, err, tail(out.String(), 2000))
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("infrakit %v: %v\n%s", args, err, tail(out.String(), 2000))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v[field], &list); err != nil {
		t.Fatalf("infrakit %v: field %q: %v", args, field, err)
	}
	return len(list)
}

// TestBenchWalkthroughFollow times `group scale cattle 1000` on the e2e
// stack, then how long after its return `lb backends ls lb3` and
// `enrollment describe nfs` both show 1,000, and judges the sum against
// targetFollow (PASS or MISS; it never fails on timing). It does so
// INFRAKIT_BENCH_RUNS times (default 3), each on a freshly applied stack.
func TestBenchWalkthroughFollow(t *testing.T) {
	enabled(t)
	bin := buildBinaries(t)
	var totals []float64
	for range runs(t) {
		totals = append(totals, scaleFollow(t, bin).Seconds())
	}
	record(t, "scale_10_1000", totals, "from invoking group scale to lb3 and nfs listing 1,000")
}

// scaleFollow applies the e2e stack in a fresh directory and returns the
// time from invoking `group scale cattle 1000` to lb3 and nfs listing
// 1,000.
func scaleFollow(t *testing.T, bin string) time.Duration {
	t.Helper()
	const n = 1000
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stack.hcl"), []byte(walkthroughStack(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	timeInfrakit(t, bin, dir, 0, "init", "-plugin-dir", bin)
	timeInfrakit(t, bin, dir, 0, "apply", "-auto-approve")

	scale := timeInfrakit(t, bin, dir, 0, "group", "scale", "cattle", "1000")
	returned := time.Now()
	// Each check runs two infrakit listings; the time taken is when the
	// check that saw 1,000 began (about 0 when the first did: the
	// registrations were done when group scale returned), so the listings' own cost is
	// not counted.
	var backends, auths int
	var follow time.Duration
	for {
		follow = time.Since(returned)
		backends = countListed(t, bin, dir, "backends", "lb", "backends", "ls", "lb3", "-json")
		auths = countListed(t, bin, dir, "authorizations", "enrollment", "describe", "nfs", "-json")
		if backends == n && auths == n {
			break
		}
		if time.Since(returned) > time.Minute {
			t.Fatalf("a minute after group scale returned lb3 has %d backends and nfs %d authorizations, want %d", backends, auths, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	total := scale.wall + follow
	t.Logf("group scale cattle 10 → %d returned after %s; lb3 and nfs listed %d %s later: %s in all (target ≤ %s): %s",
		n, seconds(scale.wall), n, seconds(follow), seconds(total), seconds(targetFollow), verdict(total <= targetFollow))
	return total
}
