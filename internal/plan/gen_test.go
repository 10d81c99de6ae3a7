package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// drawn is a random desired stack, the state an earlier apply left and a
// world observed as NeedsOf asks.
type drawn struct {
	desired *config.Stack
	doc     *state.Document
	world   World
	// vanished are members the state records that the world lacks.
	vanished map[string][]instance.ID
}

// drawGroup draws group name: cattle or pets of 0..8, one of two
// configurations, a random update policy, health policy and drain delay.
func drawGroup(t *rapid.T, name string) *config.Group {
	size := rapid.IntRange(0, 8).Draw(t, name+".size")
	g := cattleGroup(name, size, rapid.SampledFrom([]string{"v1", "v2"}).Draw(t, name+".config"))
	if rapid.Bool().Draw(t, name+".pets") {
		g.Size = nil
		for i := range size {
			g.LogicalIDs = append(g.LogicalIDs, fmt.Sprintf("l%d", i))
		}
	}
	g.Update = config.UpdatePolicy{MaxParallel: rapid.IntRange(0, 3).Draw(t, name+".max_parallel"),
		MaxUnavailable: rapid.IntRange(0, 3).Draw(t, name+".max_unavailable")}
	g.Health.ReplaceUnhealthy = rapid.Bool().Draw(t, name+".replace_unhealthy")
	g.DrainDelay = config.Duration(time.Duration(rapid.IntRange(0, 3).Draw(t, name+".drain_delay")) * time.Second)
	return g
}

// drawMembers draws up to 8 members of g: of either configuration or
// none, running, pending or terminating, of any health; pets with logical
// IDs wanted or not, some twice.
func drawMembers(t *rapid.T, g *config.Group) []group.Member {
	hashes := []string{g.ConfigHash(), cattleGroup(g.Name, 0, "v1").ConfigHash(), cattleGroup(g.Name, 0, "v2").ConfigHash(), ""}
	if g.Size == nil {
		hashes = append(hashes, petGroup(g.Name).ConfigHash())
	}
	n := rapid.IntRange(0, 8).Draw(t, g.Name+".members")
	out := make([]group.Member, n)
	for i := range out {
		p := fmt.Sprintf("%s.m%d.", g.Name, i)
		out[i] = group.Member{ID: instance.ID(fmt.Sprintf("%s-%d", g.Name, i)),
			ConfigHash: rapid.SampledFrom(hashes).Draw(t, p+"hash"),
			State:      rapid.SampledFrom([]instance.State{instance.StateRunning, instance.StateRunning, instance.StatePending, instance.StateTerminating}).Draw(t, p+"state"),
			Health:     rapid.SampledFrom([]flavor.Health{flavor.HealthHealthy, flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown}).Draw(t, p+"health"),
			Address:    rapid.SampledFrom([]string{"", "10.0.0.1:80", "10.0.0.2:80"}).Draw(t, p+"address")}
		if g.Size == nil {
			out[i].LogicalID = rapid.SampledFrom([]string{"l0", "l1", "l2", "l3", "l9", ""}).Draw(t, p+"logical_id")
		}
	}
	return out
}

