package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// graphCase is one hand-built world and what its plan's graph must be.
type graphCase struct {
	name string
	// setup builds the desired stack, the state and the world.
	setup func(t *testing.T) (*config.Stack, *state.Document, World, Scope)
	check func(t *testing.T, p *Plan)
}

func TestComputeGraphs(t *testing.T) {
	var cases []graphCase
	cases = append(cases, memberGraphCases()...)
	cases = append(cases, followerGraphCases()...)
	cases = append(cases, scopeGraphCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			desired, doc, world, scope := tc.setup(t)
			p := compute(t, desired, doc, world, scope)
			if got := CountSteps(p.Steps); got != p.Summary {
				t.Errorf("Summary = %+v, CountSteps = %+v", p.Summary, got)
			}
			tc.check(t, p)
		})
	}
}

// web is cattle of size behind ingress test.com (lb1, lb2) and enrolled by
// nfs, with members w-0 .. w-(n-1) of the current configuration; the state
// is what applying it with those members left.
func web(t *testing.T, size, n int) (*config.Stack, *state.Document, World) {
	g := cattleGroup("web", size, "v1")
	st := withEnrollment(withIngress(stackOf(g), "test.com", []string{"lb1", "lb2"}, "web"), "nfs", "web")
	ms := map[string][]group.Member{"web": running("w", n, hashOf(t, g))}
	old := withEnrollment(withIngress(stackOf(cattleGroup("web", n, "v1")), "test.com", []string{"lb1", "lb2"}, "web"), "nfs", "web")
	return st, storedAs(old, ms), converged(t, old, ms)
}

