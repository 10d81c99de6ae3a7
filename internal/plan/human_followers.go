package plan

import (
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// routeText is a route in plan lines: "80 https -> 80 http (certificate c)".
func routeText(r loadbalancer.Route) string {
	s := fmt.Sprintf("%d %s -> %d %s", r.LoadBalancerPort, strings.ToLower(string(r.LoadBalancerProtocol)),
		r.Port, strings.ToLower(string(r.Protocol)))
	if r.Certificate != "" {
		s += " (certificate " + r.Certificate + ")"
	}
	return s
}

// followers writes the ingress and enrollment blocks.
func (r *human) followers(p *Plan) {
	for _, c := range p.Ingresses {
		steps := r.byObject[Address(KindIngress, c.Ingress)]
		switch {
		case c.Action == ActionFree:
			r.printf("  # ingress.%s is free and not in the stack: its load balancers are left untouched\n\n", c.Ingress)
		case c.Action == ActionUnknown:
		case c.Action.IsChange() || len(steps) > 0 || len(c.Held) > 0:
			r.ingress(c, steps)
		}
	}
	for _, c := range p.Enrollments {
		steps := r.byObject[Address(KindEnrollment, c.Enrollment)]
		switch {
		case c.Action == ActionFree:
			r.printf("  # enrollment.%s is free and not in the stack: its authorizations are left untouched\n\n", c.Enrollment)
		case c.Action == ActionUnknown:
		case c.Action.IsChange() || len(steps) > 0 || c.Deferred > 0 || c.Held:
			r.enrollment(c, steps)
		}
	}
}

// lbTally is what an ingress does on one load balancer.
type lbTally struct {
	routes                     []string // route lines, with their symbols
	check                      *int
	register, made, deregister int
}

func (r *human) ingress(c IngressChange, steps []*Step) {
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
	var order []string
	tally := map[string]*lbTally{}
	for _, s := range steps {
		t := tally[s.LoadBalancer]
		if t == nil {
			t = &lbTally{}
			tally[s.LoadBalancer] = t
			order = append(order, s.LoadBalancer)
		}
		switch s.Kind {
		case StepPublish:
			t.routes = append(t.routes, "+\x00"+routeText(*s.Route))
		case StepRepublish:
			t.routes = append(t.routes, "~\x00"+routeText(*s.OldRoute)+" => "+routeText(*s.Route))
		case StepUnpublish:
			t.routes = append(t.routes, "-\x00"+routeText(*s.Route))
		case StepHealthCheck:
			port := s.HealthCheck.BackendPort
			t.check = &port
		case StepRegister:
			if s.Made != 0 {
				t.made++
			} else {
				t.register++
			}
		case StepDeregister:
			t.deregister++
		}
	}
	for _, lb := range order {
		t := tally[lb]
		for _, line := range t.routes {
			sym, text, _ := strings.Cut(line, "\x00")
			r.attr(sym, "route %s:%s", lb, text)
		}
		if t.check != nil {
			r.attr("~", "%s health check on backend port %d", lb, *t.check)
		}
		if t.register > 0 {
			r.attr("+", "%s on %s", plural(t.register, "backend"), lb)
		}
		if t.made > 0 {
			r.attr("+", "%s on %s for new instances, once they run", plural(t.made, "backend"), lb)
		}
		if t.deregister > 0 {
			r.attr("-", "%s on %s", plural(t.deregister, "backend"), lb)
		}
	}
	for _, lb := range c.Held {
		r.printf("      # %s: backends left as they are (group membership unknown)\n", lb)
	}
	if len(c.Released) > 0 && c.Action != ActionDestroy {
		r.printf("      # %s no longer in the ingress: what it published and registered there is taken down\n",
			strings.Join(c.Released, ", "))
	}
	if len(c.Pending) > 0 {
		r.printf("      # %s: an earlier apply could not finish taking it down; finished now\n", strings.Join(c.Pending, ", "))
	}
	r.printf("    }\n\n")
}

func (r *human) enrollment(c EnrollmentChange, steps []*Step) {
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
	for _, st := range c.Settings {
		r.attr("~", "%s = %s -> %s", st.Attribute, st.Old, st.New)
	}
	var authorize, fresh, revoke int
	revokedAt := map[string]int{}
	var targets []string
	for _, s := range steps {
		switch s.Kind {
		case StepAuthorize:
			if s.Made != 0 {
				fresh++
			} else {
				authorize++
			}
		case StepRevoke:
			where := s.Provider + " " + fmt.Sprintf("%q", s.TargetType)
			if revokedAt[where] == 0 {
				targets = append(targets, where)
			}
			revokedAt[where]++
			revoke++
		}
	}
	if authorize > 0 {
		r.attr("+", "%s", plural(authorize, "authorization"))
	}
	if fresh > 0 {
		r.attr("+", "%s for new instances, once they run", plural(fresh, "authorization"))
	}
	single := len(targets) == 1 && c.Retarget == "" && len(c.Pending) == 0
	for _, where := range targets {
		if single {
			r.attr("-", "%s revoked", plural(revokedAt[where], "authorization"))
		} else {
			r.attr("-", "%s revoked on %s", plural(revokedAt[where], "authorization"), where)
		}
	}
	if c.Retarget != "" {
		r.printf("      # the target changed from %s: what was made there is revoked once the new target has it\n", c.Retarget)
	}
	if len(c.Pending) > 0 {
		r.printf("      # %s: an earlier apply could not finish revoking there; finished now\n", strings.Join(c.Pending, ", "))
	}
	if n := len(c.Failed); n > 0 {
		r.printf("      # %s cannot be rendered and keep what they have\n", plural(n, "member"))
	}
	if c.Deferred > 0 {
		r.printf("      # %s of members that left kept until their replacements run\n", plural(c.Deferred, "authorization"))
	}
	if c.Held {
		r.printf("      # authorizations left as they are (group membership unknown)\n")
	}
	r.printf("    }\n\n")
}

// warnings warns of objects that could not be observed.
func (r *human) warnings(p *Plan) {
	for _, o := range p.Autoscale {
		r.printf("\n%s %s.\n", r.bold("Note:"), o.Note)
	}
	for _, g := range p.Groups {
		if g.Action == ActionUnknown {
			r.printf("\n%s group %q could not be observed\n\n  %s\n\nIts changes are not part of this plan.\n",
				r.paint(yellow, "Warning:"), g.Group, g.Error)
		}
	}
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
