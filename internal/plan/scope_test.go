package plan

import (
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// webAndAPI are cattle web (w-0, w-1) and api (a-0, a-1) behind ingress
// test.com on lb1, enrolled by nfs (web) and keys (api), as applied. The
// world is converged except on lb1, where api's followers are off: a-1 is
// not registered and a vanished a-9 is, so that a plan judging api's
// backends would show it.
func webAndAPI(t *testing.T) (*config.Stack, *state.Document, World) {
	webG, api := cattleGroup("web", 2, "v1"), cattleGroup("api", 2, "v1")
	st := withIngress(stackOf(webG, api), "test.com", []string{"lb1"}, "web", "api")
	st = withEnrollment(withEnrollment(st, "nfs", "web"), "keys", "api")
	ms := map[string][]group.Member{"web": running("w", 2, hashOf(t, webG)), "api": running("a", 2, hashOf(t, api))}
	w := converged(t, st, ms)
	lb := LBKey("simulator", "lb1")
	v := w.LoadBalancers[lb]
	v.Backends = slices.DeleteFunc(slices.Clone(v.Backends), func(b loadbalancer.Backend) bool { return b.ID == "a-1" })
	v.Backends = append(v.Backends, loadbalancer.Backend{ID: "a-9"})
	w.LoadBalancers[lb] = v
	return st, storedAs(st, ms), w
}

// freed marks group web, ingress test.com and enrollment nfs freed in doc.
func freed(doc *state.Document) *state.Document {
	doc.Groups["web"].Freed = true
	doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Freed: true}}
	doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Freed: true}}
	return doc
}

func scopeGraphCases() []graphCase {
	return append(freedGraphCases(), scopedGraphCases()...)
}

func freedGraphCases() []graphCase {
	return []graphCase{
		{name: "freed objects in the stack are resumed by a full plan",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				return st, freed(doc), w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				if p.Groups[0].Action != ActionResume || p.Ingresses[0].Action != ActionResume || p.Enrollments[0].Action != ActionResume {
					t.Errorf("actions: %s %s %s", p.Groups[0].Action, p.Ingresses[0].Action, p.Enrollments[0].Action)
				}
				var resumed []string
				for _, c := range p.Steps[0].Changes {
					if c.Kind == Resume {
						resumed = append(resumed, c.Object)
					}
				}
				if want := []string{"group.web", "ingress.test.com", "enrollment.nfs"}; !slices.Equal(resumed, want) {
					t.Errorf("resumed %v, want %v", resumed, want)
				}
				// The resumed ingress syncs lb1: api's backends included.
				one(t, p.Steps, "registering a-1", kind(StepRegister, "a-1"))
				one(t, p.Steps, "deregistering a-9", kind(StepDeregister, "a-9"))
				if !p.HasChanges() {
					t.Error("resuming is a change")
				}
			}},
		{name: "freed followers resumed by a full plan register and authorize a new member once it runs",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := web(t, 3, 2)
				doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Freed: true}}
				doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Freed: true}}
				return st, doc, w, Scope{}
			},
			check: func(t *testing.T, p *Plan) {
				prov := one(t, p.Steps, "provisioning", kind(StepProvision))
				await := one(t, p.Steps, "awaiting the new member", madeBy(StepAwait, prov.ID))
				for _, s := range append(find(p.Steps, madeBy(StepRegister, prov.ID)), find(p.Steps, madeBy(StepAuthorize, prov.ID))...) {
					mustReach(t, p.Steps, s, await)
				}
			}},
		{name: "freed objects are left alone by scoped plans",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				st.Groups[0] = cattleGroup("web", 3, "v1") // what a verb would change
				return st, freed(doc), w, Scope{Groups: []string{"web"}}
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.Groups) != 0 || len(p.Ingresses) != 0 || len(p.Enrollments) != 0 {
					t.Errorf("planned %+v %+v %+v", p.Groups, p.Ingresses, p.Enrollments)
				}
				for _, s := range p.Steps {
					if s.Calls() || slices.ContainsFunc(s.Changes, func(c StateChange) bool { return c.Kind == Resume }) {
						t.Errorf("step %q", s)
					}
				}
			}},
		{name: "a freed ingress is left alone by a scoped plan of a group it follows",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				st.Groups[1] = cattleGroup("api", 3, "v1")
				doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Freed: true}}
				return st, doc, w, Scope{Groups: []string{"api"}}
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.Ingresses) != 0 || len(find(p.Steps, func(s Step) bool { return s.Object == "ingress.test.com" })) != 0 {
					t.Errorf("the freed ingress is planned:\n%s", dump(p.Steps))
				}
				prov := one(t, p.Steps, "provisioning", kind(StepProvision))
				one(t, p.Steps, "authorizing the new member", madeBy(StepAuthorize, prov.ID))
			}},
	}
}

