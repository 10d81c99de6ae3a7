package watch

import (
	"sync"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// A sync lists every group its followers follow, and a pass has just
// listed the group anyway; for a big group the listing is most of what an
// idle sync costs. So a pass that acted on nothing leaves its listing for
// the syncs (listings.set), and a pass that acts takes it away first
// (listings.drop, before it holds the group): its creates and destroys
// make the listing stale. A sync plans with a group's listing instead of
// listing the group again only when the loop found it current when the
// sync started (freshListings: the group's event stream open since
// before the listing, no pass of it asked for or running), and still the
// same once the sync holds the group (no pass acted since, or listed
// anew). Anything that changed the group at its provider since was
// announced by an event, which asks for a pass; what happened behind
// infrakit's back and announced nothing is what the groups' own relisting
// (relist.go) is there for. Commands that change the state make the sync
// stale, and every group dirty.

// listings are the groups' latest listings left by their passes.
type listings struct {
	mu sync.Mutex
	m  map[string]listing
}

// listing is what one pass listed of a group (without properties), and
// when the listing began.
type listing struct {
	descs []instance.Description
	at    time.Time
}

func (l *listings) set(name string, descs []instance.Description, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]listing{}
	}
	l.m[name] = listing{descs: descs, at: at}
}

func (l *listings) drop(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, name)
}

// at is when the listing of group name began (zero: there is none).
func (l *listings) at(name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[name].at
}

// take returns the listings of the groups in fresh that are still the
// ones begun at the time fresh gives.
func (l *listings) take(fresh map[string]time.Time) map[string][]instance.Description {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]instance.Description, len(fresh))
	for name, at := range fresh {
		if ls, ok := l.m[name]; ok && ls.at.Equal(at) {
			out[name] = ls.descs
		}
	}
	return out
}

// freshListings are, for a sync starting now, the groups whose listing
// by a pass is current (see above), with when it began. The loop calls it.
func (s *service) freshListings() map[string]time.Time {
	fresh := map[string]time.Time{}
	for name, g := range s.groups {
		if g.running || g.dirty || g.again || g.sub == nil {
			continue
		}
		if at := s.listings.at(name); !at.IsZero() && g.sub.live.before(at) {
			fresh[name] = at
		}
	}
	return fresh
}
