package heal_test

import (
	"fmt"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/watch/heal"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The watch loop's pass for one group, against a provider listing that
// loses most of the group at once: the brake holds the replacements until
// three observations agree, then they go ahead.
func ExampleTracker() {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	size := 5
	desired := group.Desired{Size: &size, ReplaceUnhealthy: true}
	tracker := heal.NewTracker("web", heal.Policy{Grace: 30 * time.Second}, start)

	listing := func(ids ...string) []group.Member {
		var ms []group.Member
		for _, id := range ids {
			ms = append(ms, group.Member{ID: instance.ID(id), State: instance.StateRunning, Health: flavor.HealthHealthy})
		}
		return ms
	}
	observations := [][]group.Member{
		listing("a", "b", "c", "d", "e"),
		listing("a", "b"), // c, d and e vanished
		listing("a", "b"),
		listing("a", "b"),
	}
	for i, observed := range observations {
		now := start.Add(time.Duration(i) * 10 * time.Second)
		adj := tracker.Adjust(now, desired, observed)
		dec, evs := tracker.Filter(now, group.Decide(desired, adj.Members))
		for _, e := range append(adj.Events, evs...) {
			fmt.Printf("pass %d: %s: %s\n", i, e.Kind, e.Message)
		}
		fmt.Printf("pass %d: braked %v, %d to create\n", i, adj.Braked, len(dec.Create))
		// ... execute dec through the group controller, then:
		var created []group.Member
		for j := range dec.Create {
			created = append(created, group.Member{ID: instance.ID(fmt.Sprintf("n%d", j)), State: instance.StatePending})
		}
		tracker.Issued(now, created, nil)
	}
	// Output:
	// pass 0: braked false, 0 to create
	// pass 1: vanished: 3 members vanished from the provider's listing
	// pass 1: brake-engaged: 3 of 5 members look dead at once (3 gone, 0 unhealthy past grace); replacement paused until 3 consecutive observations agree
	// pass 1: braked true, 0 to create
	// pass 2: braked true, 0 to create
	// pass 3: brake-released: 3 consecutive observations agree; replacement resumes (3 gone, 0 unhealthy to replace)
	// pass 3: braked false, 3 to create
}