func memberGraphCases() []graphCase {
	return []graphCase{
		{name: "a scale-up behind an ingress and an enrollment: provision, await running, register and authorize",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 3, 2)
				return st, doc, w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				if p.Summary != (Counts{Add: 1, Register: 2, Authorize: 1}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
				prov := one(t, p.Steps, "provisioning", kind(StepProvision))
				await := one(t, p.Steps, "awaiting the new member", madeBy(StepAwait, prov.ID))
				if await.Healthy {
					t.Error("a plain create is awaited running, not healthy")
				}
				mustReach(t, p.Steps, await, prov)
				regs := find(p.Steps, madeBy(StepRegister, prov.ID))
				if len(regs) != 2 || regs[0].LoadBalancer == regs[1].LoadBalancer {
					t.Fatalf("registers of the new member: %v", regs)
				}
				for _, r := range regs {
					mustReach(t, p.Steps, r, await)
				}
				mustReach(t, p.Steps, one(t, p.Steps, "authorizing the new member", madeBy(StepAuthorize, prov.ID)), await)
				if len(find(p.Steps, kind(StepRegister, "w-0"))) != 0 {
					t.Error("a member already registered is registered again")
				}
			}},
		{name: "a plain create that nothing follows is not awaited",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v1")
				ms := map[string][]group.Member{"web": running("w", 1, hashOf(t, g))}
				return stackOf(g), storedAs(stackOf(cattleGroup("web", 1, "v1")), ms), World{Members: ms}, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				one(t, p.Steps, "provisioning", kind(StepProvision))
				if n := len(find(p.Steps, kind(StepAwait))); n != 0 {
					t.Errorf("%d awaits:\n%s", n, dump(p.Steps))
				}
				// The changed stack is the intent, written before the provision.
				if p.Steps[0].Kind != StepRecord || p.Steps[0].Changes[len(p.Steps[0].Changes)-1].Kind != StoreStack {
					t.Errorf("step 1 is not the intent:\n%s", dump(p.Steps))
				}
				mustReach(t, p.Steps, p.Steps[1], p.Steps[0])
			}},
		{name: "a scale-down: deregister and revoke, then drain (with the drain delay), then destroy",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 1, 2)
				st.Groups[0].DrainDelay = config.Duration(5 * time.Second)
				return st, doc, w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				if p.Summary != (Counts{Destroy: 1, Deregister: 2, Revoke: 1}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
				destroy := one(t, p.Steps, "destroying", kind(StepDestroy))
				gone := destroy.Instance
				drain := one(t, p.Steps, "draining", kind(StepDrain, gone))
				if drain.DrainDelay != config.Duration(5*time.Second) {
					t.Errorf("drain delay = %v, want 5s", drain.DrainDelay)
				}
				mustReach(t, p.Steps, destroy, drain)
				deregs := find(p.Steps, kind(StepDeregister, gone))
				if len(deregs) != 2 {
					t.Fatalf("%d deregistrations of %s:\n%s", len(deregs), gone, dump(p.Steps))
				}
				for _, d := range deregs {
					// The executor counts the delay from the deregistrations
					// the drain waits for directly.
					if !slices.Contains(drain.After, d.ID) {
						t.Errorf("drain does not wait directly for %q", d)
					}
				}
				mustReach(t, p.Steps, drain, one(t, p.Steps, "revoking", kind(StepRevoke, gone)))
				if len(find(p.Steps, func(s Step) bool { return s.Instance != "" && s.Instance != gone })) != 0 {
					t.Errorf("the member that stays is touched:\n%s", dump(p.Steps))
				}
			}},
		{name: "a cattle roll, max_parallel 2 over 6: three batches chained, make before break in each",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 6, 6)
				// max_unavailable 2 too: below it a healthy group rolls one by one.
				st.Groups[0] = cattleGroup("web", 6, "v2")
				st.Groups[0].Update = config.UpdatePolicy{MaxParallel: 2, MaxUnavailable: 2, HealthTimeout: config.Duration(time.Minute)}
				return st, doc, w, Scope{}
			},
			check: checkCattleRoll},
		{name: "a pet roll: the old pet goes before the new one comes; its authorization stays until the new one's",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				db := petGroup("db", "a")
				st := withEnrollment(withIngress(stackOf(db), "test.com", []string{"lb1"}, "db"), "nfs", "db")
				ms := map[string][]group.Member{"db": pets("d", "old-hash", "a")}
				return st, storedAs(st, ms), converged(t, st, ms), Scope{}
			},
			check: checkPetRoll},
		{name: "a roll of three pets behind an ingress: one pet at a time leaves its load balancer",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				db := petGroup("db", "a", "b", "c")
				st := withEnrollment(withIngress(stackOf(db), "test.com", []string{"lb1"}, "db"), "nfs", "db")
				ms := map[string][]group.Member{"db": pets("d", "old-hash", "a", "b", "c")}
				return st, storedAs(st, ms), converged(t, st, ms), Scope{}
			},
			check: checkPetsRollOneAtATime},
	}
}

// checkPetsRollOneAtATime: a pet of a later batch is deregistered and
// revoked only once the pet of the batch before it is back (registered and
// authorized), so the load balancer never loses more than one pet at once.
func checkPetsRollOneAtATime(t *testing.T, p *Plan) {
	roll := p.Groups[0].Roll
	if len(roll) != 3 {
		t.Fatalf("roll batches = %v", roll)
	}
	for k := 1; k < len(roll); k++ {
		prev := one(t, p.Steps, "provisioning", func(s Step) bool { return s.Kind == StepProvision && s.Replaces == roll[k-1][0].Old })
		back := one(t, p.Steps, "registering the pet before", madeBy(StepRegister, prev.ID))
		authorized := one(t, p.Steps, "authorizing the pet before", madeBy(StepAuthorize, prev.ID))
		old := roll[k][0].Old
		for _, leaving := range []Step{one(t, p.Steps, "deregistering", kind(StepDeregister, old)),
			one(t, p.Steps, "revoking", kind(StepRevoke, old)), one(t, p.Steps, "draining", kind(StepDrain, old))} {
			mustReach(t, p.Steps, leaving, back)
			mustReach(t, p.Steps, leaving, authorized)
		}
	}
}