func scopedGraphCases() []graphCase {
	return []graphCase{
		{name: "a scoped plan with its own work touches its group's backends only",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				// A route the ingress lacks: a scoped plan changes no route.
				v := w.LoadBalancers[LBKey("simulator", "lb1")]
				v.Routes = nil
				w.LoadBalancers[LBKey("simulator", "lb1")] = v
				work := GroupWork{Destroy: []group.Destroy{{ID: "w-1", Reason: instance.ReasonTerminate}}}
				return st, doc, w, Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.Groups) != 1 || p.Groups[0].Group != "web" || p.Groups[0].After != 1 {
					t.Errorf("groups = %+v", p.Groups)
				}
				for _, s := range p.Steps {
					if s.Calls() && s.Instance != "w-1" {
						t.Errorf("step %q acts on another member or route:\n%s", s, dump(p.Steps))
					}
				}
				drain := one(t, p.Steps, "draining", kind(StepDrain, "w-1"))
				mustReach(t, p.Steps, drain, one(t, p.Steps, "deregistering", kind(StepDeregister, "w-1")))
				mustReach(t, p.Steps, drain, one(t, p.Steps, "revoking", kind(StepRevoke, "w-1")))
				if len(p.Enrollments) != 1 || p.Enrollments[0].Enrollment != "nfs" {
					t.Errorf("enrollments = %+v", p.Enrollments)
				}
				if _, ok := p.Observed["web"]; !ok || len(p.Observed) != 1 {
					t.Errorf("fingerprints = %v", p.Observed)
				}
			}},
		{name: "a watch finishing a replacement and seeing a member gone",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				// w-2 replaced w-0 (a heal) and runs, not yet registered
				// nor authorized; w-9 vanished, still registered.
				fresh := running("w", 3, hashOf(t, st.Groups[0]))[2]
				w.Members["web"] = append(w.Members["web"], fresh)
				v := w.LoadBalancers[LBKey("simulator", "lb1")]
				v.Backends = append(v.Backends, loadbalancer.Backend{ID: "w-9"})
				w.LoadBalancers[LBKey("simulator", "lb1")] = v
				work := GroupWork{Finish: []Replacement{{Old: "w-0", New: "w-2", Reason: instance.ReasonUnhealthy}},
					Gone: []instance.ID{"w-9"}}
				return st, doc, w, Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				reg := one(t, p.Steps, "registering w-2", kind(StepRegister, "w-2"))
				auth := one(t, p.Steps, "authorizing w-2", kind(StepAuthorize, "w-2"))
				dereg := one(t, p.Steps, "deregistering w-0", kind(StepDeregister, "w-0"))
				revoke := one(t, p.Steps, "revoking w-0", kind(StepRevoke, "w-0"))
				drain := one(t, p.Steps, "draining w-0", kind(StepDrain, "w-0"))
				mustReach(t, p.Steps, dereg, reg)
				mustReach(t, p.Steps, revoke, auth)
				mustReach(t, p.Steps, drain, dereg)
				mustReach(t, p.Steps, drain, revoke)
				mustReach(t, p.Steps, one(t, p.Steps, "destroying w-0", kind(StepDestroy, "w-0")), drain)
				gone := one(t, p.Steps, "deregistering w-9", kind(StepDeregister, "w-9"))
				if len(gone.After) != 1 || gone.After[0] != 1 {
					t.Errorf("a member gone waits for %v", gone.After)
				}
				if n := len(find(p.Steps, kind(StepProvision))); n != 0 {
					t.Errorf("%d provisions", n)
				}
				// The replacement was counted when it was provisioned.
				if p.Summary != (Counts{Register: 1, Deregister: 2, Authorize: 1, Revoke: 1}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
			}},
		{name: "a watch finishing a replacement and starting a roll batch: the batch waits for the finish",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v2")
				st := stackOf(g)
				ms := map[string][]group.Member{"web": append(running("w", 2, "old-hash"), running("w", 3, hashOf(t, g))[2])}
				work := GroupWork{Finish: []Replacement{{Old: "w-0", New: "w-2", Reason: instance.ReasonRollingUpdate}},
					Batches: [][]Replacement{{{Old: "w-1", Reason: instance.ReasonRollingUpdate}}}}
				return st, storedAs(st, ms), converged(t, st, ms), Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				prov := one(t, p.Steps, "provisioning for w-1", func(s Step) bool { return s.Kind == StepProvision && s.Replaces == "w-1" })
				mustReach(t, p.Steps, prov, one(t, p.Steps, "destroying w-0", kind(StepDestroy, "w-0")))
			}},
		{name: "a watch re-creating a vanished member: its backend goes at once, its authorization once the new one's is made",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v1")
				st := withEnrollment(withIngress(stackOf(g), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				ms := map[string][]group.Member{"web": running("w", 2, hashOf(t, g))}
				w := converged(t, st, ms)
				w.Members["web"] = w.Members["web"][:1] // w-1 vanished, still registered and authorized
				work := GroupWork{Create: []group.Create{{}}, Gone: []instance.ID{"w-1"}}
				return st, storedAs(st, ms), w, Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				gone := one(t, p.Steps, "deregistering w-1", kind(StepDeregister, "w-1"))
				if len(gone.After) > 1 || len(gone.After) == 1 && p.Steps[gone.After[0]-1].Kind != StepRecord {
					t.Errorf("a member gone is deregistered after %v", gone.After)
				}
				prov := one(t, p.Steps, "provisioning", kind(StepProvision))
				revoke := one(t, p.Steps, "revoking w-1", kind(StepRevoke, "w-1"))
				mustReach(t, p.Steps, revoke, one(t, p.Steps, "authorizing the new member", madeBy(StepAuthorize, prov.ID)))
			}},
		{name: "a watch seeing a member vanish it cannot replace yet: its authorization is held",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v1")
				st := withEnrollment(withIngress(stackOf(g), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				ms := map[string][]group.Member{"web": running("w", 2, hashOf(t, g))}
				w := converged(t, st, ms)
				w.Members["web"] = w.Members["web"][:1]
				work := GroupWork{Gone: []instance.ID{"w-1"}} // the brake holds the replacement
				return st, storedAs(st, ms), w, Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				if n := len(find(p.Steps, kind(StepRevoke))); n != 0 {
					t.Errorf("%d revocations: the vanished member's authorization must be held:\n%s", n, dump(p.Steps))
				}
				if len(p.Enrollments) != 1 || p.Enrollments[0].Deferred != 1 {
					t.Errorf("enrollments = %+v", p.Enrollments)
				}
			}},
		{name: "a watch finishing a replacement already registered and authorized: no intent, no step waits for none",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				g := cattleGroup("web", 2, "v1")
				st := withEnrollment(withIngress(stackOf(g), "test.com", []string{"lb1"}, "web"), "nfs", "web")
				ms := map[string][]group.Member{"web": running("w", 3, hashOf(t, g))}
				work := GroupWork{Finish: []Replacement{{Old: "w-0", New: "w-2", Reason: instance.ReasonRollingUpdate}}}
				return st, storedAs(st, ms), converged(t, st, ms), Scope{Groups: []string{"web"}, Work: map[string]GroupWork{"web": work}}
			},
			check: func(t *testing.T, p *Plan) {
				if p.Steps[0].Kind == StepRecord && p.Steps[0].Object == "state" {
					t.Fatalf("the plan has an intent:\n%s", dump(p.Steps))
				}
				drain := one(t, p.Steps, "draining w-0", kind(StepDrain, "w-0"))
				mustReach(t, p.Steps, drain, one(t, p.Steps, "deregistering w-0", kind(StepDeregister, "w-0")))
				mustReach(t, p.Steps, drain, one(t, p.Steps, "revoking w-0", kind(StepRevoke, "w-0")))
				if p.Summary != (Counts{Deregister: 1, Revoke: 1}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
			}},
		{name: "a sync plans routes, backends and authorizations of what it names, no teardown and no group",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				v := w.LoadBalancers[LBKey("simulator", "lb1")]
				v.Routes = nil
				w.LoadBalancers[LBKey("simulator", "lb1")] = v
				// The stored ingress had lb2 and the enrollment another
				// target: teardowns apply owes, not a sync.
				doc.Stack = withIngress(stackOf(doc.Stack.Groups...), "test.com", []string{"lb1", "lb2"}, "web", "api")
				doc.Stack.Enrollments = []*config.Enrollment{{Name: "nfs", Source: "web", Target: config.EnrollmentTarget{Provider: "old", Type: nfsType}},
					st.Enrollments[1]}
				st.Groups[0] = cattleGroup("web", 5, "v2") // no group is planned
				return st, doc, w, Scope{Ingresses: []string{"test.com"}, Enrollments: []string{"nfs"}, Sync: true}
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.Groups) != 0 || len(p.Ingresses) != 1 || len(p.Enrollments) != 1 {
					t.Errorf("planned %+v %+v %+v", p.Groups, p.Ingresses, p.Enrollments)
				}
				one(t, p.Steps, "publishing", kind(StepPublish))
				one(t, p.Steps, "configuring the health check", kind(StepHealthCheck))
				one(t, p.Steps, "registering a-1", kind(StepRegister, "a-1"))
				one(t, p.Steps, "deregistering a-9", kind(StepDeregister, "a-9"))
				for _, s := range p.Steps {
					switch {
					case s.Object == "group.web" || s.Object == "group.api" || s.Object == "enrollment.keys":
						t.Errorf("step %q is not the sync's", s)
					case s.LoadBalancer == "lb2" || s.Provider == "old":
						t.Errorf("step %q is a teardown", s)
					case slices.ContainsFunc(s.Changes, func(c StateChange) bool { return c.Kind == AddPending || c.Kind == ClearPending }):
						t.Errorf("step %q records a teardown", s)
					}
				}
				if p.Summary != (Counts{Publish: 1, Register: 1, Deregister: 1}) {
					t.Errorf("Summary = %+v", p.Summary)
				}
			}},
		{name: "a health check is configured for a load balancer in Configure even without route changes",
			setup: func(t *testing.T) (*config.Stack, *state.Document, World, Scope) {
				st, doc, w := webAndAPI(t)
				return st, doc, w, Scope{Ingresses: []string{"test.com"}, Enrollments: []string{}, Sync: true,
					Configure: []string{LBKey("simulator", "lb1")}}
			},
			check: func(t *testing.T, p *Plan) {
				hc := one(t, p.Steps, "configuring the health check", kind(StepHealthCheck))
				if hc.HealthCheck == nil || hc.HealthCheck.BackendPort != 80 {
					t.Errorf("health check = %+v", hc.HealthCheck)
				}
			}},
	}
}

