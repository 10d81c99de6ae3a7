package execute

import (
	"testing"

	"github.com/infrakit/infrakit/internal/plan"
)

// Provisions of a group that are ready together go in jobs of a share of
// them per call slot. Where every flavor prepares ahead (vanilla's
// metadata says so) each job's members are prepared in one call, then
// provisioned one by one; otherwise each member is prepared right before
// it is provisioned. Either way no more provisions are in flight than
// the parallelism allows, and every member is made and recorded.
func TestProvisionsReadyTogetherArePreparedTogether(t *testing.T) {
	for _, ahead := range []bool{true, false} {
		t.Run(map[bool]string{true: "ahead", false: "one-by-one"}[ahead], func(t *testing.T) {
			const n, parallelism = 12, 2
			f := newFixture(t, stackOf(n, "v1", "", ""), nil)
			f.probe.mu.Lock()
			f.probe.noAhead = !ahead
			f.probe.mu.Unlock()
			p := f.plan(plan.Scope{})
			res := f.run(ctxT(t), p, Options{Parallelism: parallelism})
			if res.Err != nil || len(res.Failed) > 0 || res.Done != p.Summary {
				t.Fatalf("run: %v %v, done %+v of %+v", res.Err, res.Errors(), res.Done, p.Summary)
			}
			var prepares []int
			for _, e := range f.probe.entries() {
				if e.what == "prepare" {
					prepares = append(prepares, e.n)
				}
			}
			want := []int{n / parallelism, n / parallelism}
			if !ahead {
				want = make([]int, n)
				for i := range want {
					want[i] = 1
				}
			}
			if !sameCounts(prepares, want) {
				t.Errorf("prepared %v members at a time, want %v", prepares, want)
			}
			if got := len(calls(f.probe.entries(), "provision")); got != n {
				t.Errorf("%d provisions began, want %d", got, n)
			}
			f.probe.mu.Lock()
			peak := f.probe.peakAll
			f.probe.mu.Unlock()
			if peak > parallelism {
				t.Errorf("%d calls in flight at once, parallelism %d", peak, parallelism)
			}
			if len(f.live("simulator")) != n || len(f.doc.Groups["web"].Instances) != n {
				t.Errorf("live %d, recorded %d, want %d", len(f.live("simulator")), len(f.doc.Groups["web"].Instances), n)
			}
		})
	}
}

// sameCounts reports whether a and b hold the same numbers, in any order.
func sameCounts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[int]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, c := range seen {
		if c != 0 {
			return false
		}
	}
	return true
}
