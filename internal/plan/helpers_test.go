package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// The helpers build small stacks, states and worlds by hand: groups at the
// "simulator" provider, load balancers lb1.. at "simulator", enrollments
// at "simulator.nfs-auth" type "disk" with host = member.id.

func cattleGroup(name string, size int, note string) *config.Group {
	return &config.Group{
		Name:     name,
		Size:     &size,
		Instance: config.Plugin{Provider: "simulator", Type: "compute", Properties: json.RawMessage(fmt.Sprintf(`{"note":%q}`, note))},
		Flavors:  []config.Plugin{{Provider: "vanilla", Properties: json.RawMessage(`{"init":["echo hi"]}`)}},
		Update:   config.UpdatePolicy{MaxParallel: 1},
	}
}

func petGroup(name string, ids ...string) *config.Group {
	g := cattleGroup(name, 0, "pets")
	g.Size, g.LogicalIDs = nil, ids
	return g
}

func stackOf(groups ...*config.Group) *config.Stack {
	return &config.Stack{Name: "mystack", Groups: groups}
}

func hashOf(_ any, g *config.Group) string { return g.ConfigHash() }

// tb is what the helpers need of a test: *testing.T, *testing.B and
// *rapid.T all have it.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// route is the route a rule on lb port port publishes.
func route(port int) config.Route {
	return config.Route{LBPort: port, LBProtocol: "https", Port: port, Protocol: "http"}
}

// withIngress adds ingress name to st: one rule per load balancer in lbs
// (each on port 80) routing to groups, and the loadbalancer blocks.
func withIngress(st *config.Stack, name string, lbs []string, groups ...string) *config.Stack {
	in := &config.Ingress{Name: name}
	for _, lb := range lbs {
		in.Rules = append(in.Rules, config.Rule{LoadBalancer: lb, Groups: groups, Routes: []config.Route{route(80)}})
		if st.LoadBalancer(lb) == nil {
			st.LoadBalancers = append(st.LoadBalancers, &config.LoadBalancer{Name: lb, Provider: "simulator"})
		}
	}
	st.Ingresses = append(st.Ingresses, in)
	return st
}

const nfsProvider, nfsType = "simulator.nfs-auth", "disk"

func nfsTarget() config.EnrollmentTarget {
	return config.EnrollmentTarget{Provider: nfsProvider, Type: nfsType, Properties: `{ host = member.id, iops = 10 }`}
}

// withEnrollment adds enrollment name of group source to st.
func withEnrollment(st *config.Stack, name, source string) *config.Stack {
	st.Enrollments = append(st.Enrollments, &config.Enrollment{Name: name, Source: source, Target: nfsTarget()})
	return st
}

// running returns n running, healthy members prefix-0 ... with the hash.
func running(prefix string, n int, hash string) []group.Member {
	out := make([]group.Member, n)
	for i := range out {
		out[i] = group.Member{ID: instance.ID(fmt.Sprintf("%s-%d", prefix, i)), ConfigHash: hash,
			State: instance.StateRunning, Health: flavor.HealthHealthy, Address: fmt.Sprintf("10.1.0.%d", i)}
	}
	return out
}

// pets returns running, healthy members prefix-i, one per logical ID.
func pets(prefix, hash string, lids ...string) []group.Member {
	out := running(prefix, len(lids), hash)
	for i := range out {
		out[i].LogicalID = lids[i]
	}
	return out
}

// stored is a stored state whose desired stack holds groups (only names matter).
func stored(serial uint64, groups ...string) *state.Document {
	doc := state.NewDocument()
	doc.Serial = serial
	doc.Stack = &config.Stack{Name: "mystack"}
	for _, g := range groups {
		doc.Stack.Groups = append(doc.Stack.Groups, &config.Group{Name: g})
		doc.Groups[g] = &state.GroupStatus{Instances: []state.Instance{}}
	}
	return doc
}

// storedAs is the state an apply of st leaves when the groups have members:
// st stored, and the members recorded as they are.
func storedAs(st *config.Stack, members map[string][]group.Member) *state.Document {
	doc := state.NewDocument()
	doc.Serial = 5
	doc.Stack = st
	for _, g := range st.Groups {
		doc.Groups[g.Name] = &state.GroupStatus{Instances: recordOf(group.Live(members[g.Name]))}
	}
	return doc
}

func withStatus(doc *state.Document, name string, st state.GroupStatus) *state.Document {
	doc.Groups[name] = &st
	return doc
}