func TestComputeFree(t *testing.T) {
	st, doc, w := webAndAPI(t)
	st.Enrollments[0].DestroyOnFree = true
	doc.Stack = st
	for _, tc := range []struct {
		kind, name string
		revokes    int
	}{
		{KindGroup, "web", 0},
		{KindIngress, "test.com", 0},
		{KindEnrollment, "keys", 0},
		{KindEnrollment, "nfs", 2}, // destroy_on_free
	} {
		t.Run(tc.kind+"."+tc.name, func(t *testing.T) {
			p, err := ComputeFree(doc, w, tc.kind, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(p.Steps); err != nil {
				t.Fatal(err)
			}
			if c := p.Steps[0].Changes[0]; c.Kind != MarkFreed || c.Object != Address(tc.kind, tc.name) {
				t.Errorf("intent = %+v", p.Steps[0].Changes)
			}
			if p.Summary != (Counts{Revoke: tc.revokes}) {
				t.Errorf("Summary = %+v", p.Summary)
			}
			for _, s := range p.Steps {
				if s.Calls() && (s.Kind != StepRevoke || s.Enrollment != tc.name) {
					t.Errorf("freeing calls %q", s)
				}
			}
		})
	}
	if _, err := ComputeFree(state.NewDocument(), World{}, KindGroup, "web"); err == nil {
		t.Error("freeing without a stored stack succeeded")
	}
}