// drawStacks draws the desired stack and the stack as applied: the same
// groups (some not applied yet) and perhaps a group "old" the desired one
// dropped; an ingress over some groups on lb1 and lb2 (as applied, perhaps
// on lb3 too, which is then released); an enrollment of one group (as
// applied, perhaps at another target).
func drawStacks(t *rapid.T) (desired, applied *config.Stack) {
	desired, applied = stackOf(), stackOf()
	for i := range rapid.IntRange(1, 3).Draw(t, "groups") {
		g := drawGroup(t, fmt.Sprintf("g%d", i))
		desired.Groups = append(desired.Groups, g)
		if rapid.IntRange(0, 4).Draw(t, g.Name+".applied") > 0 {
			applied.Groups = append(applied.Groups, g)
		}
	}
	if rapid.Bool().Draw(t, "old") {
		applied.Groups = append(applied.Groups, drawGroup(t, "old"))
	}
	names := func(st *config.Stack) []string {
		var out []string
		for _, g := range st.Groups {
			out = append(out, g.Name)
		}
		return out
	}
	if rapid.Bool().Draw(t, "ingress") {
		lbs := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"lb1", "lb2"}), 1, 2, rapid.ID[string]).Draw(t, "lbs")
		groups := rapid.SliceOfNDistinct(rapid.SampledFrom(names(desired)), 1, -1, rapid.ID[string]).Draw(t, "ingress.groups")
		withIngress(desired, "test.com", lbs, groups...)
		if len(applied.Groups) > 0 && rapid.Bool().Draw(t, "ingress.applied") {
			if rapid.Bool().Draw(t, "ingress.lb3") {
				lbs = append(lbs, "lb3")
			}
			withIngress(applied, "test.com", lbs, rapid.SliceOfNDistinct(rapid.SampledFrom(names(applied)), 1, -1, rapid.ID[string]).Draw(t, "applied.groups")...)
		}
	}
	if rapid.Bool().Draw(t, "enrollment") {
		withEnrollment(desired, "nfs", rapid.SampledFrom(names(desired)).Draw(t, "enrollment.source"))
		desired.Enrollments[0].Target.Provider = rapid.SampledFrom([]string{nfsProvider, "nfs2"}).Draw(t, "enrollment.target")
		if len(applied.Groups) > 0 && rapid.Bool().Draw(t, "enrollment.applied") {
			withEnrollment(applied, "nfs", rapid.SampledFrom(names(applied)).Draw(t, "applied.source"))
			applied.Enrollments[0].Target.Provider = rapid.SampledFrom([]string{nfsProvider, "nfs2"}).Draw(t, "applied.target")
		}
	}
	return desired, applied
}

// drawCase draws a desired stack, the state as applied (records that may
// be off, groups freed or with a stopped update) and a world observed as
// NeedsOf asks: members of every group it lists, and every load balancer
// and target it lists with random routes, backends and authorizations.
func drawCase(t *rapid.T) drawn {
	desired, applied := drawStacks(t)
	d := drawn{desired: desired, doc: state.NewDocument(), vanished: map[string][]instance.ID{}}
	d.doc.Serial = 3
	if len(applied.Groups) > 0 || rapid.Bool().Draw(t, "stored") {
		d.doc.Stack = applied
	}
	if rapid.IntRange(0, 5).Draw(t, "ingress.freed") == 0 {
		d.doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Freed: true}}
	}
	if rapid.IntRange(0, 5).Draw(t, "enrollment.freed") == 0 {
		d.doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Freed: true}}
	}
	members := map[string][]group.Member{}
	for _, g := range applied.Groups {
		st := d.doc.Group(g.Name)
		st.Freed = rapid.IntRange(0, 9).Draw(t, g.Name+".freed") == 0
		st.UpdateStopped = rapid.IntRange(0, 5).Draw(t, g.Name+".stopped") == 0
	}
	for _, g := range append(slices.Clone(desired.Groups), applied.Group("old")) {
		if g == nil {
			continue
		}
		members[g.Name] = drawMembers(t, g)
		for i := range rapid.IntRange(0, 2).Draw(t, g.Name+".vanished") {
			d.vanished[g.Name] = append(d.vanished[g.Name], instance.ID(fmt.Sprintf("%s-v%d", g.Name, i)))
		}
		if st := d.doc.Groups[g.Name]; st != nil && rapid.Bool().Draw(t, g.Name+".recorded") {
			st.Instances = recordOf(group.Live(members[g.Name]))
			for _, id := range d.vanished[g.Name] {
				st.Instances = append(st.Instances, state.Instance{ID: string(id)})
			}
		}
	}
	needs := NeedsOf(desired, d.doc, Scope{})
	d.world = World{Members: map[string][]group.Member{}, LoadBalancers: map[string]LoadBalancerView{}, Authorizers: map[string]AuthorizerView{}}
	for name := range needs.Groups {
		if ms, ok := members[name]; ok {
			d.world.Members[name] = ms
		}
	}
	for _, lb := range needs.LoadBalancers {
		d.world.LoadBalancers[LBKey(lb.Provider, lb.Name)] = drawLB(t, lb.Name, desired, applied, members, d.vanished)
	}
	for _, target := range needs.Targets {
		d.world.Authorizers[TargetKey(target.Provider, target.Type)] = drawAuthorizer(t, target, members, d.vanished)
	}
	return d
}