func checkCattleRoll(t *testing.T, p *Plan) {
	if p.Summary != (Counts{Roll: 6, Register: 12, Deregister: 12, Authorize: 6, Revoke: 6}) {
		t.Errorf("Summary = %+v", p.Summary)
	}
	roll := p.Groups[0].Roll
	if len(roll) != 3 || len(roll[0]) != 2 || len(roll[1]) != 2 || len(roll[2]) != 2 {
		t.Fatalf("roll batches = %v", roll)
	}
	provisionOf := func(old instance.ID) Step {
		return one(t, p.Steps, "provisioning for "+string(old), func(s Step) bool { return s.Kind == StepProvision && s.Replaces == old })
	}
	for k, batch := range roll {
		for _, r := range batch {
			prov := provisionOf(r.Old)
			await := one(t, p.Steps, "awaiting", madeBy(StepAwait, prov.ID))
			if !await.Healthy || await.Timeout != config.Duration(time.Minute) {
				t.Errorf("a replacement's await: healthy %v, timeout %v", await.Healthy, await.Timeout)
			}
			drain := one(t, p.Steps, "draining", kind(StepDrain, r.Old))
			mustReach(t, p.Steps, drain, await)
			mustReach(t, p.Steps, one(t, p.Steps, "destroying", kind(StepDestroy, r.Old)), drain)
			for _, lb := range []string{"lb1", "lb2"} {
				onLB := func(k StepKind, match func(Step) bool) Step {
					return one(t, p.Steps, string(k)+" on "+lb, func(s Step) bool { return s.LoadBalancer == lb && s.Kind == k && match(s) })
				}
				reg := onLB(StepRegister, func(s Step) bool { return s.Made == prov.ID })
				dereg := onLB(StepDeregister, func(s Step) bool { return s.Instance == r.Old })
				mustReach(t, p.Steps, dereg, reg)
				mustReach(t, p.Steps, drain, dereg)
			}
			revoke := one(t, p.Steps, "revoking", kind(StepRevoke, r.Old))
			mustReach(t, p.Steps, revoke, one(t, p.Steps, "authorizing", madeBy(StepAuthorize, prov.ID)))
			mustReach(t, p.Steps, drain, revoke)
			if k == 0 {
				continue
			}
			for _, before := range roll[k-1] {
				mustReach(t, p.Steps, prov, one(t, p.Steps, "destroying", kind(StepDestroy, before.Old)))
			}
		}
		// The members of one batch are replaced side by side.
		a, b := provisionOf(batch[0].Old), provisionOf(batch[1].Old)
		mustNotReach(t, p.Steps, a, b)
		mustNotReach(t, p.Steps, b, a)
	}
}

func checkPetRoll(t *testing.T, p *Plan) {
	if p.Summary != (Counts{Roll: 1, Register: 1, Deregister: 1, Authorize: 1, Revoke: 1}) {
		t.Errorf("Summary = %+v", p.Summary)
	}
	prov := one(t, p.Steps, "provisioning", kind(StepProvision))
	if prov.LogicalID != "a" || prov.Replaces != "d-0" {
		t.Errorf("provision = %+v", prov)
	}
	drain := one(t, p.Steps, "draining", kind(StepDrain, "d-0"))
	destroy := one(t, p.Steps, "destroying", kind(StepDestroy, "d-0"))
	mustReach(t, p.Steps, destroy, drain)
	mustReach(t, p.Steps, prov, destroy)
	mustReach(t, p.Steps, drain, one(t, p.Steps, "deregistering", kind(StepDeregister, "d-0")))
	await := one(t, p.Steps, "awaiting", madeBy(StepAwait, prov.ID))
	if !await.Healthy {
		t.Error("the new pet is not awaited healthy")
	}
	mustReach(t, p.Steps, one(t, p.Steps, "registering", madeBy(StepRegister, prov.ID)), await)
	authorize := one(t, p.Steps, "authorizing", madeBy(StepAuthorize, prov.ID))
	revoke := one(t, p.Steps, "revoking", kind(StepRevoke, "d-0"))
	mustReach(t, p.Steps, revoke, authorize)
	// Waiting for the revocation would be a cycle: the new pet comes after
	// the old one is drained.
	mustNotReach(t, p.Steps, drain, revoke)
}

