package plan

import (
	"fmt"
	"slices"

	"github.com/infrakit/infrakit/sdk/instance"
)

// builder assembles a plan's steps. Steps are added in the order their
// objects are planned (groups, then the ingresses and enrollments that
// follow them, then teardowns); dependencies found later are added to
// steps made earlier (a leaving member's drain waits for deregistrations
// decided when its ingress is planned), so a step is final only once
// finish has run.
type builder struct {
	steps []Step
	// intent collects the state changes the first step writes.
	intent []StateChange
	// leaving are the members this plan takes away, by group and ID.
	leaving map[string]map[instance.ID]*leave
	// arrivals are the members this plan brings, by group: provisioned,
	// or (a watch finishing a replacement) already there.
	arrivals map[string][]*arrival
	// registered and deregistered index the backend steps by load balancer
	// key and instance, so that no backend is registered or deregistered
	// twice; revoked indexes revocations by target key and authorization
	// ID, authorized authorizations by enrollment and member.
	registered   map[backendKey]StepID
	deregistered map[backendKey]StepID
	unpublished  map[routeKey]StepID
	revoked      map[authKey]StepID
	authorized   map[authKey]StepID
	// awaits are the awaits of pending members, by group and ID, and
	// providers the instance provider of each group (what they call).
	awaits    map[string]StepID
	providers map[string]string
	// links are dependencies added once every step is known: from waits
	// for the steps to returns when finish runs.
	links []link
}

type backendKey struct {
	lb string // LBKey
	id instance.ID
	// made keys a backend of a member the plan provisions.
	made StepID
}

type authKey struct{ where, id string }

type routeKey struct {
	lb   string // LBKey
	port int
}

// leave is a member the plan takes away.
type leave struct {
	group string
	id    instance.ID
	pet   bool
	// drain and destroy are its steps (zero for a member that is gone
	// already: only its backends and authorizations are taken away).
	drain, destroy StepID
	// by is the member that replaces it, if any.
	by *arrival
	// gates are what taking anything away from it waits for: the batch
	// before its own, in a rolling update (a pet's backends and
	// authorizations must not go before the pets of that batch serve).
	gates []func() []StepID
}

// arrival is a member the plan brings.
type arrival struct {
	group     string
	logicalID string
	// provision and await are its steps; zero for a member that exists.
	provision, await StepID
	id               instance.ID
	// replaces is the member it takes the place of, if any.
	replaces *leave
	// ready are the steps after which it serves: registered and
	// authorized (its await when it has no followers).
	ready []StepID
}

// running is the step after which the member an arrival provisions is
// listed running, with its address: what a step acting on it for a load
// balancer or an enrollment waits for. It is the await; an arrival that
// nothing was known to follow has none, and then its provision is the
// least such a step must wait for.
func (a *arrival) running() StepID {
	if a.await != 0 {
		return a.await
	}
	return a.provision
}

type link struct {
	from StepID
	to   func() []StepID
}

func newBuilder() *builder {
	return &builder{
		leaving:      map[string]map[instance.ID]*leave{},
		arrivals:     map[string][]*arrival{},
		registered:   map[backendKey]StepID{},
		deregistered: map[backendKey]StepID{},
		unpublished:  map[routeKey]StepID{},
		revoked:      map[authKey]StepID{},
		authorized:   map[authKey]StepID{},
		awaits:       map[string]StepID{},
		providers:    map[string]string{},
	}
}

// add appends s and returns its ID.
func (b *builder) add(s Step) StepID {
	if len(b.steps) == cap(b.steps) {
		// Doubling: append grows a slice this large by a quarter, and a
		// plan of 10,000 members (~37,000 steps of ~300 bytes) was
		// copied some five times over while it was built.
		b.steps = slices.Grow(b.steps, max(len(b.steps), 64))
	}
	s.ID = StepID(len(b.steps) + 1)
	b.steps = append(b.steps, s)
	return s.ID
}

// after makes step id wait for deps (zero IDs are ignored).
func (b *builder) after(id StepID, deps ...StepID) {
	if id == 0 {
		return
	}
	s := &b.steps[id-1]
	for _, d := range deps {
		if d != 0 && d != id && !slices.Contains(s.After, d) {
			s.After = append(s.After, d)
		}
	}
}