// drawLB draws what load balancer lb lists: some of the routes either
// stack wants of it, perhaps another, and backends for some members of
// any group (at their address or another) and some vanished ones.
func drawLB(t *rapid.T, lb string, desired, applied *config.Stack, members map[string][]group.Member, vanished map[string][]instance.ID) LoadBalancerView {
	var v LoadBalancerView
	wanted := append(ingress.Wanted(lb, desired.Ingresses).Routes, ingress.Wanted(lb, applied.Ingresses).Routes...)
	for i, r := range wanted {
		switch rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("%s.route%d", lb, i)) {
		case 1:
			v.Routes = append(v.Routes, r)
		case 2:
			r.Certificate = "old-certificate" // republished
			v.Routes = append(v.Routes, r)
		}
	}
	if rapid.IntRange(0, 3).Draw(t, lb+".stray_route") == 0 {
		v.Routes = append(v.Routes, loadbalancer.Route{LoadBalancerPort: 9000, Port: 9000, Protocol: "tcp", LoadBalancerProtocol: "tcp"})
	}
	for _, name := range sortedKeys(members) {
		for _, m := range members[name] {
			switch rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("%s.%s", lb, m.ID)) {
			case 1, 2:
				v.Backends = append(v.Backends, loadbalancer.Backend{ID: m.ID, Address: m.Address})
			case 3:
				v.Backends = append(v.Backends, loadbalancer.Backend{ID: m.ID, Address: "10.9.9.9:80"})
			}
		}
		for _, id := range vanished[name] {
			if rapid.Bool().Draw(t, fmt.Sprintf("%s.%s", lb, id)) {
				v.Backends = append(v.Backends, loadbalancer.Backend{ID: id})
			}
		}
	}
	return v
}

// drawAuthorizer draws what target lists: for members of any group and
// vanished ones, nothing, an up-to-date authorization, a stale one or two.
func drawAuthorizer(t *rapid.T, target config.EnrollmentTarget, members map[string][]group.Member, vanished map[string][]instance.ID) AuthorizerView {
	var v AuthorizerView
	e := &config.Enrollment{Name: "nfs", Target: nfsTarget()}
	add := func(m group.Member, key string) {
		n := len(v.Authorizations)
		switch rapid.IntRange(0, 4).Draw(t, key) {
		case 1, 2:
			v.Authorizations = append(v.Authorizations, authorizations(t, e, []group.Member{{ID: m.ID, State: instance.StateRunning, Address: m.Address}})...)
		case 3:
			a := enrollment.Authorization("nfs", m, json.RawMessage(`{"host":"stale"}`))
			v.Authorizations = append(v.Authorizations, a)
		case 4:
			v.Authorizations = append(v.Authorizations, authorizations(t, e, []group.Member{{ID: m.ID, State: instance.StateRunning, Address: m.Address}})...)
			v.Authorizations = append(v.Authorizations, enrollment.Authorization("nfs", m, json.RawMessage(`{}`)))
		}
		for i := n; i < len(v.Authorizations); i++ {
			v.Authorizations[i].ID = fmt.Sprintf("%s-%s-%d", target.Provider, m.ID, i)
			if m.LogicalID != "" {
				v.Authorizations[i].Tags[tags.LogicalID] = m.LogicalID
			}
		}
	}
	for _, name := range sortedKeys(members) {
		for _, m := range members[name] {
			add(m, fmt.Sprintf("%s.%s", target.Provider, m.ID))
		}
		for _, id := range vanished[name] {
			add(group.Member{ID: id}, fmt.Sprintf("%s.%s", target.Provider, id))
		}
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
