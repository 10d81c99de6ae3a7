package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
)

// propApplyJSON is the -json result of apply and destroy.
type propApplyJSON struct {
	Summary plan.Counts `json:"summary"`
	Planned plan.Counts `json:"planned"`
	Failed  []struct {
		Object   string `json:"object"`
		Step     int    `json:"step"`
		Kind     string `json:"kind"`
		Instance string `json:"instance"`
		Error    string `json:"error"`
	} `json:"failed"`
	Skipped int    `json:"skipped"`
	NotRun  int    `json:"not_run"`
	Error   string `json:"error"`
}

// TestPropertyPlanIsApplied is issue 13's property over the real binaries
// and the simulator: for random sequences of 3–6 stack edits (groups of
// cattle and pets added, resized, switched and removed; member
// configuration changes that roll; group tags and update policies that do
// not; ingresses over 1–3 load balancers with their rules and routes
// redrawn or edited; an enrollment added, removed, moved to another group,
// re-propertied or retargeted; unused load balancer blocks), each edit's
// `plan -json` summary is what `apply -json` reports done, field by field,
// and what the simulator holds afterwards is what the stack says and what
// the plan's counts and instance lists promised. Every sequence ends with
// `destroy`, which leaves nothing.
//
// It runs 8 checks unless -rapid.checks (or RAPID_CHECKS) says otherwise;
// a failure prints the seed (-rapid.seed) and the minimal edit sequence.
func TestPropertyPlanIsApplied(t *testing.T) {
	t.Parallel()
	propChecks(t, 8)
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorkdir(t)
		rt.Cleanup(func() { os.RemoveAll(w.dir) })
		c := propCLI{t: rt, w: w}
		h := &propHashes{byConfig: map[string]string{}, byHash: map[string]string{}}

		stack := &propStack{}
		edits := rapid.IntRange(3, 6).Draw(rt, "sequence")
		for i := range edits {
			next, names := propDrawEdit(rt, stack)
			stack = next
			rt.Logf("edit %d (%s): %s", i+1, strings.Join(names, ", "), stack.describe())
			w.writeFile("main.hcl", stack.hcl())
			if i == 0 {
				c.expect(0, "init", "-plugin-dir", binDir)
			}
			c.applyEdit(stack, h)
		}
		c.checkViews(stack, c.world())
		c.destroyAll()
	})
}

// applyEdit plans and applies the stack on disk (s) and checks the promise.
func (c propCLI) applyEdit(s *propStack, h *propHashes) {
	c.t.Helper()
	hashes := h.load(c.t, c.w.dir, s)

	var p plan.JSONPlan
	c.jsonOf(&p, "plan", "-json")
	before := c.world()
	var a propApplyJSON
	res := c.jsonOf(&a, "apply", "-auto-approve", "-json")
	after := c.world()
	c.t.Logf("  planned %+v", p.Summary)

	// The counts: planned is the plan shown, and all of it was done.
	if a.Planned != p.Summary {
		c.t.Fatalf("apply planned %+v\nbut plan -json showed %+v\n%s", a.Planned, p.Summary, res)
	}
	if a.Summary != a.Planned {
		c.t.Fatalf("apply did %+v\nbut planned %+v\n%s", a.Summary, a.Planned, res)
	}
	if len(a.Failed) > 0 || a.Skipped != 0 || a.NotRun != 0 || a.Error != "" {
		c.t.Fatalf("apply failed steps %+v, skipped %d, not run %d, error %q", a.Failed, a.Skipped, a.NotRun, a.Error)
	}

	propCheckPlanKept(c.t, p, before, after)
	propCheckStack(c.t, s, hashes, after)
	c.expect(0, "plan", "-detailed-exitcode")
}

// destroyAll destroys the stack and checks that nothing is left.
func (c propCLI) destroyAll() {
	c.t.Helper()
	before := c.world()
	var a propApplyJSON
	res := c.jsonOf(&a, "destroy", "-auto-approve", "-json")
	after := c.world()
	if a.Summary != a.Planned {
		c.t.Fatalf("destroy did %+v\nbut planned %+v\n%s", a.Summary, a.Planned, res)
	}
	if len(a.Failed) > 0 || a.Skipped != 0 || a.NotRun != 0 || a.Error != "" {
		c.t.Fatalf("destroy failed steps %+v, skipped %d, not run %d, error %q", a.Failed, a.Skipped, a.NotRun, a.Error)
	}
	propCheckCounts(c.t, a.Summary, before, after)
	propCheckStack(c.t, &propStack{}, nil, after)
}

