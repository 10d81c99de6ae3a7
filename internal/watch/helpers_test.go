package watch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestRecordHelpers(t *testing.T) {
	members := []group.Member{
		{ID: "b", ConfigHash: "h", State: instance.StateRunning},
		{ID: "a", ConfigHash: "h", State: instance.StatePending},
		{ID: "c", State: instance.StateTerminating},
		{ID: "b", ConfigHash: "h", State: instance.StateRunning},
	}
	live := recordOf(members)
	if want := []state.Instance{{ID: "a", ConfigHash: "h", State: "pending"}, {ID: "b", ConfigHash: "h", State: "running"}}; !slices.Equal(live, want) {
		t.Fatalf("recordOf = %+v, want %+v", live, want)
	}
	moved := []state.Instance{{ID: "a", ConfigHash: "h", State: "running"}, {ID: "b", ConfigHash: "h", State: "running"}}
	if !sameMembers(live, moved) {
		t.Error("a state change alone must not count as new members")
	}
	if sameMembers(live, moved[:1]) || sameMembers(live, []state.Instance{{ID: "a"}, {ID: "b", ConfigHash: "h"}}) {
		t.Error("a member gone or a hash changed must count")
	}
	after := applyActions(live, []group.Member{{ID: "0", State: instance.StatePending}}, []instance.ID{"b"})
	if ids := idsOf(after); !slices.Equal(ids, []string{"0", "a"}) {
		t.Errorf("applyActions = %v, want 0 and a, sorted", ids)
	}
	if got := listedOnly(append(slices.Clone(members), group.Member{ID: "expected"}), members); len(got) != 4 {
		t.Errorf("listedOnly kept %d members, want the 4 listed", len(got))
	}
	marked := markDestroyed(members, []instance.ID{"a"})
	if marked[1].State != instance.StateTerminating || members[1].State != instance.StatePending {
		t.Errorf("markDestroyed: %+v (input %+v)", marked[1], members[1])
	}
	g := &config.Group{Instance: config.Plugin{Provider: "simulator"},
		Flavors: []config.Plugin{{Provider: "vanilla"}, {Provider: "simulator"}, {Provider: "vanilla"}}}
	if keys := providerKeys(g); !slices.Equal(keys, []string{"simulator", "vanilla"}) {
		t.Errorf("providerKeys = %v", keys)
	}
}

func idsOf(in []state.Instance) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.ID)
	}
	return out
}

// A follow-up comes soon while something is in flight, backs off while
// passes find nothing to do, and never comes for a failed or braked pass.
func TestFollowUp(t *testing.T) {
	s := &service{opts: Options{FollowUp: time.Second, Interval: 10 * time.Second}}
	gs := newGroupState("g", time.Now())
	size := 3
	d := group.Desired{Size: &size, ReplaceUnhealthy: true}
	now := time.Now()
	if got := s.followUp(gs, d, false, false, false, now); got != 0 {
		t.Errorf("nothing in flight: %s, want none", got)
	}
	if got := s.followUp(gs, d, false, true, false, now); got != time.Second {
		t.Errorf("after acting: %s, want 1s", got)
	}
	gs.inflight = []replacement{{New: "n", Old: "o"}}
	var got []time.Duration
	for range 6 {
		got = append(got, s.followUp(gs, d, false, false, false, now))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backing off: %v, want %v", got, want)
	}
	if s.followUp(gs, d, true, true, false, now) != 0 || s.followUp(gs, d, false, true, true, now) != 0 {
		t.Error("a braked or failed pass waits for the interval")
	}
}

// drain turns each run of events that arrive together into one burst.
func TestDrain(t *testing.T) {
	events := make(chan instance.Event, 10)
	for range 5 {
		events <- instance.Event{Type: instance.EventGone}
	}
	bursts := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		drain(context.Background(), events, func() { bursts++ })
	}()
	time.Sleep(50 * time.Millisecond)
	events <- instance.Event{Type: instance.EventChanged}
	time.Sleep(50 * time.Millisecond)
	close(events)
	<-done
	if bursts != 2 {
		t.Errorf("%d bursts for two runs of events, want 2", bursts)
	}
}
