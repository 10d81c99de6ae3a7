package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/sdk/instance"
)

// For random desired stacks, states and worlds, full plans and plans
// scoped to one group are sound graphs that keep make before break.
func TestPropertyPlansKeepTheOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := drawCase(t)
		before, _ := json.Marshal(d.doc)
		p, err := Compute(d.desired, d.doc, d.world, Scope{})
		if err != nil {
			t.Fatalf("Compute: %v", err)
		}
		if unknown := p.Unknown(); len(unknown) > 0 {
			t.Fatalf("a world observed as NeedsOf asks leaves objects unknown: %v", unknown)
		}
		checkPlan(t, p, d)
		scoped := rapid.SampledFrom(d.desired.Groups).Draw(t, "scope").Name
		sp, err := Compute(d.desired, d.doc, d.world, Scope{Groups: []string{scoped}})
		if err != nil {
			t.Fatalf("Compute scoped to %s: %v", scoped, err)
		}
		checkPlan(t, sp, d)
		for _, s := range sp.Steps {
			if s.Group != "" && s.Group != scoped && s.Kind != StepRevoke {
				t.Fatalf("a plan scoped to %s has step %q of group %s", scoped, s, s.Group)
			}
		}
		if after, _ := json.Marshal(d.doc); !bytes.Equal(before, after) {
			t.Fatal("Compute changed the state document")
		}
		var b bytes.Buffer
		if err := p.Save(&b); err != nil {
			t.Fatal(err)
		}
		back, err := Load(&b)
		if err != nil {
			t.Fatalf("Load of a saved plan: %v", err)
		}
		if !slices.EqualFunc(back.Steps, p.Steps, func(a, b Step) bool { return a.String() == b.String() }) || back.Summary != p.Summary {
			t.Fatal("a plan does not survive Save and Load")
		}
	})
}

// checkPlan checks what every plan must be: a graph Check accepts, counted
// by its Summary, its intent first, and make before break kept.
func checkPlan(t *rapid.T, p *Plan, d drawn) {
	if err := Check(p.Steps); err != nil {
		t.Fatalf("Check: %v\n%s", err, dump(p.Steps))
	}
	if got := CountSteps(p.Steps); got != p.Summary {
		t.Fatalf("Summary = %+v, CountSteps = %+v", p.Summary, got)
	}
	if len(p.Steps) > 0 && p.Steps[0].Object == "state" {
		for _, s := range p.Steps[1:] {
			if !reaches(p.Steps, s.ID, 1) {
				t.Fatalf("step %q does not wait for the intent\n%s", s, dump(p.Steps))
			}
		}
	}
	for _, s := range p.Steps {
		switch s.Kind {
		case StepAwait, StepRegister, StepAuthorize:
			if s.Made == 0 {
				continue
			}
			if !reaches(p.Steps, s.ID, s.Made) {
				t.Fatalf("step %q does not wait for its provision\n%s", s, dump(p.Steps))
			}
			if s.Kind != StepAwait && len(find(p.Steps, madeBy(StepAwait, s.Made))) == 0 {
				t.Fatalf("step %q acts on a member that is never awaited\n%s", s, dump(p.Steps))
			}
		case StepDestroy:
			checkLeaving(t, p, d, s)
		case StepProvision:
			if s.Replaces != "" {
				checkReplacement(t, p, d, s)
			}
		}
	}
}

// checkLeaving checks a destroyed member: destroyed once, after its drain,
// which waits for every deregistration and revocation of it (but for a pet
// being replaced, which keeps its authorization until the new one has it)
// and has its group's drain delay.
func checkLeaving(t *rapid.T, p *Plan, d drawn, destroy Step) {
	id := destroy.Instance
	if n := len(find(p.Steps, kind(StepDestroy, id))); n != 1 {
		t.Fatalf("%s is destroyed %d times\n%s", id, n, dump(p.Steps))
	}
	drains := find(p.Steps, kind(StepDrain, id))
	if len(drains) != 1 || !reaches(p.Steps, destroy.ID, drains[0].ID) {
		t.Fatalf("%s is not destroyed after one drain\n%s", id, dump(p.Steps))
	}
	drain := drains[0]
	if g := groupConfig(d, destroy.Group); g != nil && drain.DrainDelay != g.DrainDelay {
		t.Fatalf("drain of %s: delay %v, group's %v", id, drain.DrainDelay, g.DrainDelay)
	}
	petReplaced := len(find(p.Steps, func(s Step) bool {
		return s.Kind == StepProvision && s.Replaces == id && s.LogicalID != ""
	})) > 0
	for _, s := range p.Steps {
		switch {
		case s.Instance != id:
		case s.Kind == StepDeregister, s.Kind == StepRevoke && !petReplaced:
			if !reaches(p.Steps, drain.ID, s.ID) {
				t.Fatalf("%s is drained before %q\n%s", id, s, dump(p.Steps))
			}
		}
	}
}

