package watch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// A heal's replacement, running as soon as it is made, is registered and
// authorized by the group's passes (the healing pass itself, which looks
// once for its new members), not left to the sync after them: the
// registration and the authorization are reported with the group, and no
// sync reports before them.
func TestHealRegisteredByThePasses(t *testing.T) {
	t.Parallel()
	w, v, ids, r := startSettledWith(t, slowSyncStack)
	now := removeAndReplaced(t, w, ids, ids[0])
	testwait.For(t, 20*time.Second, "the backends and authorizations equal to the members", func() bool {
		return slices.Equal(v.backends(), now) && slices.Equal(v.authorized(), now)
	})
	var evs []status.Event
	var created, registered, authorized int
	testwait.For(t, 10*time.Second, "the events of the heal", func() bool {
		evs = r.events()
		created = eventIndex(evs, 0, func(e status.Event) bool { return e.Kind == status.EventCreated })
		registered = eventIndex(evs, max(created, 0), func(e status.Event) bool {
			return e.Kind == EventSynced && (strings.Contains(e.Message, "backend registered") || strings.Contains(e.Message, "backends registered"))
		})
		authorized = eventIndex(evs, max(created, 0), func(e status.Event) bool {
			return e.Kind == EventSynced && strings.Contains(e.Message, "authorization made")
		})
		return created >= 0 && registered >= 0 && authorized >= 0
	})
	for _, i := range []int{registered, authorized} {
		if evs[i].Group != "web" {
			t.Errorf("%q was reported by a sync, not by the group's pass", evs[i].Message)
		}
	}
	for _, e := range evs[created+1 : max(registered, authorized)] {
		if e.Kind == EventSynced && e.Group == "" {
			t.Errorf("a sync reported before the passes registered the replacement: %s", e.Message)
		}
	}
}

// removeAndReplaced removes victim, one of the members ids, and returns
// the members once a replacement has taken its place.
func removeAndReplaced(t *testing.T, w *workdir, ids []string, victim string) []string {
	t.Helper()
	w.removeInstance(victim)
	var now []string
	testwait.For(t, 10*time.Second, "a replacement", func() bool {
		now = instanceIDs(w.instances())
		return len(now) == len(ids) && !slices.Contains(now, victim)
	})
	return now
}
