package plan

import (
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Ingresses and enrollments are planned by the caller (their previews ask
// the load balancers and authorizers what they hold, which Compute, being
// pure, does not) and added to a plan with AddControllers.
//
// Their actions reuse the group vocabulary: ActionUpdate (changes to make),
// ActionNoOp, ActionDestroy (left the stack: everything of theirs is
// unpublished, deregistered or revoked), ActionResume (freed and back in
// the stack), ActionFree (freed and out of the stack: untouched) and
// ActionUnknown (a load balancer or authorizer could not be read).
//
// A preview is made against the members observed before apply. When apply
// also changes a group they follow (FollowsGroups), the backends and
// authorizations it shows are those of the members as they are now; apply
// syncs again after the groups change, with the members it made.

// IngressChange is the plan for one ingress block.
type IngressChange struct {
	Ingress string `json:"ingress"`
	Action  Action `json:"action"`
	// LoadBalancers has one entry per load balancer the ingress names, then
	// one per load balancer of Released.
	LoadBalancers []ingress.Changes `json:"loadbalancers,omitempty"`
	// Released names the load balancers the ingress as applied named and
	// the stack's no longer does (or whose loadbalancer block moved to
	// another provider): apply takes its routes and backends off them,
	// keeping what other rules of the stack that name them want
	// (ingress.Teardown).
	Released []string `json:"released,omitempty"`
	// Pending names the load balancers of Released whose teardown an
	// earlier apply could not finish (the state records it): apply retries
	// it, and clears the record once it succeeds.
	Pending []string `json:"pending,omitempty"`
	// FollowsGroups names the groups whose members are its backends and
	// which this plan changes.
	FollowsGroups []string `json:"follows_groups,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// EnrollmentChange is the plan for one enrollment block.
type EnrollmentChange struct {
	Enrollment string             `json:"enrollment"`
	Action     Action             `json:"action"`
	Changes    enrollment.Changes `json:"changes"`
	// Retarget is set when the enrollment's target changed (another
	// provider or type): what apply revokes at the old target, before the
	// new one (Changes) is synced.
	Retarget *Retarget `json:"retarget,omitempty"`
	// Pending are old targets (of a target change, or of the enrollment
	// leaving the stack) whose revocations an earlier apply could not
	// finish (the state records them): what apply revokes there again,
	// clearing the record once it succeeds.
	Pending []Retarget `json:"pending,omitempty"`
	// FollowsGroups names the source group when this plan changes it.
	FollowsGroups []string `json:"follows_groups,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// Retarget is what an enrollment's old target loses.
type Retarget struct {
	// From is the old target (enrollment.TargetString).
	From    string             `json:"from"`
	Changes enrollment.Changes `json:"changes"`
}

// Counts of one ingress change: routes published, republished or
// unpublished; backends registered, re-addressed or deregistered.
func (c IngressChange) Counts() (routes, backends int) {
	for _, lb := range c.LoadBalancers {
		routes += len(lb.Publish) + len(lb.Republish) + len(lb.Unpublish)
		backends += len(lb.Register) + len(lb.Readdress) + len(lb.Deregister)
	}
	return routes, backends
}

// Count of one enrollment change: authorizations made, replaced or revoked
// (at the old target too, when the target changed, and at the old targets
// of pending revocations).
func (c EnrollmentChange) Count() int {
	n := len(c.Changes.Authorize) + len(c.Changes.Reauthorize) + len(c.Changes.Revoke)
	if c.Retarget != nil {
		n += len(c.Retarget.Changes.Revoke)
	}
	for _, p := range c.Pending {
		n += len(p.Changes.Revoke)
	}
	return n
}

// IsChange reports whether applying the ingress change changes anything.
func (c IngressChange) IsChange() bool {
	if c.Action == ActionDestroy || c.Action == ActionResume || c.Action == ActionCreate {
		return true
	}
	if !c.Action.IsChange() {
		return false
	}
	// A pending teardown is a change even when nothing is left to take
	// down: apply clears its record.
	r, b := c.Counts()
	return r+b > 0 || len(c.Pending) > 0
}

// IsChange reports whether applying the enrollment change changes anything.
func (c EnrollmentChange) IsChange() bool {
	if c.Action == ActionDestroy || c.Action == ActionResume || c.Action == ActionCreate {
		return true
	}
	// A changed setting (destroy_on_free, sync_interval) alone is a change:
	// apply stores it, though no authorization moves.
	// So is a pending revocation, even with nothing left to revoke: apply
	// clears its record.
	return c.Action.IsChange() && (c.Count() > 0 || len(c.Changes.Settings) > 0 || len(c.Pending) > 0)
}

// ChangedGroups are the groups whose membership this plan changes, by name.
func (p *Plan) ChangedGroups() map[string]bool {
	out := map[string]bool{}
	for _, g := range p.Groups {
		if g.Action.IsChange() && g.Action != ActionNoOp {
			out[g.Group] = true
		}
	}
	return out
}

// AddControllers puts the ingress and enrollment changes into the plan and
// counts them in its Summary.
func (p *Plan) AddControllers(ingresses []IngressChange, enrollments []EnrollmentChange) {
	p.Ingresses, p.Enrollments = ingresses, enrollments
	p.Summary.Routes, p.Summary.Backends, p.Summary.Authorizations = 0, 0, 0
	for _, c := range ingresses {
		if c.Action == ActionUnknown || c.Action == ActionFree {
			continue
		}
		r, b := c.Counts()
		p.Summary.Routes += r
		p.Summary.Backends += b
	}
	for _, c := range enrollments {
		if c.Action == ActionUnknown || c.Action == ActionFree {
			continue
		}
		p.Summary.Authorizations += c.Count()
	}
}

// controllersChange reports whether an ingress or enrollment change is planned.
func (p *Plan) controllersChange() bool {
	for _, c := range p.Ingresses {
		if c.IsChange() {
			return true
		}
	}
	for _, c := range p.Enrollments {
		if c.IsChange() {
			return true
		}
	}
	return false
}

// routeText is a route in plan lines: "80 https -> 80 http (certificate c)".
func routeText(r loadbalancer.Route) string {
	s := fmt.Sprintf("%d %s -> %d %s", r.LoadBalancerPort, strings.ToLower(string(r.LoadBalancerProtocol)),
		r.Port, strings.ToLower(string(r.Protocol)))
	if r.Certificate != "" {
		s += " (certificate " + r.Certificate + ")"
	}
	return s
}

func (r *human) ingress(c IngressChange) {
	sym, what := "~", "will be updated"
	switch c.Action {
	case ActionCreate:
		sym, what = "+", "will be created"
	case ActionDestroy:
		sym, what = "-", "will be torn down: its routes unpublished and its backends deregistered"
	case ActionResume:
		what = "is free and will be synced again"
	}
	r.printf("  # ingress.%s %s\n", c.Ingress, what)
	r.printf("%s ingress %q {\n", r.sym(sym), c.Ingress)
	for _, lb := range c.LoadBalancers {
		for _, rt := range lb.Unpublish {
			r.attr("-", "route %s:%s", lb.LoadBalancer, routeText(rt))
		}
		for _, rt := range lb.Republish {
			r.attr("~", "route %s:%s => %s", lb.LoadBalancer, routeText(rt.Old), routeText(rt.New))
		}
		for _, rt := range lb.Publish {
			r.attr("+", "route %s:%s", lb.LoadBalancer, routeText(rt))
		}
		if n := len(lb.Register); n > 0 {
			r.attr("+", "%s on %s", plural(n, "backend"), lb.LoadBalancer)
		}
		if n := len(lb.Readdress); n > 0 {
			r.attr("~", "%s re-addressed on %s", plural(n, "backend"), lb.LoadBalancer)
		}
		if n := len(lb.Deregister); n > 0 {
			r.attr("-", "%s on %s", plural(n, "backend"), lb.LoadBalancer)
		}
		if lb.BackendsHeld {
			r.printf("      # %s: backends left as they are (group membership unknown)\n", lb.LoadBalancer)
		}
	}
	if len(c.Released) > 0 && c.Action != ActionDestroy {
		r.printf("      # %s no longer in the ingress: what it published and registered there is taken down\n",
			strings.Join(c.Released, ", "))
	}
	if len(c.Pending) > 0 {
		r.printf("      # %s: an earlier apply could not finish taking it down; retried\n", strings.Join(c.Pending, ", "))
	}
	if len(c.FollowsGroups) > 0 {
		r.printf("      # backends follow the members of %s, registered once this apply has changed %s\n",
			groupList(c.FollowsGroups), itThem(len(c.FollowsGroups)))
	}
	r.printf("    }\n\n")
}

func (r *human) enrollment(c EnrollmentChange) {
	sym, what := "~", "will be updated"
	switch c.Action {
	case ActionCreate:
		sym, what = "+", "will be created"
	case ActionDestroy:
		sym, what = "-", "will be destroyed: its authorizations revoked"
	case ActionResume:
		what = "is free and will be synced again"
	}
	r.printf("  # enrollment.%s %s\n", c.Enrollment, what)
	r.printf("%s enrollment %q {\n", r.sym(sym), c.Enrollment)
	ch := c.Changes
	for _, st := range ch.Settings {
		r.attr("~", "%s = %s -> %s", st.Attribute, st.Old, st.New)
	}
	if n := len(ch.Authorize); n > 0 {
		r.attr("+", "%s", plural(n, "authorization"))
	}
	if n := len(ch.Reauthorize); n > 0 {
		r.attr("-/+", "%s replaced", plural(n, "authorization"))
	}
	if n := len(ch.Revoke); n > 0 {
		r.attr("-", "%s revoked", plural(n, "authorization"))
	}
	if c.Retarget != nil {
		if n := len(c.Retarget.Changes.Revoke); n > 0 {
			r.attr("-", "%s revoked on the old target %s", plural(n, "authorization"), c.Retarget.From)
		}
	}
	for _, p := range c.Pending {
		r.attr("-", "%s revoked on %s", plural(len(p.Changes.Revoke), "authorization"), p.From)
		r.printf("      # %s: an earlier apply could not finish revoking there; retried\n", p.From)
	}
	if n := len(ch.Failed); n > 0 {
		r.printf("      # %s cannot be rendered and keep what they have\n", plural(n, "member"))
	}
	if n := len(ch.Deferred); n > 0 {
		r.printf("      # %s of members that left kept until their replacements run\n", plural(n, "authorization"))
	}
	if len(c.FollowsGroups) > 0 {
		r.printf("      # authorizations follow the members of %s, made once this apply has changed %s\n",
			groupList(c.FollowsGroups), itThem(len(c.FollowsGroups)))
	}
	r.printf("    }\n\n")
}

func groupList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("group %q", n)
	}
	return strings.Join(q, ", ")
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// controllers writes the ingress and enrollment blocks of the human plan.
func (r *human) controllers(p *Plan) {
	for _, c := range p.Ingresses {
		switch {
		case c.Action == ActionFree:
			r.printf("  # ingress.%s is free and not in the stack: its load balancers are left untouched\n\n", c.Ingress)
		case c.IsChange() || len(c.FollowsGroups) > 0 && c.Action != ActionUnknown:
			r.ingress(c)
		}
	}
	for _, c := range p.Enrollments {
		switch {
		case c.Action == ActionFree:
			r.printf("  # enrollment.%s is free and not in the stack: its authorizations are left untouched\n\n", c.Enrollment)
		case c.IsChange() || len(c.FollowsGroups) > 0 && c.Action != ActionUnknown:
			r.enrollment(c)
		}
	}
}

// controllerSummary is the tail of the "Plan:" line when the stack has
// ingresses or enrollments ("" otherwise).
func controllerSummary(p *Plan) string {
	if len(p.Ingresses) == 0 && len(p.Enrollments) == 0 {
		return ""
	}
	return fmt.Sprintf(" %s, %s, %s to change.",
		plural(p.Summary.Routes, "route"), plural(p.Summary.Backends, "backend"), plural(p.Summary.Authorizations, "authorization"))
}

// controllerWarnings warns of ingresses and enrollments that could not be planned.
func (r *human) controllerWarnings(p *Plan) {
	for _, c := range p.Ingresses {
		if c.Action == ActionUnknown {
			r.printf("\n%s ingress %q could not be planned\n\n  %s\n", r.paint(yellow, "Warning:"), c.Ingress, c.Error)
		}
	}
	for _, c := range p.Enrollments {
		if c.Action == ActionUnknown {
			r.printf("\n%s enrollment %q could not be planned\n\n  %s\n", r.paint(yellow, "Warning:"), c.Enrollment, c.Error)
		}
	}
}
