package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// A member that dies keeps its load balancer backend until the ingress is
// synced, and the sync that follows a pass runs once the pass is done:
// after it has created the member's replacement, which can take seconds
// (a container, a machine). Requests the load balancer sends the dead
// backend meanwhile wait for a connection that never comes. So a pass that
// sees members leave — gone from the listing, terminating, or about to be
// destroyed by the pass itself — takes them out of the load balancers of
// the ingresses that route to the group (ingress.Controller.Deregister)
// while it creates their replacements, and the sync after the pass
// registers the replacements. It does so once the creates and destroys
// have run for deregisterGrace; a pass done sooner leaves it to that sync,
// and a pass that created and destroyed nothing (so that no sync follows
// it) does it before it ends.
//
// Only backends go early. An enrollment keeps its rule that a replacement
// is authorized before the authorization it replaces is revoked: a sync
// revokes the authorization of a member that left only once the group runs
// as many members as it wants again (for a pet, once a member with its
// logical ID runs), in the sync that authorizes the replacement; until
// then every sync holds it (enrollment.Diff's Deferred). And nothing is
// taken out on a membership the pass does not trust: a pass whose listing
// failed never gets here, and one the mass-failure brake holds (the
// listing may be a provider's glitch) leaves the backends to the sync.

// ingressRef is an ingress that routes to a group, with the provider key
// of each of its load balancers.
type ingressRef struct {
	cfg *config.Ingress
	lbs map[string]string
}

// ingressesOf are the ingresses of doc's stack that route to the group
// named, less those doc marks freed.
func ingressesOf(doc *state.Document, name string) []ingressRef {
	var out []ingressRef
	for _, in := range doc.Stack.Ingresses {
		if st := doc.Ingresses[in.Name]; st != nil && st.Freed {
			continue
		}
		ref := ingressRef{cfg: in, lbs: map[string]string{}}
		routes := false
		for _, r := range in.Rules {
			routes = routes || slices.Contains(r.Groups, name)
			if lb := doc.Stack.LoadBalancer(r.LoadBalancer); lb != nil {
				ref.lbs[r.LoadBalancer] = lb.Provider
			}
		}
		if routes {
			out = append(out, ref)
		}
	}
	return out
}

// followed reports whether an ingress or an enrollment of doc's stack
// that doc does not mark freed follows the group named.
func followed(doc *state.Document, name string) bool {
	if len(ingressesOf(doc, name)) > 0 {
		return true
	}
	for _, e := range doc.Stack.Enrollments {
		if st := doc.Enrollments[e.Name]; e.Source == name && (st == nil || !st.Freed) {
			return true
		}
	}
	return false
}

