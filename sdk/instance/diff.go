package instance

import (
	"maps"
	"slices"
)

// Diff is the events that turn the snapshot prev into next, sorted by ID:
// EventGone for each ID only prev has, EventChanged for each ID only next
// has or whose description differs in what a Watcher reports (address,
// state, tags, logical ID). Providers whose Watch compares successive
// listings share it, so every one reports a change the same way.
func Diff(prev, next map[ID]Description) []Event {
	ids := slices.Collect(maps.Keys(next))
	for id := range prev {
		if _, ok := next[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var evs []Event
	for _, id := range ids {
		d, ok := next[id]
		switch old, had := prev[id]; {
		case !ok:
			evs = append(evs, Event{Type: EventGone, ID: id})
		case !had || !SameObservation(old, d):
			evs = append(evs, Event{Type: EventChanged, ID: id, Instance: &d})
		}
	}
	return evs
}

// SameObservation reports whether a and b agree on what a Watcher reports
// (properties are left out: a listing need not carry them).
func SameObservation(a, b Description) bool {
	return a.ID == b.ID && a.Address == b.Address && a.State == b.State &&
		maps.Equal(a.Tags, b.Tags) &&
		(a.LogicalID == nil) == (b.LogicalID == nil) &&
		(a.LogicalID == nil || *a.LogicalID == *b.LogicalID)
}
