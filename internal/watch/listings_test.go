package watch

import (
	"maps"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// A sync is given a group's listing by its last pass only when the loop
// found it current (the stream open since before it, no pass of the group
// asked for or running) and no pass dropped or replaced it before the
// sync held the group.
func TestFreshListings(t *testing.T) {
	now := time.Now()
	before, at := now.Add(-time.Hour), now.Add(-time.Second)
	open := func(since time.Time) *subscription {
		s := &subscription{}
		s.live.opened(since)
		return s
	}
	descs := []instance.Description{{ID: "i-1"}}
	s := &service{groups: map[string]*groupSched{
		"current":  {sub: open(before)},
		"running":  {sub: open(before), running: true},
		"dirty":    {sub: open(before), dirty: true},
		"again":    {sub: open(before), again: true},
		"late":     {sub: open(now)}, // the stream opened after the listing
		"closed":   {sub: &subscription{}},
		"nosub":    {},
		"unlisted": {sub: open(before)},
		"dropped":  {sub: open(before)},
		"relisted": {sub: open(before)},
	}}
	for name := range s.groups {
		if name != "unlisted" {
			s.listings.set(name, descs, at)
		}
	}
	fresh := s.freshListings()
	want := map[string]time.Time{"current": at, "dropped": at, "relisted": at}
	if !maps.Equal(fresh, want) {
		t.Fatalf("freshListings = %v; want %v", fresh, want)
	}
	s.listings.drop("dropped")             // a pass acts
	s.listings.set("relisted", descs, now) // a pass listed anew
	got := s.listings.take(fresh)
	if len(got) != 1 || len(got["current"]) != 1 {
		t.Errorf("take = %v; want only current's listing", got)
	}
}
