package watch

import (
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// A follower is re-listed every sync_interval up to relistUnit members,
// then that much less often per relistUnit more, within relistCap.
func TestRelistEvery(t *testing.T) {
	for _, c := range []struct {
		every   time.Duration
		members int
		want    time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, 3, time.Second},
		{3 * time.Second, relistUnit, 3 * time.Second},
		{3 * time.Second, relistUnit + 1, 6 * time.Second},
		{3 * time.Second, 10_005, 33 * time.Second},
		{5 * time.Second, 10_000, 50 * time.Second},
		{3 * time.Second, 1_000_000, relistCap},
		{time.Hour, 1_000_000, time.Hour},
		{time.Duration(1 << 62), 5_000, time.Duration(1 << 62)},
	} {
		f := follower{every: c.every, members: c.members}
		if got := f.relistEvery(); got != c.want {
			t.Errorf("relistEvery(%s, %d members) = %s, want %s", c.every, c.members, got, c.want)
		}
	}
}

// A failed sync makes its followers due on their sync_interval again,
// and moves the schedule's next due time no later.
func TestRetryFailed(t *testing.T) {
	now := time.Now()
	big := follower{kind: "enrollment", name: "nfs", every: 5 * time.Second, members: 10_000}
	other := follower{kind: "ingress", name: "site", every: 3 * time.Second}
	f := &followers{
		next: map[string]time.Time{big.key(): now.Add(50 * time.Second), other.key(): now.Add(time.Second)},
		due:  now.Add(time.Second),
	}
	retryFailed(f, []follower{big}, now)
	if got := f.next[big.key()]; !got.Equal(now.Add(5 * time.Second)) {
		t.Errorf("next = %s after now, want 5s", got.Sub(now))
	}
	if !f.due.Equal(now.Add(time.Second)) {
		t.Errorf("due = %s after now, want still 1s", f.due.Sub(now))
	}
	f.due = now.Add(time.Minute)
	retryFailed(f, []follower{big}, now)
	if !f.due.Equal(now.Add(5 * time.Second)) {
		t.Errorf("due = %s after now, want 5s", f.due.Sub(now))
	}
}

// A follower counts the members its groups want, each group once.
func TestFollowerMembers(t *testing.T) {
	size := 2500
	doc := &state.Document{Stack: &config.Stack{
		Groups: []*config.Group{{Name: "web", Size: &size}, {Name: "db", LogicalIDs: []string{"a", "b"}}},
		Ingresses: []*config.Ingress{{Name: "site", Rules: []config.Rule{
			{Groups: []string{"web", "db"}}, {Groups: []string{"web"}}}}},
		Enrollments: []*config.Enrollment{{Name: "nfs", Source: "db"}},
	}}
	got := followersOf(doc)
	if len(got) != 2 || got[0].members != 2502 || got[1].members != 2 {
		t.Fatalf("followersOf = %+v, want site with 2502 members, nfs with 2", got)
	}
}
