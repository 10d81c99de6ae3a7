package status

import (
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/autoscale"
	"github.com/infrakit/infrakit/sdk/instance"
)

// DefaultEventCapacity is how many events a Recorder keeps when
// Options.EventCapacity is not set: a few hundred kilobytes of memory.
const DefaultEventCapacity = 1000

// EventKind says what an event reports. The kinds below are the ones watch
// records; the loop may add others (they are plain strings on the wire).
type EventKind string

// Event kinds.
const (
	// EventCreated: an instance was provisioned.
	EventCreated EventKind = "created"
	// EventDestroyed: an instance was destroyed (Reason says why).
	EventDestroyed EventKind = "destroyed"
	// EventReplaced: an instance is being replaced because it vanished, was
	// unhealthy past the grace or was out of date (Reason says which).
	EventReplaced EventKind = "replaced"
	// EventDrained: an instance was drained before being destroyed.
	EventDrained EventKind = "drained"
	// EventBrake: the mass-failure brake engaged; replacement is paused.
	EventBrake EventKind = "brake"
	// EventBrakeReleased: the brake released; replacement resumes.
	EventBrakeReleased EventKind = "brake-released"
	// EventRateLimited: health.max_replacements_per_hour held a replacement back.
	EventRateLimited EventKind = "rate-limited"
	// EventRollStarted, EventRollStopped, EventRollDone: a rolling update
	// began, was halted (group stop-update, or a new apply re-planning it),
	// or finished.
	EventRollStarted EventKind = "roll-started"
	EventRollStopped EventKind = "roll-stopped"
	EventRollDone    EventKind = "roll-done"
	// EventProviderRestart: a provider process was relaunched.
	EventProviderRestart EventKind = "provider-restart"
	// EventError: a pass, or an action within it, failed.
	EventError EventKind = "error"
	// EventReload: the stack files were read again (SIGHUP).
	EventReload EventKind = "reload"
	// EventLeader: this process gained or lost leadership.
	EventLeader EventKind = "leader"
	// EventLease: in scale-out mode this process acquired or released a
	// group, ingress or enrollment (Group is set for a group).
	EventLease EventKind = "lease"
)

// Event is one recent action of watch, as GET /v1/events shows it. Fields
// that do not apply are empty strings, never missing.
type Event struct {
	// Seq numbers the events of this process from 1, without gaps: a client
	// that tails with ?after=SEQ misses nothing the ring still holds.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Kind EventKind `json:"kind"`
	// Group is the group acted on, if any.
	Group string `json:"group"`
	// Instance is the instance acted on, if any.
	Instance instance.ID `json:"instance"`
	// Provider is the provider key ("simulator.nfs-auth"), if any.
	Provider string `json:"provider"`
	// Reason is the machine-readable cause (a destroy reason such as
	// "unhealthy" or "rolling-update"), if any.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Autoscale is the decision of an EventAutoscale; absent otherwise.
	Autoscale *autoscale.Decision `json:"autoscale,omitempty"`
}

// EventQuery selects events. The zero value selects every event held.
type EventQuery struct {
	// Since keeps events whose Time is at or after it (zero: no bound).
	Since time.Time
	// After keeps events whose Seq is greater (0: no bound).
	After uint64
	// Limit keeps only the newest Limit of the events selected (≤ 0: all).
	Limit int
}

// events is a fixed-size ring of the most recent events. It has its own
// lock so that recording an event never waits on a status snapshot.
type events struct {
	mu   sync.Mutex
	buf  []Event
	next int // where the next event goes
	n    int // events held, ≤ len(buf)
	seq  uint64
	// added is closed, and replaced, when an event is added: what a
	// stream of the events (SSE) waits on.
	added chan struct{}
}

func newEvents(capacity int) *events {
	if capacity <= 0 {
		capacity = DefaultEventCapacity
	}
	return &events{buf: make([]Event, capacity), added: make(chan struct{})}
}

// add numbers e, stores it over the oldest event when the ring is full, and
// returns it as stored.
func (r *events) add(e Event) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	e.Seq = r.seq
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
	close(r.added)
	r.added = make(chan struct{})
	return e
}

// since returns the events after seq (oldest first) and a channel closed
// when another is added.
func (r *events) since(seq uint64) ([]Event, <-chan struct{}) {
	added := func() <-chan struct{} {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.added
	}()
	return r.list(EventQuery{After: seq}), added
}

// list returns the events q selects, oldest first. The result is a copy.
// It walks from the newest event back, so a small Limit costs little.
func (r *events) list(q EventQuery) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := r.n
	if q.Limit > 0 && q.Limit < want {
		want = q.Limit
	}
	out := make([]Event, 0, want)
	for i := range r.n {
		if len(out) == want {
			break
		}
		e := r.buf[(r.next-1-i+2*len(r.buf))%len(r.buf)]
		if e.Seq <= q.After {
			break // Seq only grows: every older event is excluded too
		}
		// Time is not tested with break: the wall clock may step back.
		if !q.Since.IsZero() && e.Time.Before(q.Since) {
			continue
		}
		out = append(out, e)
	}
	slices.Reverse(out)
	return out
}
