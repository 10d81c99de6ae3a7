package status

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestEventsRing(t *testing.T) {
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	r := newEvents(4)
	for i := range 6 {
		r.add(Event{Time: base.Add(time.Duration(i) * time.Second), Kind: EventCreated, Message: fmt.Sprint(i)})
	}
	seqs := func(es []Event) []uint64 {
		out := []uint64{}
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	tests := []struct {
		name string
		q    EventQuery
		want []uint64
	}{
		{"all kept, oldest dropped", EventQuery{}, []uint64{3, 4, 5, 6}},
		{"limit keeps the newest", EventQuery{Limit: 2}, []uint64{5, 6}},
		{"limit above count", EventQuery{Limit: 10}, []uint64{3, 4, 5, 6}},
		{"since is inclusive", EventQuery{Since: base.Add(4 * time.Second)}, []uint64{5, 6}},
		{"since before the ring", EventQuery{Since: base.Add(-time.Hour)}, []uint64{3, 4, 5, 6}},
		{"since after everything", EventQuery{Since: base.Add(time.Hour)}, []uint64{}},
		{"after", EventQuery{After: 4}, []uint64{5, 6}},
		{"after the newest", EventQuery{After: 6}, []uint64{}},
		{"since and limit", EventQuery{Since: base.Add(3 * time.Second), Limit: 1}, []uint64{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := seqs(r.list(tt.q)); !slices.Equal(got, tt.want) {
				t.Errorf("list(%+v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
	if got := newEvents(0); len(got.buf) != DefaultEventCapacity {
		t.Errorf("capacity 0 gives %d slots, want %d", len(got.buf), DefaultEventCapacity)
	}
}

// The ring behaves like "keep every event, show the last capacity of them,
// then filter and keep the newest limit" — even when the clock steps back.
func TestEventsRingMatchesModel(t *testing.T) {
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 12).Draw(t, "capacity")
		r := newEvents(capacity)
		var all []Event
		offsets := rapid.SliceOfN(rapid.IntRange(-5, 30), 0, 40).Draw(t, "offsets")
		for _, off := range offsets {
			e := r.add(Event{Time: base.Add(time.Duration(off) * time.Second), Kind: EventDestroyed})
			if e.Seq != uint64(len(all)+1) {
				t.Fatalf("seq %d, want %d", e.Seq, len(all)+1)
			}
			all = append(all, e)
		}
		q := EventQuery{
			After: uint64(rapid.IntRange(0, 45).Draw(t, "after")),
			Limit: rapid.IntRange(-1, 15).Draw(t, "limit"),
		}
		if rapid.Bool().Draw(t, "withSince") {
			q.Since = base.Add(time.Duration(rapid.IntRange(-6, 31).Draw(t, "since")) * time.Second)
		}
		want := []Event{}
		for _, e := range all[max(len(all)-capacity, 0):] {
			if e.Seq > q.After && (q.Since.IsZero() || !e.Time.Before(q.Since)) {
				want = append(want, e)
			}
		}
		if q.Limit > 0 && len(want) > q.Limit {
			want = want[len(want)-q.Limit:]
		}
		if got := r.list(q); !slices.Equal(got, want) {
			t.Fatalf("list(%+v)\n got %v\nwant %v", q, got, want)
		}
	})
}