func followerGraphCases() []graphCase {
	return []graphCase{
		{name: "a group leaving the stack: marked, deregistered and revoked, drained, destroyed, forgotten",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				webG, api := cattleGroup("web", 1, "v1"), cattleGroup("api", 2, "v1")
				old := withEnrollment(withIngress(stackOf(webG, api), "test.com", []string{"lb1"}, "web", "api"), "nfs", "api")
				ms := map[string][]group.Member{"web": running("w", 1, hashOf(t, webG)), "api": running("a", 2, hashOf(t, api))}
				// The stack drops api; its ingress rule and its enrollment
				// now follow web.
				st := withEnrollment(withIngress(stackOf(webG), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				return st, storedAs(old, ms), converged(t, old, ms), Scope{}
			},
			check: checkGroupLeaves},
		{name: "a load balancer passing to another ingress: a route neither wants is unpublished once",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 1, "v1")
				old := withIngress(stackOf(g), "old", []string{"lb1"}, "web")
				ms := map[string][]group.Member{"web": running("w", 1, hashOf(t, g))}
				st := withIngress(stackOf(g), "new", []string{"lb1"}, "web")
				st.Ingresses[0].Rules[0].Routes = []config.Route{route(443)}
				return st, storedAs(old, ms), converged(t, old, ms), Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				if n := len(find(p.Steps, kind(StepUnpublish))); n != 1 || p.Summary.Unpublish != 1 || p.Summary.Publish != 1 {
					t.Errorf("%d unpublish steps, summary %+v; want lb1:80 unpublished once, 443 published:\n%s", n, p.Summary, dump(p.Steps))
				}
			}},
		{name: "an enrollment moved to pets not made yet: the old source's authorization goes once the pet's is made",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				cattle := cattleGroup("cattle", 1, "v1")
				old := withEnrollment(stackOf(cattle), "nfs", "cattle")
				ms := map[string][]group.Member{"cattle": running("c", 1, hashOf(t, cattle))}
				st := withEnrollment(stackOf(cattle, petGroup("pets", "10.0.0.1")), "nfs", "pets")
				return st, storedAs(old, ms), converged(t, old, ms), Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				prov := one(t, p.Steps, "provisioning the pet", kind(StepProvision))
				revoke := one(t, p.Steps, "revoking the cattle member's authorization", kind(StepRevoke, "c-0"))
				mustReach(t, p.Steps, revoke, one(t, p.Steps, "authorizing the pet", madeBy(StepAuthorize, prov.ID)))
				if p.Enrollments[0].Deferred != 0 {
					t.Errorf("enrollment = %+v: nothing should stay held", p.Enrollments[0])
				}
			}},
		{name: "a vanished member's authorization is revoked only once the member replacing it is authorized",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v1")
				st := withEnrollment(stackOf(g), "nfs", "web")
				before := map[string][]group.Member{"web": running("w", 2, hashOf(t, g))}
				w := converged(t, st, before)
				// w-1 vanished behind the plan's back; its replacement r-0
				// runs, not authorized yet (a watch sync after a heal).
				now := map[string][]group.Member{"web": {before["web"][0], running("r", 1, hashOf(t, g))[0]}}
				w.Members = now
				return st, storedAs(st, now), w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				revoke := one(t, p.Steps, "revoking the vanished member's authorization", kind(StepRevoke, "w-1"))
				mustReach(t, p.Steps, revoke, one(t, p.Steps, "authorizing the replacement", kind(StepAuthorize, "r-0")))
			}},
		{name: "an ingress dropping a load balancer: recorded pending, torn down, cleared",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				_, doc, w := web(t, 2, 2)
				// Scaled down at the same time: w-0 leaves lb2 by the teardown.
				st := withEnrollment(withIngress(stackOf(cattleGroup("web", 1, "v1")), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				return st, doc, w, Scope{}
			},
			check: checkReleasedLB},
		{name: "a teardown an earlier apply left pending is finished, not recorded again",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 2, 2)
				part := IngressPart(doc.Stack, "test.com", "lb2")
				doc.Stack = withEnrollment(withIngress(stackOf(cattleGroup("web", 2, "v1")), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Pending: []*config.Stack{part}}}
				st = withEnrollment(withIngress(stackOf(st.Groups[0]), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				return st, doc, w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				if p.Ingresses[0].Pending == nil || p.Ingresses[0].Pending[0] != "lb2" {
					t.Errorf("ingress change = %+v", p.Ingresses[0])
				}
				for _, s := range p.Steps {
					for _, c := range s.Changes {
						if c.Kind == AddPending {
							t.Errorf("the pending teardown is recorded again:\n%s", dump(p.Steps))
						}
					}
				}
				clear := one(t, p.Steps, "clearing", hasChange(ClearPending))
				for _, s := range find(p.Steps, func(s Step) bool { return s.LoadBalancer == "lb2" }) {
					mustReach(t, p.Steps, clear, s)
				}
				if p.Summary != (Counts{Unpublish: 1, Deregister: 2}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
			}},
		{name: "an enrollment whose target changed: the old target's revocations after the new target's authorizations",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 2, 2)
				st.Enrollments[0].Target.Provider = "nfs2"
				w.Authorizers[TargetKey("nfs2", nfsType)] = AuthorizerView{}
				return st, doc, w, Scope{}
			},
			check: checkRetarget},
		{name: "a retarget during a roll: each old member's revocation waits for its replacement's authorization, no cycle",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 2, 2)
				st.Groups[0] = cattleGroup("web", 2, "v2")
				st.Enrollments[0].Target.Provider = "nfs2"
				w.Authorizers[TargetKey("nfs2", nfsType)] = AuthorizerView{}
				return st, doc, w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				for _, old := range []instance.ID{"w-0", "w-1"} {
					prov := one(t, p.Steps, "provisioning", func(s Step) bool { return s.Kind == StepProvision && s.Replaces == old })
					revoke := one(t, p.Steps, "revoking", kind(StepRevoke, old))
					if revoke.Provider != nfsProvider {
						t.Errorf("%s revoked at %s", old, revoke.Provider)
					}
					mustReach(t, p.Steps, revoke, one(t, p.Steps, "authorizing", madeBy(StepAuthorize, prov.ID)))
					mustReach(t, p.Steps, one(t, p.Steps, "draining", kind(StepDrain, old)), revoke)
				}
			}},
	}
}