// checkReplacement checks a member replaced by provision prov: a pet's new
// instance comes after the old one is destroyed; cattle's old member is
// deregistered from each load balancer only after the new one is
// registered there (where the new one is routed), and drained after the
// new one is healthy. Either way the old member's authorizations are
// revoked after the new one's.
func checkReplacement(t *rapid.T, p *Plan, d drawn, prov Step) {
	old := prov.Replaces
	authorize := find(p.Steps, madeBy(StepAuthorize, prov.ID))
	for _, s := range find(p.Steps, kind(StepRevoke, old)) {
		for _, a := range authorize {
			if !reaches(p.Steps, s.ID, a.ID) {
				t.Fatalf("%q before the new member's %q\n%s", s, a, dump(p.Steps))
			}
		}
	}
	if prov.LogicalID != "" {
		if !reaches(p.Steps, prov.ID, one(t, p.Steps, "destroying "+string(old), kind(StepDestroy, old)).ID) {
			t.Fatalf("pet %s is provisioned before %s is destroyed\n%s", prov.LogicalID, old, dump(p.Steps))
		}
		return
	}
	drain := one(t, p.Steps, "draining "+string(old), kind(StepDrain, old))
	await := one(t, p.Steps, "awaiting the new member", madeBy(StepAwait, prov.ID))
	if !await.Healthy || !reaches(p.Steps, drain.ID, await.ID) {
		t.Fatalf("%s is drained before its replacement is healthy\n%s", old, dump(p.Steps))
	}
	routed := routedLBs(d.desired, prov.Group)
	for _, dereg := range find(p.Steps, kind(StepDeregister, old)) {
		reg := find(p.Steps, func(s Step) bool {
			return s.Kind == StepRegister && s.Made == prov.ID && s.LoadBalancer == dereg.LoadBalancer
		})
		switch {
		case len(reg) == 1:
			if !reaches(p.Steps, dereg.ID, reg[0].ID) {
				t.Fatalf("%q before the new member's %q\n%s", dereg, reg[0], dump(p.Steps))
			}
		case routed[dereg.LoadBalancer] && !isFreed(d.doc.Ingresses, "test.com"):
			t.Fatalf("%q, and the new member is not registered there\n%s", dereg, dump(p.Steps))
		}
	}
}

// routedLBs are the load balancers the desired ingress routes group g to.
func routedLBs(st *config.Stack, g string) map[string]bool {
	out := map[string]bool{}
	for _, in := range st.Ingresses {
		for _, lb := range ingress.DesiredLBs(in) {
			if slices.Contains(lb.Groups, g) {
				out[lb.LoadBalancer] = true
			}
		}
	}
	return out
}

func groupConfig(d drawn, name string) *config.Group {
	if g := d.desired.Group(name); g != nil {
		return g
	}
	if d.doc.Stack != nil {
		return d.doc.Stack.Group(name)
	}
	return nil
}

// A world that already matches the stack (every member current, running
// and healthy, every load balancer and target as the members are, the
// state recorded) is planned without a provider call, whatever the scope.
func TestPropertyConvergedWorldIsNoOp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		desired, _ := drawStacks(t)
		members := map[string][]group.Member{}
		for _, g := range desired.Groups {
			if g.Size != nil {
				members[g.Name] = running(g.Name, *g.Size, g.ConfigHash())
			} else {
				members[g.Name] = pets(g.Name, g.ConfigHash(), g.LogicalIDs...)
			}
		}
		doc, world := storedAs(desired, members), converged(t, desired, members)
		for _, scope := range []Scope{{}, {Groups: []string{desired.Groups[0].Name}},
			{Ingresses: []string{"test.com"}, Enrollments: []string{"nfs"}, Sync: true}} {
			p, err := Compute(desired, doc, world, scope)
			if err != nil {
				t.Fatalf("Compute(%+v): %v", scope, err)
			}
			for _, s := range p.Steps {
				if s.Calls() {
					t.Fatalf("scope %+v: step %q in a converged world\n%s", scope, s, dump(p.Steps))
				}
			}
			if p.HasChanges() {
				t.Fatalf("scope %+v: a converged world has changes\n%s", scope, dump(p.Steps))
			}
		}
	})
}

