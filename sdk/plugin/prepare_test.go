package plugin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// items are n specs to prepare, sequences 0..n-1; those listed in fail
// are tagged to fail.
func items(n int, fail ...int) []flavor.PrepareItem {
	out := make([]flavor.PrepareItem, n)
	for i := range out {
		t := map[string]string{}
		if slices.Contains(fail, i) {
			t["prepare"] = "fail"
		}
		out[i] = flavor.PrepareItem{Spec: instance.Spec{Tags: t}, Index: flavor.Index{Group: "g", Sequence: uint64(i)}}
	}
	return out
}

// checkPrepared checks that items were prepared in order, each with its
// own result, the failing ones failing alone.
func checkPrepared(t *testing.T, specs []instance.Spec, errs []error, calls []string, n int, fail ...int) {
	t.Helper()
	if len(specs) != n || (errs != nil && len(errs) != n) {
		t.Fatalf("%d specs, %d errors for %d items", len(specs), len(errs), n)
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("prepare %d", i)
		failed := errs != nil && errs[i] != nil
		switch {
		case slices.Contains(fail, i) != failed:
			t.Errorf("item %d: error %v", i, errs)
		case failed && !strings.Contains(errs[i].Error(), fmt.Sprintf(`provider "test": Prepare: no spec for %d`, i)):
			t.Errorf("item %d: error %q", i, errs[i])
		case !failed && specs[i].Tags["sequence"] != strconv.Itoa(i):
			t.Errorf("item %d: prepared as %v", i, specs[i])
		}
	}
	if !slices.Equal(calls, want) {
		t.Errorf("the flavor was asked %v, want %v (in order)", calls, want)
	}
}

// A batch is prepared in one PrepareBatch, item after item in order in
// the provider; an item that fails fails alone.
func TestPrepareAll(t *testing.T) {
	c, logs, calls := startFlavors(t, "current")
	specs, errs := c.Flavor("plain").(flavor.BatchPreparer).PrepareAll(ctxT(t), nil, flavor.Allocation{Size: 5}, items(5, 1, 3))
	checkPrepared(t, specs, errs, calls(), 5, 1, 3)
	specs, errs = c.Flavor("plain").(flavor.BatchPreparer).PrepareAll(ctxT(t), nil, flavor.Allocation{Size: 3}, items(3))
	if errs != nil {
		t.Fatalf("errors %v", errs)
	}
	checkPrepared(t, specs, errs, calls(), 3)
	if unsupported(c, "PrepareBatch") || strings.Contains(logs.String(), "does not serve PrepareBatch") {
		t.Fatal("a current provider was taken for one without PrepareBatch")
	}
}

// A provider built before PrepareBatch answers UNIMPLEMENTED: the host
// asks Prepare per item, in order, and remembers not to try the batch
// again.
func TestPrepareAllOldProvider(t *testing.T) {
	c, logs, calls := startFlavors(t, "old")
	for range 2 {
		specs, errs := c.Flavor("plain").(flavor.BatchPreparer).PrepareAll(ctxT(t), nil, flavor.Allocation{Size: 4}, items(4, 2))
		checkPrepared(t, specs, errs, calls(), 4, 2)
	}
	if n := strings.Count(logs.String(), "does not serve PrepareBatch"); n != 1 {
		t.Fatalf("the fallback was found %d times, want once (then remembered):\n%s", n, logs.String())
	}
}
