package plan

import (
	"reflect"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// needsFixture is a stack and a state with one of everything NeedsOf reads
// for: groups web and api behind ingress test.com (lb1), enrollments nfs
// (web) and keys (api, rendering member.properties); as applied, a group
// old, lb3 in the ingress, nfs at another target and an enrollment legacy;
// teardowns pending on lb4 and at target pending-nfs; a record of a group
// lost without its configuration.
func needsFixture() (*config.Stack, *state.Document) {
	webG, api, old := cattleGroup("web", 2, "v1"), cattleGroup("api", 1, "v1"), cattleGroup("old", 1, "v1")
	desired := withEnrollment(withIngress(stackOf(webG, api), "test.com", []string{"lb1"}, "web", "api"), "nfs", "web")
	desired.Enrollments = append(desired.Enrollments, &config.Enrollment{Name: "keys", Source: "api",
		Target: config.EnrollmentTarget{Provider: "vault", Type: "key", Properties: `{ note = member.properties.note }`}})

	applied := withIngress(stackOf(webG, api, old), "test.com", []string{"lb1"}, "web", "api")
	applied.Ingresses[0].Rules = append(applied.Ingresses[0].Rules, config.Rule{LoadBalancer: "lb3", Groups: []string{"old"}, Routes: []config.Route{route(81)}})
	applied.LoadBalancers = append(applied.LoadBalancers, &config.LoadBalancer{Name: "lb3", Provider: "simulator"})
	applied.Enrollments = []*config.Enrollment{
		{Name: "nfs", Source: "web", Target: config.EnrollmentTarget{Provider: "older-nfs", Type: nfsType}},
		{Name: "legacy", Source: "old", Target: config.EnrollmentTarget{Provider: "legacy-nfs", Type: nfsType}},
	}
	doc := storedAs(applied, nil)
	doc.Groups["lost"] = &state.GroupStatus{}
	lb4 := &config.Stack{Name: "mystack", LoadBalancers: []*config.LoadBalancer{{Name: "lb4", Provider: "simulator"}},
		Ingresses: []*config.Ingress{{Name: "test.com", Rules: []config.Rule{{LoadBalancer: "lb4", Groups: []string{"web"}}}}}}
	doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Pending: []*config.Stack{lb4}}}
	pending := &config.Stack{Name: "mystack", Enrollments: []*config.Enrollment{
		{Name: "nfs", Source: "web", Target: config.EnrollmentTarget{Provider: "pending-nfs", Type: nfsType}}}}
	doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Pending: []*config.Stack{pending}}}
	return desired, doc
}

// needSummary is a Needs by names: each group's flags and where its
// configuration came from, the load balancers and the target providers.
type needSummary struct {
	groups  map[string]string
	lbs     []string
	targets []string
}

func summarize(n Needs) needSummary {
	s := needSummary{groups: map[string]string{}}
	for name, g := range n.Groups {
		flags := ""
		for _, f := range []struct {
			on   bool
			flag string
		}{{g.Planned, "planned "}, {g.Desired, "desired "}, {g.Properties, "properties "}, {g.Config == nil, "no-config "}} {
			if f.on {
				flags += f.flag
			}
		}
		s.groups[name] = flags
		if g.Config != nil && g.Config.Name != name {
			s.groups[name] += "wrong-config"
		}
	}
	for _, lb := range n.LoadBalancers {
		s.lbs = append(s.lbs, lb.Name)
	}
	for _, t := range n.Targets {
		s.targets = append(s.targets, t.Provider)
	}
	slices.Sort(s.lbs)
	slices.Sort(s.targets)
	return s
}

func TestNeedsOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope Scope
		edit  func(*state.Document)
		want  needSummary
	}{
		{name: "a full plan reads every group, load balancer and target, teardowns' included",
			want: needSummary{
				groups: map[string]string{"web": "planned desired ", "api": "planned desired properties ",
					"old": "planned ", "lost": "planned no-config "},
				lbs:     []string{"lb1", "lb3", "lb4"},
				targets: []string{"legacy-nfs", "older-nfs", "pending-nfs", "simulator.nfs-auth", "vault"}}},
		{name: "a plan of one group reads it and its followers' load balancers and targets",
			scope: Scope{Groups: []string{"web"}},
			want: needSummary{groups: map[string]string{"web": "planned desired "},
				lbs: []string{"lb1"}, targets: []string{"simulator.nfs-auth"}}},
		{name: "a plan of a group the stack dropped reads it alone",
			scope: Scope{Groups: []string{"old"}},
			want:  needSummary{groups: map[string]string{"old": "planned "}}},
		{name: "a plan of a freed group reads nothing of it",
			scope: Scope{Groups: []string{"web"}},
			edit:  func(doc *state.Document) { doc.Groups["web"].Freed = true },
			want:  needSummary{groups: map[string]string{}}},
		{name: "a sync reads the followers' groups unplanned, and no teardown",
			scope: Scope{Ingresses: []string{"test.com"}, Enrollments: []string{"nfs"}, Sync: true},
			want: needSummary{groups: map[string]string{"web": "desired ", "api": "desired "},
				lbs: []string{"lb1"}, targets: []string{"simulator.nfs-auth"}}},
		{name: "a plan of an ingress reads its teardowns too",
			scope: Scope{Ingresses: []string{"test.com"}},
			want: needSummary{groups: map[string]string{"web": "desired ", "api": "desired "},
				lbs: []string{"lb1", "lb3", "lb4"}}},
		{name: "a plan of an enrollment reads its old and pending targets",
			scope: Scope{Enrollments: []string{"nfs"}},
			want: needSummary{groups: map[string]string{"web": "desired "},
				targets: []string{"older-nfs", "pending-nfs", "simulator.nfs-auth"}}},
		{name: "a plan of an enrollment that left reads its target",
			scope: Scope{Enrollments: []string{"legacy"}},
			want:  needSummary{groups: map[string]string{}, targets: []string{"legacy-nfs"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired, doc := needsFixture()
			if tc.edit != nil {
				tc.edit(doc)
			}
			if got := summarize(NeedsOf(desired, doc, tc.scope)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NeedsOf =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// What NeedsOf lists is enough: a plan of a world holding just that (each
// load balancer and target empty, each group without members) finds every
// object observed.
func TestNeedsOfIsEnoughForCompute(t *testing.T) {
	for _, scope := range []Scope{{}, {Groups: []string{"web"}}, {Groups: []string{"old"}},
		{Ingresses: []string{"test.com"}, Enrollments: []string{"nfs"}, Sync: true},
		{Ingresses: []string{"test.com"}}, {Enrollments: []string{"nfs", "legacy"}}} {
		desired, doc := needsFixture()
		n := NeedsOf(desired, doc, scope)
		w := World{LoadBalancers: map[string]LoadBalancerView{}, Authorizers: map[string]AuthorizerView{}}
		for _, lb := range n.LoadBalancers {
			w.LoadBalancers[LBKey(lb.Provider, lb.Name)] = LoadBalancerView{}
		}
		for _, target := range n.Targets {
			w.Authorizers[TargetKey(target.Provider, target.Type)] = AuthorizerView{}
		}
		p := compute(t, desired, doc, w, scope)
		var unknown []string
		for _, u := range p.Unknown() {
			if u != `group "lost": group "lost" is in the state but its configuration is not, so its provider is unknown` {
				unknown = append(unknown, u)
			}
		}
		if len(unknown) > 0 {
			t.Errorf("scope %+v: %v", scope, unknown)
		}
	}
}