// The scoped plan of one group's members is the full plan's, step for step,
// when nothing else differs: the scope chooses what is planned, not how.
func TestPropertyScopedGroupMatchesFullPlan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := drawGroup(t, "web")
		g.Health.ReplaceUnhealthy = false
		members := map[string][]group.Member{"web": drawMembers(t, g)}
		st := stackOf(g)
		doc := storedAs(st, members)
		full, err := Compute(st, doc, World{Members: members}, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		scoped, err := Compute(st, doc, World{Members: members}, Scope{Groups: []string{"web"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(full.Steps, scoped.Steps, func(a, b Step) bool { return a.String() == b.String() }) {
			t.Fatalf("full plan\n%s\nscoped plan\n%s", dump(full.Steps), dump(scoped.Steps))
		}
	})
}

// For work a watch pass or a verb decides (Scope.Work: destroys, heals,
// replacements whose new member runs already, members gone), the plan of
// that group is as sound, and a finished replacement's old member leaves
// its load balancers and target only after its new member is on them.
func TestPropertyGroupWorkKeepsTheOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := drawCase(t)
		g := rapid.SampledFrom(d.desired.Groups).Draw(t, "work.group")
		w := drawWork(t, g, d)
		p, err := Compute(d.desired, d.doc, d.world, Scope{Groups: []string{g.Name}, Work: map[string]GroupWork{g.Name: w}})
		if err != nil {
			t.Fatalf("Compute: %v", err)
		}
		checkPlan(t, p, d)
		for _, r := range w.Finish {
			for _, dereg := range find(p.Steps, kind(StepDeregister, r.Old)) {
				for _, reg := range find(p.Steps, func(s Step) bool {
					return s.Kind == StepRegister && s.Instance == r.New && s.LoadBalancer == dereg.LoadBalancer
				}) {
					if !reaches(p.Steps, dereg.ID, reg.ID) {
						t.Fatalf("%q before %q\n%s", dereg, reg, dump(p.Steps))
					}
				}
			}
			for _, revoke := range find(p.Steps, kind(StepRevoke, r.Old)) {
				for _, auth := range find(p.Steps, kind(StepAuthorize, r.New)) {
					if !reaches(p.Steps, revoke.ID, auth.ID) {
						t.Fatalf("%q before %q\n%s", revoke, auth, dump(p.Steps))
					}
				}
			}
		}
	})
}

// drawWork draws work for group g of d: some live members destroyed,
// replaced (pets by logical ID) or, for cattle, replaced by another live
// member already there; creates; the vanished members gone.
func drawWork(t *rapid.T, g *config.Group, d drawn) GroupWork {
	var w GroupWork
	live := group.Live(d.world.Members[g.Name])
	order := rapid.Permutation(live).Draw(t, "work.order")
	for i := 0; i < len(order); i++ {
		m := order[i]
		switch rapid.IntRange(0, 4).Draw(t, "work."+string(m.ID)) {
		case 1:
			w.Destroy = append(w.Destroy, group.Destroy{ID: m.ID, Reason: instance.ReasonTerminate})
		case 2:
			if g.Size != nil && i+1 < len(order) {
				w.Finish = append(w.Finish, Replacement{Old: m.ID, New: order[i+1].ID, Reason: instance.ReasonUnhealthy})
				i++
			}
		case 3:
			if g.Size != nil || m.LogicalID != "" {
				w.Replace = append(w.Replace, Replacement{Old: m.ID, LogicalID: m.LogicalID, Reason: instance.ReasonUnhealthy})
			}
		}
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "work.creates") {
		c := group.Create{}
		if g.Size == nil {
			c.LogicalID = fmt.Sprintf("l%d", 5+i) // a logical ID no member has
		}
		w.Create = append(w.Create, c)
	}
	w.Gone = d.vanished[g.Name]
	return w
}