// propHashes holds the config hash each member configuration got in the
// sequence: one configuration has one hash, two have two.
type propHashes struct {
	byConfig map[string]string // configuration -> hash
	byHash   map[string]string // hash -> configuration
}

// load returns the config hash of each group of s, as the stack loader
// computes it from the files on disk, and checks it against the
// configurations seen before.
func (h *propHashes) load(t *rapid.T, dir string, s *propStack) map[string]string {
	t.Helper()
	st, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("the generated stack does not load: %v", diags)
	}
	out := map[string]string{}
	for _, g := range s.Groups {
		cg := st.Group(g.Name)
		if cg == nil {
			t.Fatalf("the loaded stack has no group %s", g.Name)
		}
		hash := cg.ConfigHash()
		// The hash covers the instance and flavor blocks only, not the
		// group's name: groups configured alike hash alike.
		key := fmt.Sprintf("note %s, tier %s, simulator flavor %v", g.Note, g.Tier, g.SimFlavor)
		if seen, ok := h.byConfig[key]; ok && seen != hash {
			t.Fatalf("group %s: configuration %s hashed %s before and %s now", g.Name, key, seen, hash)
		}
		if seen, ok := h.byHash[hash]; ok && seen != key {
			t.Fatalf("configurations %s and %s have one hash %s", seen, key, hash)
		}
		h.byConfig[key], h.byHash[hash] = hash, key
		out[g.Name] = hash
	}
	return out
}

// propStackInstances returns the stack's instances of w by ID.
func propStackInstances(w propWorld) map[string]propInstanceFile {
	out := map[string]propInstanceFile{}
	for id, m := range w.instances {
		if m.Tags["infrakit.stack"] == propStackName {
			out[id] = m
		}
	}
	return out
}

// propCheckPlanKept checks that the world moved from before to after as plan
// p said: the instances it named to destroy, replace or roll are exactly
// the ones gone, each group has the members it said it would have, and
// every count is the number of objects made or removed.
func propCheckPlanKept(t *rapid.T, p plan.JSONPlan, before, after propWorld) {
	t.Helper()
	gone := propMissing(propStackInstances(before), propStackInstances(after))
	var named []string
	create := 0
	for _, g := range p.Groups {
		for _, ids := range [][]string{propIDs(g.Destroy), propIDs(g.Replace), propIDs(g.Roll)} {
			named = append(named, ids...)
		}
		create += g.Create
		if n := len(after.members(g.Group)); n != g.After {
			t.Fatalf("plan said group %s would have %d members after apply; it has %d", g.Group, g.After, n)
		}
	}
	slices.Sort(named)
	if !slices.Equal(named, gone) {
		t.Fatalf("plan named %v to destroy, replace or roll; apply removed %v", named, gone)
	}
	if create != p.Summary.Add {
		t.Fatalf("plan groups create %d members, its summary adds %d", create, p.Summary.Add)
	}
	propCheckCounts(t, p.Summary, before, after)
}

func propIDs[S ~string](ids []S) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, string(id))
	}
	return out
}

