package watch

import (
	"context"
	"slices"
	"sync"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A pass and a sync share the state lease, so they may run at once; but a
// sync must never see a group in the middle of a pass's work. A pass that
// replaces a member deregisters and revokes it, waits out the drain delay
// and destroys it: a sync listing the group meanwhile finds the member
// still running and unregistered, and registers (and authorizes) it again,
// and the pass then destroys a registered member. Nor may a sync take out
// a leaving member itself: it would do so before the pass registered the
// replacement. So a group's pass acts, and a sync of its followers
// observes and acts, each holding the group (acting.hold); and a sync
// takes the members a pass destroyed that the provider still lists as
// terminating (acting.markDestroying), as the pass does.
type acting struct {
	mu    sync.Mutex
	slots map[string]chan struct{}
	// destroying are, by group, the members this process destroyed that
	// the group's last pass found still listed, or destroyed itself.
	destroying map[string][]instance.ID
}

func (a *acting) slot(name string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.slots == nil {
		a.slots = map[string]chan struct{}{}
	}
	c := a.slots[name]
	if c == nil {
		c = make(chan struct{}, 1)
		a.slots[name] = c
	}
	return c
}

// hold waits until neither a pass nor a sync acts on any of the named
// groups and holds them all, until release is called. The groups are taken
// in name order, so two holders never wait for each other. It fails only
// when ctx ends first.
func (a *acting) hold(ctx context.Context, names []string) (release func(), err error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	held := make([]chan struct{}, 0, len(names))
	release = func() {
		for _, c := range held {
			<-c
		}
	}
	for _, name := range names {
		c := a.slot(name)
		select {
		case c <- struct{}{}:
			held = append(held, c)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// setDestroying records what the last pass of a group knows destroyed
// (nil: nothing).
func (a *acting) setDestroying(name string, ids []instance.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(ids) == 0 {
		delete(a.destroying, name)
		return
	}
	if a.destroying == nil {
		a.destroying = map[string][]instance.ID{}
	}
	a.destroying[name] = ids
}

// markDestroying marks, in a sync's observation, the members that passes
// destroyed as terminating.
func (a *acting) markDestroying(world *plan.World) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, ids := range a.destroying {
		members, ok := world.Members[name]
		if !ok {
			continue
		}
		marked := slices.Clone(members)
		for i := range marked {
			if slices.Contains(ids, marked[i].ID) {
				marked[i].State = instance.StateTerminating
			}
		}
		world.Members[name] = marked
	}
}

// destroyingOf are the members a pass knows destroyed by this process:
// those its tracker expects gone that the provider still lists (Adjust
// marks them terminating), and those it destroyed.
func destroyingOf(o observation, destroyed []instance.ID) []instance.ID {
	listed := make(map[instance.ID]instance.State, len(o.members))
	for _, m := range o.members {
		listed[m.ID] = m.State
	}
	out := slices.Clone(destroyed)
	for _, m := range o.adj.Members {
		if st, ok := listed[m.ID]; ok && m.State == instance.StateTerminating && st != instance.StateTerminating {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