// later makes from wait, once every step is known, for what to returns.
func (b *builder) later(from StepID, to func() []StepID) {
	if from != 0 {
		b.links = append(b.links, link{from: from, to: to})
	}
}

// leavingMember is the leave of a member, if the plan takes it away.
func (b *builder) leavingMember(group string, id instance.ID) *leave {
	return b.leaving[group][id]
}

// leaverOf is the leave of member id of group g or, when g does not take
// it away, of any other group: the members of a group that left the stack
// are members of no group its followers now name, yet they too must be
// deregistered and revoked before they are drained.
func (b *builder) leaverOf(g string, id instance.ID) *leave {
	if l := b.leaving[g][id]; l != nil {
		return l
	}
	for _, m := range b.leaving {
		if l := m[id]; l != nil {
			return l
		}
	}
	return nil
}

func (b *builder) addLeave(l *leave) {
	if b.leaving[l.group] == nil {
		b.leaving[l.group] = map[instance.ID]*leave{}
	}
	b.leaving[l.group][l.id] = l
}

// finish resolves the links, puts the intent first (when there is one)
// with every step that waits for nothing after it, and returns the steps.
func (b *builder) finish() []Step {
	for _, l := range b.links {
		b.after(l.from, l.to()...)
	}
	if len(b.steps) == 0 && len(b.intent) == 0 {
		return nil
	}
	if len(b.intent) == 0 {
		return b.steps
	}
	// The intent becomes step 1: every ID moves up by one.
	out := make([]Step, 0, len(b.steps)+1)
	out = append(out, Step{ID: 1, Kind: StepRecord, Object: "state", Changes: b.intent})
	for _, s := range b.steps {
		s.ID++
		if s.Made != 0 {
			s.Made++
		}
		if s.Awaited != 0 {
			s.Awaited++
		}
		if len(s.After) == 0 {
			s.After = []StepID{1}
		} else {
			for i := range s.After {
				s.After[i]++
			}
		}
		out = append(out, s)
	}
	return out
}

// Check verifies that steps form a plan the executor can run: IDs in
// order, dependencies on steps that exist, no cycle, and every Made
// naming a provision. It is linear in steps and dependencies, and guards
// plan files.
func Check(steps []Step) error {
	for i, s := range steps {
		if s.ID != StepID(i+1) {
			return fmt.Errorf("step %d has ID %d", i+1, s.ID)
		}
		for _, d := range s.After {
			if d < 1 || int(d) > len(steps) || d == s.ID {
				return fmt.Errorf("step %d waits for step %d, which is not in the plan", s.ID, d)
			}
		}
		if s.Made != 0 {
			if s.Made < 1 || int(s.Made) > len(steps) || steps[s.Made-1].Kind != StepProvision {
				return fmt.Errorf("step %d acts on the instance of step %d, which provisions nothing", s.ID, s.Made)
			}
		}
		if s.Awaited != 0 {
			if s.Awaited < 1 || int(s.Awaited) > len(steps) || steps[s.Awaited-1].Kind != StepAwait || !slices.Contains(s.After, s.Awaited) {
				return fmt.Errorf("step %d takes its instance from step %d, which is no await it waits for", s.ID, s.Awaited)
			}
		}
	}
	// Kahn's algorithm: every step must become ready.
	indeg := make([]int, len(steps))
	next := make([][]StepID, len(steps))
	for _, s := range steps {
		for _, d := range s.After {
			indeg[s.ID-1]++
			next[d-1] = append(next[d-1], s.ID)
		}
	}
	queue := make([]StepID, 0, len(steps))
	for i, n := range indeg {
		if n == 0 {
			queue = append(queue, StepID(i+1))
		}
	}
	seen := 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		seen++
		for _, n := range next[id-1] {
			if indeg[n-1]--; indeg[n-1] == 0 {
				queue = append(queue, n)
			}
		}
	}
	if seen != len(steps) {
		return fmt.Errorf("the steps wait for each other in a cycle (%d of %d can run)", seen, len(steps))
	}
	return nil
}