// propCheckCounts checks each count of c against the objects made and
// removed between before and after.
func propCheckCounts(t *rapid.T, c plan.Counts, before, after propWorld) {
	t.Helper()
	bi, ai := propStackInstances(before), propStackInstances(after)
	gone, made := propMissing(bi, ai), propMissing(ai, bi)
	if len(gone) != c.Destroy+c.Roll+c.Replace || len(made) != c.Add+c.Roll+c.Replace {
		t.Fatalf("counts %+v, but %d instances went (%v) and %d came (%v)", c, len(gone), gone, len(made), made)
	}
	var register, deregister, publish, republish, unpublish int
	for _, lb := range propLBNames {
		bb, ab := before.backendIDs(lb), after.backendIDs(lb)
		register += len(propMissing(ab, bb))
		deregister += len(propMissing(bb, ab))
		for id, addr := range ab {
			if old, ok := bb[id]; ok && old != addr {
				register++
				deregister++
			}
		}
		br, ar := before.routes(lb), after.routes(lb)
		for port, r := range ar {
			old, ok := br[port]
			switch {
			case !ok:
				publish++
			case old != r:
				republish++
			}
		}
		for port := range br {
			if _, ok := ar[port]; !ok {
				unpublish++
			}
		}
	}
	authorize, revoke := len(propMissing(after.auths, before.auths)), len(propMissing(before.auths, after.auths))
	got := plan.Counts{Add: c.Add, Roll: c.Roll, Replace: c.Replace, Destroy: c.Destroy,
		Publish: publish, Republish: republish, Unpublish: unpublish,
		Register: register, Deregister: deregister, Authorize: authorize, Revoke: revoke}
	if got != c {
		t.Fatalf("counts %+v\nbut the simulator shows %+v", c, got)
	}
}

// propCheckStack checks that the world is exactly what stack s declares: each
// group's members (current configuration, one per pet), each load
// balancer's routes and backends, the enrollment's authorizations, and
// nothing else of the stack.
func propCheckStack(t *rapid.T, s *propStack, hashes map[string]string, w propWorld) {
	t.Helper()
	members := map[string][]propInstanceFile{}
	total := 0
	for _, g := range s.Groups {
		ms := w.members(g.Name)
		members[g.Name] = ms
		total += len(ms)
		if g.Pets == nil {
			if len(ms) != g.Size {
				t.Fatalf("group %s has %d members, want size %d", g.Name, len(ms), g.Size)
			}
		} else {
			var ids []string
			for _, m := range ms {
				ids = append(ids, m.Tags["infrakit.logical_id"])
			}
			slices.Sort(ids)
			want := slices.Sorted(slices.Values(g.Pets))
			if !slices.Equal(ids, want) {
				t.Fatalf("group %s has members for logical IDs %v, want one each for %v", g.Name, ids, want)
			}
		}
		for _, m := range ms {
			lid := ""
			if m.LogicalID != nil {
				lid = *m.LogicalID
			}
			switch {
			case m.Tags["infrakit.config.hash"] != hashes[g.Name]:
				t.Fatalf("group %s member %s has config hash %q, want %q", g.Name, m.ID, m.Tags["infrakit.config.hash"], hashes[g.Name])
			case m.Tags["tier"] != g.Tier || fmt.Sprint(m.Properties["note"]) != g.Note || len(m.Properties) != 1:
				t.Fatalf("group %s member %s: tier %q, properties %v; want tier %q, note %q", g.Name, m.ID, m.Tags["tier"], m.Properties, g.Tier, g.Note)
			// A group turned from pets to cattle keeps its pets as cattle,
			// logical IDs and all: only pets are checked for theirs.
			case g.Pets != nil && lid != m.Tags["infrakit.logical_id"]:
				t.Fatalf("pet %s of %s has logical ID %q but tag %q", m.ID, g.Name, lid, m.Tags["infrakit.logical_id"])
			case m.State != "" && m.State != "running":
				t.Fatalf("group %s member %s is %s", g.Name, m.ID, m.State)
			}
		}
	}
	if len(w.instances) != total {
		var extra []string
		for id, m := range w.instances {
			if !slices.ContainsFunc(members[m.Tags["infrakit.group"]], func(x propInstanceFile) bool { return x.ID == id }) {
				extra = append(extra, fmt.Sprintf("%s (group %q)", id, m.Tags["infrakit.group"]))
			}
		}
		slices.Sort(extra)
		t.Fatalf("the simulator holds instances no group of the stack has: %v", extra)
	}

	// Load balancers: the owner's rules, exactly; others hold nothing.
	for _, lb := range propLBNames {
		wantRoutes := map[int]propRouteFile{}
		wantBackends := map[string]string{}
		owner := ""
		for _, in := range s.Ingresses {
			for _, r := range in.Rules {
				if r.LB != lb {
					continue
				}
				owner = in.Name
				for _, rt := range r.Routes {
					wantRoutes[rt.LBPort] = rt.effective()
				}
				for _, g := range r.Groups {
					for _, m := range members[g] {
						wantBackends[m.ID] = m.Address
					}
				}
			}
		}
		if got := w.routes(lb); !maps.Equal(got, wantRoutes) {
			t.Fatalf("%s (ingress %q) publishes %v, want %v", lb, owner, got, wantRoutes)
		}
		if got := w.backendIDs(lb); !maps.Equal(got, wantBackends) {
			t.Fatalf("%s (ingress %q) has backends %v, want %v", lb, owner, got, wantBackends)
		}
		if owner != "" && w.lbs[lb].HealthCheck == nil {
			t.Fatalf("%s (ingress %q) has no health check", lb, owner)
		}
	}

	// Authorizations: one per member of the source, rendered for it.
	e := s.Enrollment
	if e == nil {
		if len(w.auths) != 0 {
			t.Fatalf("no enrollment, but the simulator holds authorizations %v", slices.Sorted(maps.Keys(w.auths)))
		}
		return
	}
	bySource := map[string]propAuthFile{}
	for id, a := range w.auths {
		if a.Tags["infrakit.enrollment.name"] != "nfs" {
			t.Fatalf("authorization %s is not the enrollment's: %+v", id, a)
		}
		if dup, ok := bySource[a.SourceID]; ok {
			t.Fatalf("member %s has two authorizations, %s and %s", a.SourceID, dup.ID, id)
		}
		bySource[a.SourceID] = a
	}
	want := map[string]propInstanceFile{}
	for _, m := range members[e.Source] {
		want[m.ID] = m
	}
	if missing, extra := propMissing(want, bySource), propMissing(bySource, want); len(missing)+len(extra) > 0 {
		t.Fatalf("enrollment of %s: members %v have no authorization; authorizations for %v are not members", e.Source, missing, extra)
	}
	for id, a := range bySource {
		if fmt.Sprint(a.Properties["host"]) != id || fmt.Sprint(a.Properties["iops"]) != fmt.Sprint(e.IOPS) || len(a.Properties) != 2 {
			t.Fatalf("authorization %s of %s has properties %v, want host %s, iops %d", a.ID, id, a.Properties, id, e.IOPS)
		}
		if lid := want[id].Tags["infrakit.logical_id"]; a.Tags["infrakit.logical_id"] != lid {
			t.Fatalf("authorization %s of pet %s is tagged logical ID %q, want %q", a.ID, id, a.Tags["infrakit.logical_id"], lid)
		}
	}
}