// converged is the world in which st's followers match members: every load
// balancer publishes its routes with every live member as a backend, and
// every target has one up-to-date authorization per running member.
func converged(t tb, st *config.Stack, members map[string][]group.Member) World {
	t.Helper()
	w := World{Members: members, LoadBalancers: map[string]LoadBalancerView{}, Authorizers: map[string]AuthorizerView{}}
	for _, in := range st.Ingresses {
		for _, d := range ingress.DesiredLBs(in) {
			lb := st.LoadBalancer(d.LoadBalancer)
			w.LoadBalancers[LBKey(lb.Provider, lb.Name)] = LoadBalancerView{Routes: d.Routes,
				Backends: ingress.Backends(d.Groups, members)}
		}
	}
	for _, e := range st.Enrollments {
		key := TargetKey(e.Target.Provider, e.Target.Type)
		v := w.Authorizers[key]
		v.Authorizations = append(v.Authorizations, authorizations(t, e, members[e.Source])...)
		w.Authorizers[key] = v
	}
	return w
}

// authorizations are the up-to-date authorizations of e for the running
// members, with IDs "auth-<member>".
func authorizations(t tb, e *config.Enrollment, members []group.Member) []nfs.Authorization {
	t.Helper()
	var out []nfs.Authorization
	for _, m := range group.Live(members) {
		if m.State != instance.StateRunning {
			continue
		}
		props, err := RenderAuthorizationProperties(&e.Target, instance.Description{ID: m.ID, Address: m.Address, State: m.State})
		if err != nil {
			t.Fatal(err)
		}
		a := enrollment.Authorization(e.Name, m, props)
		a.ID = "auth-" + string(m.ID)
		out = append(out, a)
	}
	return out
}

func backends(ms []group.Member) []loadbalancer.Backend {
	return ingress.Backends([]string{"g"}, map[string][]group.Member{"g": ms})
}

func compute(t tb, desired *config.Stack, doc *state.Document, world World, scope Scope) *Plan {
	t.Helper()
	p, err := Compute(desired, doc, world, scope)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(p.Steps); err != nil {
		t.Fatalf("Check: %v\n%s", err, dump(p.Steps))
	}
	return p
}

// reaches reports whether step from waits, directly or through other steps,
// for step to.
func reaches(steps []Step, from, to StepID) bool {
	seen := map[StepID]bool{}
	stack := []StepID{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range steps[id-1].After {
			if d == to {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, d)
			}
		}
	}
	return false
}

// find returns the steps matching every condition of match.
func find(steps []Step, match func(Step) bool) []Step {
	var out []Step
	for _, s := range steps {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only step matching match, failing otherwise.
func one(t tb, steps []Step, what string, match func(Step) bool) Step {
	t.Helper()
	got := find(steps, match)
	if len(got) != 1 {
		t.Fatalf("%d steps %s, want 1:\n%s", len(got), what, dump(steps))
	}
	return got[0]
}

// kind matches steps of kind k (and, when given, on instance id).
func kind(k StepKind, id ...instance.ID) func(Step) bool {
	return func(s Step) bool {
		return s.Kind == k && (len(id) == 0 || s.Instance == id[0])
	}
}

// madeBy matches steps of kind k acting on the instance provision made.
func madeBy(k StepKind, provision StepID) func(Step) bool {
	return func(s Step) bool { return s.Kind == k && s.Made == provision }
}

func dump(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "  %s", s)
		if s.Group != "" {
			fmt.Fprintf(&b, " [%s]", s.Group)
		}
		if s.Replaces != "" {
			fmt.Fprintf(&b, " replaces %s", s.Replaces)
		}
		for _, c := range s.Changes {
			fmt.Fprintf(&b, " {%s %s}", c.Kind, c.Object)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// mustReach fails unless step from waits (transitively) for step to.
func mustReach(t tb, steps []Step, from, to Step) {
	t.Helper()
	if !reaches(steps, from.ID, to.ID) {
		t.Errorf("step %q does not wait for %q:\n%s", from, to, dump(steps))
	}
}

// mustNotReach fails when step from waits (transitively) for step to.
func mustNotReach(t tb, steps []Step, from, to Step) {
	t.Helper()
	if reaches(steps, from.ID, to.ID) {
		t.Errorf("step %q waits for %q, it should not:\n%s", from, to, dump(steps))
	}
}