// leavingMembers are the members a pass takes out of the load balancers:
// those the state records or the provider lists that are not live in what
// the pass decides on (adjusted: gone, or terminating), and those it
// destroys. Sorted, each once.
func leavingMembers(recorded []state.Instance, listed, adjusted []group.Member, destroy []group.Destroy) []instance.ID {
	live := make(map[instance.ID]bool, len(adjusted))
	for _, m := range adjusted {
		if m.State != instance.StateTerminating {
			live[m.ID] = true
		}
	}
	var out []instance.ID
	for _, in := range recorded {
		if id := instance.ID(in.ID); !live[id] {
			out = append(out, id)
		}
	}
	for _, m := range listed {
		if !live[m.ID] {
			out = append(out, m.ID)
		}
	}
	for _, x := range destroy {
		out = append(out, x.ID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// memberKey is what the load balancers and authorizations of a live member
// depend on.
type memberKey struct {
	state   instance.State
	address string
}

// joinedMembers reports whether listed holds a live member that seen does
// not, or one whose state or address changed, and returns the live members
// of listed to remember.
func joinedMembers(seen map[instance.ID]memberKey, listed []group.Member) (bool, map[instance.ID]memberKey) {
	now := make(map[instance.ID]memberKey, len(listed))
	joined := false
	for _, m := range listed {
		if m.State == instance.StateTerminating {
			continue
		}
		k := memberKey{state: m.State, address: m.Address}
		now[m.ID] = k
		if was, ok := seen[m.ID]; !ok || was != k {
			joined = true
		}
	}
	return joined, now
}

// deregisterGrace is how long a pass's creates and destroys run before
// the pass takes leaving members out of the load balancers itself. A pass
// done within it (a process starts in tens of milliseconds) leaves them to
// the sync that follows it, which takes them out in the same round of load
// balancer calls that registers their replacements: a round of its own
// would only delay that registration (measured: 40 ms more from a process
// killed to its replacement serving). One still creating after it (a
// container, a machine: seconds) takes them out then.
const deregisterGrace = 100 * time.Millisecond

// earlyLeave is a pass's deregistration of its leaving members: armed
// when the pass starts acting, run after deregisterGrace, and finished
// (waited for, dropped or run) before the pass ends. Nil: nothing leaves.
type earlyLeave struct {
	timer *time.Timer
	run   func()
	done  chan struct{}
}

// leaveEarly arms the deregistration of leaving, members of the group
// named, from the load balancers of refs; nil when there is nothing to do.
func (s *service) leaveEarly(ctx context.Context, name string, refs []ingressRef, leaving []instance.ID, log hclog.Logger) *earlyLeave {
	if len(leaving) == 0 || len(refs) == 0 {
		return nil
	}
	return armLeave(deregisterGrace, func() { s.deregisterLeaving(ctx, name, refs, leaving, log) })
}

// armLeave runs work after grace, unless finish comes first.
func armLeave(grace time.Duration, work func()) *earlyLeave {
	e := &earlyLeave{done: make(chan struct{})}
	e.run = func() {
		defer close(e.done)
		work()
	}
	e.timer = time.AfterFunc(grace, e.run)
	return e
}

// finish is called once the pass has acted: a deregistration under way is
// waited for; one not started is dropped when the pass created or
// destroyed members (acted: the sync that follows takes them out), and
// run now otherwise (no sync follows).
func (e *earlyLeave) finish(acted bool) {
	if e == nil {
		return
	}
	if e.timer.Stop() {
		if acted {
			return
		}
		e.run()
	}
	<-e.done
}

// deregisterLeaving takes leaving, members of the group named, out of the
// load balancers of refs, and logs and records what it did. A failure is
// logged only: the sync after the pass tries again, and reports.
func (s *service) deregisterLeaving(ctx context.Context, name string, refs []ingressRef, leaving []instance.ID, log hclog.Logger) {
	for _, ref := range refs {
		if ctx.Err() != nil {
			return
		}
		ctrl, err := s.ingressController(ctx, ref)
		if err != nil {
			log.Warn("taking leaving members out of the load balancers", "ingress", ref.cfg.Name, "error", err)
			continue
		}
		done, err := ctrl.Deregister(ctx, name, leaving)
		for _, ch := range done {
			line := fmt.Sprintf("ingress %q: %s: %d backend%s deregistered (%s), leaving group %q",
				ref.cfg.Name, ch.LoadBalancer, len(ch.Deregister), pluralS(len(ch.Deregister)), backendList(ch.Deregister), name)
			s.log.Named("followers").Info(line)
			s.rec.Event(status.Event{Kind: EventSynced, Group: name, Message: line})
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("taking leaving members out of the load balancers; the sync after the pass tries again", "ingress", ref.cfg.Name, "error", err)
		}
	}
}

// ingressController is the controller of ref's ingress over the providers
// watch keeps running.
func (s *service) ingressController(ctx context.Context, ref ingressRef) (*ingress.Controller, error) {
	lbs := make(map[string]loadbalancer.L4, len(ref.lbs))
	for name, key := range ref.lbs {
		c, err := s.prov.client(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("load balancer %q: %w", name, err)
		}
		lbs[name] = c.LoadBalancer(name)
	}
	return ingress.New(ref.cfg, lbs, ingress.Options{Parallelism: s.opts.Parallelism, Logger: s.log.Named("ingress")})
}

func backendList(bs []loadbalancer.Backend) string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = string(b.ID)
	}
	return strings.Join(ids, ", ")
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