// checkViews checks that the CLI's views of the objects (`group ls`, `lb
// routes ls`, `lb backends ls`, `enrollment describe`, each -json) show
// what the simulator holds.
func (c propCLI) checkViews(s *propStack, w propWorld) {
	c.t.Helper()
	var groups []groupJSON
	c.jsonOf(&groups, "group", "ls", "-json")
	listed := map[string][]string{}
	for _, g := range groups {
		listed[g.Group] = g.ids()
	}
	for _, g := range s.Groups {
		var want []string
		for _, m := range w.members(g.Name) {
			want = append(want, m.ID)
		}
		if !slices.Equal(listed[g.Name], want) {
			c.t.Fatalf("group ls -json: %s has %v; the simulator holds %v", g.Name, listed[g.Name], want)
		}
	}
	_, owned := s.ownedLBs()
	for _, lb := range owned {
		var bs backendsJSON
		c.jsonOf(&bs, "lb", "backends", "ls", lb, "-json")
		slices.Sort(bs.Backends)
		if want := slices.Sorted(maps.Keys(w.backendIDs(lb))); !slices.Equal(bs.Backends, want) {
			c.t.Fatalf("lb backends ls %s -json: %v; the simulator holds %v", lb, bs.Backends, want)
		}
		var rs routesJSON
		c.jsonOf(&rs, "lb", "routes", "ls", lb, "-json")
		got := map[int]propRouteFile{}
		for _, r := range rs.Routes {
			got[r.LBPort] = propRouteFile{LBPort: r.LBPort, LBProtocol: r.LBProtocol, Port: r.Port, Protocol: r.Protocol, Certificate: r.Certificate}
		}
		if want := w.routes(lb); !maps.Equal(got, want) {
			c.t.Fatalf("lb routes ls %s -json: %v; the simulator holds %v", lb, got, want)
		}
	}
	if s.Enrollment != nil {
		var as authorizationsJSON
		c.jsonOf(&as, "enrollment", "describe", "nfs", "-json")
		got := map[string]string{}
		for _, a := range as.Authorizations {
			got[a.ID] = a.SourceID
		}
		want := map[string]string{}
		for id, a := range w.auths {
			want[id] = a.SourceID
		}
		if !maps.Equal(got, want) {
			c.t.Fatalf("enrollment describe nfs -json: %v; the simulator holds %v", got, want)
		}
	}
}

