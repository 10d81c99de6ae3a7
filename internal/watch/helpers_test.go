package watch

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/heal"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/flavor"
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
// passes find nothing to do (and starts over once one does), and never
// comes for a failed or braked pass.
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
	// A pass that saw the replacement change (now running) starts over.
	if got := s.followUp(gs, d, false, true, false, now); got != time.Second {
		t.Errorf("after progress with a replacement in flight: %s, want 1s", got)
	}
	if s.followUp(gs, d, true, true, false, now) != 0 || s.followUp(gs, d, false, true, true, now) != 0 {
		t.Error("a braked or failed pass waits for the interval")
	}
	// A braked group is listed again when its settle time ends: the
	// confirming re-list.
	gs = newGroupState("g", now)
	gs.tracker.SetPolicy(heal.Policy{BrakeSettle: 5 * time.Second})
	var all []group.Member
	for _, id := range []instance.ID{"a", "b", "c"} {
		all = append(all, group.Member{ID: id, State: instance.StateRunning, Health: flavor.HealthHealthy})
	}
	gs.tracker.Adjust(now, d, all)
	if adj := gs.tracker.Adjust(now.Add(time.Second), d, nil); !adj.Braked {
		t.Fatal("3 of 3 gone: not braked")
	}
	if got := s.followUp(gs, d, true, false, false, now.Add(time.Second)); got != 5*time.Second {
		t.Errorf("braked: follow-up in %s, want at the end of the 5s settle time", got)
	}
}

// drain turns each run of events that arrive together into one burst.
func TestDrain(t *testing.T) {
	events := make(chan instance.Event, 10)
	for range 5 {
		events <- instance.Event{Type: instance.EventGone}
	}
	bursts := 0
	burst := make(chan struct{}, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		drain(context.Background(), events, func() { bursts++; burst <- struct{}{} })
	}()
	<-burst // the five queued events were one burst
	events <- instance.Event{Type: instance.EventChanged}
	<-burst // and the one sent after it another
	close(events)
	<-done
	if bursts != 2 {
		t.Errorf("%d bursts for two runs of events, want 2", bursts)
	}
}

// The status counts a roll's replacements, not the heals of unhealthy
// members: only a roll's old member is out of date.
func TestInFlightCounts(t *testing.T) {
	rs := []replacement{
		{New: "n1", Old: "o1", Reason: group.ReasonRollingUpdate},
		{New: "n2", Old: "o2", Reason: group.ReasonUnhealthy},
		{New: "p1", LogicalID: "a", Reason: group.ReasonRollingUpdate}, // a pet: its old instance is gone
	}
	if got := outdatedInFlight(rs); got != 1 {
		t.Errorf("outdatedInFlight = %d, want 1", got)
	}
	if got := rollingInFlight(rs); got != 2 {
		t.Errorf("rollingInFlight = %d, want 2", got)
	}
	if got := unfinished(rs[:2], []instance.ID{"o2"}); len(got) != 1 || got[0].Old != "o1" {
		t.Errorf("unfinished = %v, want the one whose old member was not destroyed", got)
	}
	if got := unfinished(rs[:2], nil); len(got) != 2 {
		t.Errorf("a pass that destroyed nothing finished %v", got)
	}
}

// A new configuration plans a roll again (its replacements are forgotten,
// and the roll is said to stop) but lets heals of unhealthy members go on;
// a heal alone stops no roll.
func TestConfigureKeepsHeals(t *testing.T) {
	s := &service{opts: Options{CallTimeout: time.Minute, Interval: time.Second}, rec: status.NewRecorder(status.Options{Identity: "test"})}
	size := 2
	cfg := func(note string) groupSpec {
		return groupSpec{cfg: &config.Group{Name: "web", Size: &size,
			Instance: config.Plugin{Provider: "simulator", Properties: json.RawMessage(`{"note":"` + note + `"}`)}}}
	}
	log := hclog.NewNullLogger()
	gs := newGroupState("web", time.Now())
	s.configure(gs, cfg("a"), time.Now(), log)
	heal := replacement{New: "n2", Old: "o2", Reason: group.ReasonUnhealthy}
	gs.inflight = []replacement{{New: "n1", Old: "o1", Reason: group.ReasonRollingUpdate}, heal}
	gs.rolling = true
	s.configure(gs, cfg("b"), time.Now(), log)
	if !slices.Equal(gs.inflight, []replacement{heal}) || gs.rolling {
		t.Errorf("after a new configuration: in flight %v, rolling %v; want the heal only, not rolling", gs.inflight, gs.rolling)
	}
	s.configure(gs, cfg("c"), time.Now(), log)
	stopped := 0
	for _, e := range s.rec.Events(status.EventQuery{}) {
		if e.Kind == status.EventRollStopped {
			stopped++
		}
	}
	if stopped != 1 || len(gs.inflight) != 1 {
		t.Errorf("%d roll-stopped events, %d in flight; want 1 (the roll's, not the heal's) and the heal still in flight", stopped, len(gs.inflight))
	}
}

// A sync waits for a pass of a group it covers, and the other way round;
// groups are held in name order, so holders never deadlock; a holder whose
// context ends gives up what it held.
func TestActingHold(t *testing.T) {
	var a acting
	ctx := context.Background()
	release, err := a.hold(ctx, []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.hold(cancelled, []string{"db", "web"}); err == nil {
		t.Fatal("held web twice")
	}
	// Whatever it held (db) it gave up: db is free. (A generous bound: a
	// free group is held at once.)
	bounded, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	releaseDB, err := a.hold(bounded, []string{"db"})
	if err != nil {
		t.Fatalf("db not given up: %v", err)
	}
	releaseDB()
	got := make(chan func())
	go func() {
		r, _ := a.hold(ctx, []string{"web", "db", "web"})
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("a sync of web held it while a pass of web acted")
	default:
	}
	release()
	(<-got)()
	r, err := a.hold(bounded, []string{"db", "web"})
	if err != nil {
		t.Fatalf("not given back: %v", err)
	}
	r()
}

// A sync sees the members passes destroyed, and the provider still lists,
// as terminating; a pass's record of them is what its tracker expects and
// what it destroyed.
func TestDestroying(t *testing.T) {
	o := observation{
		members: []group.Member{{ID: "a", State: instance.StateRunning}, {ID: "b", State: instance.StateRunning}, {ID: "c", State: instance.StateTerminating}},
		adj: heal.Adjusted{Members: []group.Member{{ID: "a", State: instance.StateRunning}, {ID: "b", State: instance.StateTerminating},
			{ID: "c", State: instance.StateTerminating}, {ID: "e", State: instance.StatePending}}},
	}
	if got := destroyingOf(o, []instance.ID{"a"}); !slices.Equal(got, []instance.ID{"a", "b"}) {
		t.Errorf("destroyingOf = %v, want a (destroyed now) and b (expected gone, listed running)", got)
	}
	var a acting
	a.setDestroying("web", []instance.ID{"b"})
	world := plan.World{Members: map[string][]group.Member{"web": o.members, "db": {{ID: "b", State: instance.StateRunning}}}}
	a.markDestroying(&world)
	if world.Members["web"][1].State != instance.StateTerminating || world.Members["web"][0].State != instance.StateRunning ||
		world.Members["db"][0].State != instance.StateRunning || o.members[1].State != instance.StateRunning {
		t.Errorf("markDestroying: %+v (observed %+v)", world.Members, o.members)
	}
	a.setDestroying("web", nil)
	world.Members["web"] = o.members
	a.markDestroying(&world)
	if world.Members["web"][1].State != instance.StateRunning {
		t.Error("a member no longer destroying is still marked")
	}
}
