package operation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// autoscaledStack is a group "web" of the simulator, autoscaled on a
// simulator metric between min and max, starting at size.
func autoscaledStack(size, lo, hi int) string {
	return fmt.Sprintf(`
stack "test" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = %d
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo web"] }
  }
  autoscale {
    min = %d
    max = %d
    check "load" {
      source              = simulator
      query               = "load"
      target_per_instance = 10
    }
  }
}
`, size, lo, hi)
}

// apply keeps the size the autoscaler (or an override) set while the
// stack's start size and bounds stay as applied, and says so in the plan;
// a changed bound or start size takes the stack's size again. group scale
// is refused without -override, and never leaves the bounds.
func TestAutoscaledSizeOwnership(t *testing.T) {
	w := newWorkdir(t, autoscaledStack(2, 2, 6))
	r := w.runner(Options{})
	ctx := ctxT(t)
	groups := r.Groups()
	planAndApply(t, ctx, r, PlanMode{})

	_, err := groups.SetSize(ctx, "web", 4, controller.ScaleOptions{})
	if err == nil || !strings.Contains(err.Error(), `group "web" is autoscaled (min 2, max 6)`) || !strings.Contains(err.Error(), "-override") {
		t.Fatalf("group scale without -override: %v, want a refusal naming -override", err)
	}
	for _, n := range []int{1, 7} {
		if _, err := groups.SetSize(ctx, "web", n, controller.ScaleOptions{Override: true}); err == nil || !strings.Contains(err.Error(), "outside its autoscale bounds") {
			t.Errorf("group scale -override %d: %v, want a refusal (bounds 2..6)", n, err)
		}
	}
	res := must(t, "SetSize 4 -override")(groups.SetSize(ctx, "web", 4, controller.ScaleOptions{Override: true}))
	if res.Done.Add != 2 || len(w.simulated()) != 4 {
		t.Fatalf("override to 4: %+v, %d instances", res.Done, len(w.simulated()))
	}

	// The same files: the set size stands, and the plan says whose it is.
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() || len(p.Autoscale) != 1 || !p.Autoscale[0].Kept || p.Autoscale[0].Size != 4 {
		t.Fatalf("plan of the same files: changes %v, autoscale %+v; want no change and size 4 kept\n%s", p.HasChanges(), p.Autoscale, humanPlan(t, p))
	}
	if out := humanPlan(t, p); !strings.Contains(out, `Note: the autoscaler owns the size of group "web": 4 (min 2, max 6); apply keeps it.`) {
		t.Errorf("the plan does not say the autoscaler owns the size:\n%s", out)
	}

	// destroy-instances lowers the size, but not below min.
	ids := w.simulated()
	must(t, "DestroyInstances")(groups.DestroyInstances(ctx, "web", []instance.ID{instance.ID(ids[0]), instance.ID(ids[1]), instance.ID(ids[2])}))
	if n, err := groups.Size(ctx, "web"); err != nil || n != 2 {
		t.Errorf("size after destroying 3 of 4: %d, %v; want min 2", n, err)
	}
	must(t, "SetSize 5 -override")(groups.SetSize(ctx, "web", 5, controller.ScaleOptions{Override: true}))

	// A new max: the stack's size again.
	w.writeStack(autoscaledStack(2, 2, 8))
	p, res = planAndApply(t, ctx, r, PlanMode{})
	if len(p.Autoscale) != 1 || p.Autoscale[0].Kept || p.Summary != (plan.Counts{Destroy: 3}) || res.Done.Destroy != 3 {
		t.Fatalf("apply with a new max: autoscale %+v, plan %+v; want the start size 2 (3 destroyed)", p.Autoscale, p.Summary)
	}
	if n := len(w.simulated()); n != 2 {
		t.Fatalf("%d instances after the new max, want 2", n)
	}
	checkNoChanges(t, r)
}
