package plan

import (
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// World is what the caller observed: the groups' members, the load
// balancers' routes and backends, the authorizers' authorizations. Planning
// is pure: nothing here calls a provider.
type World struct {
	// Members of each group by group name, as group.MembersFromDescriptions
	// returns them. A group that is absent has no members.
	Members map[string][]group.Member
	// Instances are the descriptions the members came from, by group, for
	// rendering enrollment properties (member.properties needs them listed
	// with properties); a group without them renders from its members.
	Instances map[string][]instance.Description
	// Failed holds the groups whose observation failed, with the error.
	Failed map[string]error
	// LoadBalancers are the load balancers observed, by LBKey.
	LoadBalancers map[string]LoadBalancerView
	// Authorizers are the enrollment targets observed, by TargetKey.
	Authorizers map[string]AuthorizerView
	// Rendered, when set, remembers the authorization properties rendered
	// for members across plans (it is not observed: a memo the caller
	// keeps).
	Rendered *RenderMemo
}

// LoadBalancerView is one load balancer as it listed itself.
type LoadBalancerView struct {
	Routes   []loadbalancer.Route
	Backends []loadbalancer.Backend
	// Err is why it could not be listed.
	Err error
}

// AuthorizerView is one enrollment target as it listed itself.
type AuthorizerView struct {
	Authorizations []nfs.Authorization
	Err            error
}

// LBKey identifies a load balancer: the loadbalancer block's name at one
// provider (a block moved to another provider is another load balancer).
func LBKey(provider, name string) string { return provider + "\x00" + name }

// TargetKey identifies an enrollment target: a type at a provider.
func TargetKey(provider, typ string) string { return provider + "\x00" + typ }

// Scope is what a plan covers. The zero Scope covers everything: every
// group of the stack and the state, every ingress and enrollment, and
// every teardown owed.
type Scope struct {
	// Groups, when set, are the only groups planned; the ingresses and
	// enrollments that follow them are planned for their members only
	// (backends and authorizations; no route changes).
	Groups []string
	// Work, by group, replaces ApplyWork for a planned group: the caller
	// decided (a watch pass, destroy-instances).
	Work map[string]GroupWork
	// Ingresses and Enrollments, when set, are planned in full (routes and
	// every backend, every authorization), as are their teardowns when
	// they leave the stack.
	Ingresses   []string
	Enrollments []string
	// Resume are objects ("group.web") the plan manages again although
	// the state marks them freed: a verb asked to act on one explicitly
	// (destroy, commit). The intent resumes them.
	Resume []string
	// Sync plans the named ingresses and enrollments as a watch syncs
	// them: routes, backends and authorizations only, without the
	// teardowns an apply owes (released load balancers, old targets,
	// pending records), which are apply's to do and record.
	Sync bool
	// Configure are load balancers (by LBKey) whose health check is
	// configured even when no route of theirs changes: the SPI cannot read
	// a check back, so a long-lived watch configures each once.
	Configure []string
}

func (s Scope) checkedSet() map[string]bool {
	if len(s.Configure) == 0 {
		return nil
	}
	out := make(map[string]bool, len(s.Configure))
	for _, k := range s.Configure {
		out[k] = true
	}
	return out
}

// All reports whether the scope covers everything.
func (s Scope) All() bool {
	return s.Groups == nil && s.Ingresses == nil && s.Enrollments == nil
}

func (s Scope) hasGroup(name string) bool {
	return s.All() || contains(s.Groups, name)
}

// plansGroup reports whether the scope plans group name of the desired
// stack: a scoped plan leaves a freed group alone, members and followers'
// backends and authorizations alike, as it leaves freed ingresses and
// enrollments (only apply resumes what `group free` stopped).
func (s Scope) plansGroup(doc *state.Document, name string) bool {
	if !s.hasGroup(name) {
		return false
	}
	return s.All() || doc.Groups[name] == nil || !doc.Groups[name].Freed
}

func (s Scope) hasIngress(name string) bool {
	return s.All() || contains(s.Ingresses, name)
}

func (s Scope) hasEnrollment(name string) bool {
	return s.All() || contains(s.Enrollments, name)
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