// propEnrollmentMovesStack is a cattle group of one and, when pets is set, a
// group of one pet; the enrollment follows the pets when there are some.
func propEnrollmentMovesStack(pets bool) string {
	s := `
stack "moves" {}

provider "simulator" {}
provider "vanilla" {}

group "cattle" {
  size        = 1
  drain_delay = "0s"
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`
	source := "cattle"
	if pets {
		source = "pets"
		s += `
group "pets" {
  logical_ids = ["10.0.0.1"]
  drain_delay = "0s"
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`
	}
	return s + fmt.Sprintf(`
enrollment "nfs" {
  source = group.%s
  target {
    provider   = simulator
    type       = "disk"
    properties = { host = member.id }
  }
}
`, source)
}

// TestPropertyEnrollmentMovedToNewPets is a case TestPropertyPlanIsApplied
// found: an enrollment of a cattle group is moved to a new group of pets.
// enrollment.Diff holds the cattle member's authorization (it carries no
// logical ID) for the pet the group awaits; the plan revokes it once the
// pet is authorized, so after apply only the pet is authorized and the
// next plan has nothing to do.
func TestPropertyEnrollmentMovedToNewPets(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", propEnrollmentMovesStack(false))
	w.init()
	w.ok("apply", "-auto-approve")
	w.writeFile("main.hcl", propEnrollmentMovesStack(true))
	w.ok("apply", "-auto-approve")

	pet := w.groups()["pets"].ids()
	var sources []string
	for _, a := range w.authorizations("nfs").Authorizations {
		sources = append(sources, a.SourceID)
	}
	slices.Sort(sources)
	if !slices.Equal(sources, pet) {
		t.Errorf("after apply the enrollment authorizes %v, want only the pet %v", sources, pet)
	}
	w.expect(0, "plan", "-detailed-exitcode")
}

// propIngressStack is one group behind load balancer lb1, whose ingress
// (called name) publishes lb1:lbPort.
func propIngressStack(name string, lbPort int) string {
	return fmt.Sprintf(`
stack "renamed" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size        = 1
  drain_delay = "0s"
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}

loadbalancer "lb1" { provider = simulator }

ingress %q {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web]
    route {
      lb_port = %d
      port    = 8080
    }
  }
}
`, name, lbPort)
}

// TestPropertyRouteUnpublishedOnce is a case TestPropertyPlanIsApplied
// found: an ingress is renamed and its route moves to another port of the
// same load balancer. The new ingress's diff and the old one's teardown
// both want lb1:80 gone: one step unpublishes it, counted once.
func TestPropertyRouteUnpublishedOnce(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", propIngressStack("old", 80))
	w.init()
	w.ok("apply", "-auto-approve")
	w.writeFile("main.hcl", propIngressStack("new", 443))

	var p plan.JSONPlan
	w.jsonOf(&p, "plan", "-json")
	var unpublish []string
	for _, s := range p.Steps {
		if s.Kind == plan.StepUnpublish {
			unpublish = append(unpublish, fmt.Sprintf("step %d (%s) %s:%d", s.ID, s.Object, s.LoadBalancer, s.Route.LoadBalancerPort))
		}
	}
	if len(unpublish) != 1 || p.Summary.Unpublish != 1 {
		t.Errorf("plan unpublishes %d routes in steps %v; lb1 has one route to take off, lb1:80", p.Summary.Unpublish, unpublish)
	}
}