func checkGroupLeaves(t *testing.T, p *Plan) {
	intent := p.Steps[0]
	if intent.Kind != StepRecord || !slices.ContainsFunc(intent.Changes, func(c StateChange) bool {
		return c.Kind == MarkDestroying && c.Object == "group.api"
	}) {
		t.Fatalf("the intent does not mark api as being destroyed:\n%s", dump(p.Steps))
	}
	forget := one(t, p.Steps, "forgetting api", hasChange(ForgetGroup))
	for _, id := range []instance.ID{"a-0", "a-1"} {
		destroy := one(t, p.Steps, "destroying", kind(StepDestroy, id))
		drain := one(t, p.Steps, "draining", kind(StepDrain, id))
		mustReach(t, p.Steps, forget, destroy)
		mustReach(t, p.Steps, destroy, drain)
		mustReach(t, p.Steps, drain, one(t, p.Steps, "deregistering", kind(StepDeregister, id)))
		mustReach(t, p.Steps, drain, one(t, p.Steps, "revoking", kind(StepRevoke, id)))
		mustReach(t, p.Steps, drain, intent)
	}
	one(t, p.Steps, "authorizing web's member", kind(StepAuthorize, "w-0"))
	if p.Summary != (Counts{Destroy: 2, Deregister: 2, Authorize: 1, Revoke: 2}) {
		t.Errorf("Summary = %+v", p.Summary)
	}
	if g := p.Groups[1]; g.Group != "api" || g.Action != ActionDestroy || g.Before != 2 {
		t.Errorf("api = %+v", g)
	}
}

func checkReleasedLB(t *testing.T, p *Plan) {
	in := p.Ingresses[0]
	if in.Action != ActionUpdate || !slices.Equal(in.Released, []string{"lb2"}) {
		t.Errorf("ingress change = %+v", in)
	}
	intent := p.Steps[0]
	i := slices.IndexFunc(intent.Changes, func(c StateChange) bool { return c.Kind == AddPending })
	if i < 0 || intent.Changes[i].Object != "ingress.test.com" || intent.Changes[i].Part.LoadBalancer("lb2") == nil {
		t.Fatalf("the intent does not record lb2's teardown:\n%s", dump(p.Steps))
	}
	clear := one(t, p.Steps, "clearing the teardown", hasChange(ClearPending))
	if !sameStack(clear.Changes[0].Part, intent.Changes[i].Part) {
		t.Error("the teardown cleared is not the one recorded")
	}
	onLB2 := find(p.Steps, func(s Step) bool { return s.LoadBalancer == "lb2" })
	if len(onLB2) != 3 { // the route, w-0 and w-1
		t.Fatalf("%d steps on lb2:\n%s", len(onLB2), dump(p.Steps))
	}
	for _, s := range onLB2 {
		if s.Kind != StepUnpublish && s.Kind != StepDeregister {
			t.Errorf("teardown step %q", s)
		}
		mustReach(t, p.Steps, clear, s)
	}
	drain := one(t, p.Steps, "draining", kind(StepDrain))
	for _, d := range find(p.Steps, kind(StepDeregister, drain.Instance)) {
		mustReach(t, p.Steps, drain, d)
	}
	if p.Summary != (Counts{Destroy: 1, Unpublish: 1, Deregister: 3, Revoke: 1}) {
		t.Errorf("Summary = %+v", p.Summary)
	}
}

func checkRetarget(t *testing.T, p *Plan) {
	e := p.Enrollments[0]
	if e.Retarget != enrollment.TargetString(nfsTarget()) || len(e.Settings) != 1 || e.Settings[0].Attribute != "target" {
		t.Errorf("enrollment change = %+v", e)
	}
	for _, id := range []instance.ID{"w-0", "w-1"} {
		authorize := one(t, p.Steps, "authorizing", kind(StepAuthorize, id))
		revoke := one(t, p.Steps, "revoking", kind(StepRevoke, id))
		if authorize.Provider != "nfs2" || revoke.Provider != nfsProvider || revoke.Reason != enrollment.ReasonRetarget {
			t.Errorf("authorize at %s, revoke at %s (%s)", authorize.Provider, revoke.Provider, revoke.Reason)
		}
		mustReach(t, p.Steps, revoke, authorize)
		mustReach(t, p.Steps, one(t, p.Steps, "clearing", hasChange(ClearPending)), revoke)
	}
	if !slices.ContainsFunc(p.Steps[0].Changes, func(c StateChange) bool { return c.Kind == AddPending }) {
		t.Errorf("the intent does not record the old target's revocations:\n%s", dump(p.Steps))
	}
}

// hasChange matches record steps with a change of kind k.
func hasChange(k StateChangeKind) func(Step) bool {
	return func(s Step) bool {
		return s.Kind == StepRecord && slices.ContainsFunc(s.Changes, func(c StateChange) bool { return c.Kind == k })
	}
}
