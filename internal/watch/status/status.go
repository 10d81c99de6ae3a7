package status

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Status is the document GET /v1/status serves: the whole service at one
// moment. Its JSON shape is a contract (website/watch.md).
type Status struct {
	// Version is infrakit's version.
	Version string `json:"version"`
	// Started is when this watch process started; UptimeSeconds counts
	// from it.
	Started       time.Time `json:"started"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	// Leader reports whether this process is the one that acts; Identity
	// names it (the leader election's identity when several watch
	// processes share an etcd backend). LeaderIdentity names the process
	// that leads as far as this one knows: its own identity while it
	// leads, the elected leader's otherwise, "" while nobody leads.
	Leader         bool   `json:"leader"`
	Identity       string `json:"identity"`
	LeaderIdentity string `json:"leader_identity"`
	// LastPass is when the latest pass over all groups started (null
	// before the first pass ends), LastPassDurationSeconds how long it
	// took and LastError why it failed ("" when it succeeded).
	LastPass                *time.Time `json:"last_pass"`
	LastPassDurationSeconds float64    `json:"last_pass_duration_seconds"`
	LastError               string     `json:"last_error"`
	// Passes counts the passes finished.
	Passes uint64 `json:"passes"`
	// Groups in name order; Providers in key order. Never null.
	Groups    []Group    `json:"groups"`
	Providers []Provider `json:"providers"`
	// ScaleOut is set in scale-out mode only (scaleout.go).
	ScaleOut *ScaleOut `json:"scale_out,omitempty"`
}

// Group is one group as its latest pass left it.
type Group struct {
	Name string `json:"name"`
	// Kind is "cattle" (sized by size) or "pets" (one per logical ID).
	Kind string `json:"kind"`
	// Desired is the size, or the number of distinct logical IDs.
	Desired int `json:"desired"`
	// Actual counts the live members listed: pending or running, each
	// instance once. Pending is how many of them are still starting.
	Actual  int `json:"actual"`
	Pending int `json:"pending"`
	// Expected counts creates issued that the provider does not list yet
	// (the expectations that keep a slow provider from causing
	// over-provisioning).
	Expected int `json:"expected"`
	// Terminating counts members going away; they are not in Actual.
	Terminating int `json:"terminating"`
	// Health counts the live members by what their flavors say.
	Health  HealthCounts `json:"health"`
	Rolling Rolling      `json:"rolling"`
	Brake   Brake        `json:"brake"`
	// LastPass is when this group's latest pass started, LastError why it
	// failed ("" when it succeeded).
	LastPass                *time.Time `json:"last_pass"`
	LastPassDurationSeconds float64    `json:"last_pass_duration_seconds"`
	LastError               string     `json:"last_error"`
	// Autoscale is set for a group with an autoscale block once its
	// autoscaler has decided (the leader's; autoscale.go).
	Autoscale *Autoscale `json:"autoscale,omitempty"`
	// Owner is the identity of the watch process that owns the group in
	// scale-out mode ("" otherwise, and while nobody owns it).
	Owner string `json:"owner,omitempty"`
}

// Group kinds.
const (
	KindCattle = "cattle"
	KindPets   = "pets"
)

// HealthCounts counts members by health.
type HealthCounts struct {
	Healthy   int `json:"healthy"`
	Unhealthy int `json:"unhealthy"`
	Unknown   int `json:"unknown"`
}

// Rolling is the progress of a group's rolling update. All zero when the
// group is up to date.
type Rolling struct {
	// Outdated counts the members still out of date, the batch in flight
	// included (group.RollStatus.Outdated).
	Outdated int `json:"outdated"`
	// InFlight counts the rolling update's replacements created and not
	// yet finished (healthy, and their out-of-date member taken away).
	InFlight int `json:"in_flight"`
	// Stopped is set after `infrakit group stop-update`: the roll is halted
	// until the next apply.
	Stopped bool `json:"stopped"`
	// Wait says why no batch is replaced now although members are out of
	// date (group.RollStatus.Wait); "" otherwise.
	Wait string `json:"wait"`
}

// Brake is the mass-failure brake of a group: when more than half of it,
// and at least 3, look dead at once or within the settle time
// (-brake-settle), replacement pauses.
type Brake struct {
	Engaged bool `json:"engaged"`
	// Reason says what the loop saw; "" when released.
	Reason string `json:"reason"`
	// Since is when it engaged; null when released.
	Since *time.Time `json:"since"`
	// ReleaseAt is, while engaged, the earliest a confirming re-list may
	// release it (null otherwise).
	ReleaseAt *time.Time `json:"release_at"`
	// RateLimit, after a release, is how many replacements may go per
	// settle time until none is owed; 0 when no limit holds.
	RateLimit int `json:"rate_limit"`
}

// Provider is one provider process watch supervises.
type Provider struct {
	// Key is the provider key: "simulator", "simulator.nfs-auth".
	Key string `json:"key"`
	// PID of the running process; 0 while none runs.
	PID int `json:"pid"`
	// Restarts counts relaunches after a crash or hang.
	Restarts int `json:"restarts"`
	// LastError is the most recent failed call or crash ("" if none yet),
	// LastErrorAt when it happened. Kept after later successes, so a
	// flapping provider stays visible.
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// GroupReport is what the loop tells SetGroup about one group after
// reconciling it.
type GroupReport struct {
	Name string
	// Desired is the group as it should be (group.DesiredFromConfig).
	Desired group.Desired
	// Members are the members observed by this pass, before or after it
	// acted (whichever the loop last saw), as group.MembersFromDescriptions
	// makes them.
	Members []group.Member
	// Expected counts creates issued that Members does not list yet.
	Expected int
	Rolling  Rolling
	// Braked and BrakeReason report the mass-failure brake. The Recorder
	// notes when it engages (Brake.Since) and records EventBrake and
	// EventBrakeReleased on each change, so the loop need not.
	Braked      bool
	BrakeReason string
	// BrakeReleaseAt is, while braked, the earliest a confirming re-list
	// may release the brake; BrakeRateLimit, after a release, bounds the
	// replacements per settle time (0: no limit).
	BrakeReleaseAt time.Time
	BrakeRateLimit int
	// Start is when the group's pass started (zero: now minus Duration),
	// Duration how long it took, Err why it failed (nil on success).
	Start    time.Time
	Duration time.Duration
	Err      error
}

// Counts are a group's members counted the ways status and metrics show.
type Counts struct {
	// Live counts members pending or running, each ID once; Pending and
	// Terminating count by state; Health counts the live members.
	Live, Pending, Terminating int
	Health                     HealthCounts
	// ByStateHealth counts every member, terminating ones included, by its
	// (state, health) pair: the infrakit_instances series.
	ByStateHealth map[StateHealth]int
}

// StateHealth is one (state, health) pair of infrakit_instances.
type StateHealth struct {
	State  instance.State
	Health flavor.Health
}

// CountMembers counts members, each instance ID once (the first wins, as a
// provider listing the same ID twice is one instance). An empty health is
// counted as unknown and an empty state as running, as
// group.MembersFromDescriptions does.
func CountMembers(members []group.Member) Counts {
	c := Counts{ByStateHealth: make(map[StateHealth]int, 9)}
	seen := make(map[instance.ID]bool, len(members))
	for _, m := range members {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		st, h := m.State, m.Health
		if st == "" {
			st = instance.StateRunning
		}
		if h == "" {
			h = flavor.HealthUnknown
		}
		c.ByStateHealth[StateHealth{st, h}]++
		if st == instance.StateTerminating {
			c.Terminating++
			continue
		}
		c.Live++
		if st == instance.StatePending {
			c.Pending++
		}
		switch h {
		case flavor.HealthHealthy:
			c.Health.Healthy++
		case flavor.HealthUnhealthy:
			c.Health.Unhealthy++
		default:
			c.Health.Unknown++
		}
	}
	return c
}

// DesiredCount is how many members d asks for: the size (negative taken as
// zero), or the distinct non-empty logical IDs, as group.Decide counts them.
func DesiredCount(d group.Desired) int {
	if !d.IsPets() {
		return max(*d.Size, 0)
	}
	ids := make(map[string]bool, len(d.LogicalIDs))
	for _, id := range d.LogicalIDs {
		if id != "" {
			ids[id] = true
		}
	}
	return len(ids)
}

// Options configure a Recorder. Zero values take the defaults.
type Options struct {
	// Version is infrakit's version, shown in the status.
	Version string
	// Identity names this process until SetLeader says otherwise; default
	// "<hostname>/<pid>".
	Identity string
	// Follower starts the Recorder as a follower that knows no leader yet
	// (a watch that campaigns for leadership); by default it starts as
	// its own leader.
	Follower bool
	// EventCapacity is how many recent events are kept
	// (DefaultEventCapacity).
	EventCapacity int
	// Now is the clock (time.Now); tests fix it.
	Now func() time.Time
}

// Recorder is the status of one watch process. It is safe for concurrent
// use. Create it with NewRecorder.
type Recorder struct {
	now     func() time.Time
	version string
	metrics *metrics
	events  *events

	mu       sync.Mutex
	started  time.Time
	leader   bool
	identity string
	leaderID string
	// standing, when set, is asked whether a leadership recorded by
	// SetLeader still stands (see SetLeaderCheck).
	standing  func() bool
	lastPass  *time.Time
	lastTook  time.Duration
	lastError string
	passes    uint64
	groups    map[string]*groupEntry
	providers map[string]*Provider
	// scaleOut is the scale-out view (nil: not in scale-out mode).
	scaleOut *ScaleOut
}

type groupEntry struct {
	view Group
	// series are the infrakit_instances label pairs last set for the group,
	// so pairs that disappear (an odd state a provider reported once) are
	// deleted rather than left stale.
	series map[StateHealth]bool
}

// standardSeries are the infrakit_instances pairs every group always has,
// zeros included, so a series never vanishes when its count drops to 0.
var standardSeries = func() []StateHealth {
	var out []StateHealth
	for _, st := range []instance.State{instance.StatePending, instance.StateRunning, instance.StateTerminating} {
		for _, h := range []flavor.Health{flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown} {
			out = append(out, StateHealth{st, h})
		}
	}
	return out
}()

// NewRecorder returns a Recorder that starts now, as the leader (a single
// watch process is its own leader until leader election says otherwise).
func NewRecorder(opts Options) *Recorder {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Identity == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		opts.Identity = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	r := &Recorder{
		now:       opts.Now,
		version:   opts.Version,
		metrics:   newMetrics(),
		events:    newEvents(opts.EventCapacity),
		started:   opts.Now().UTC(),
		leader:    !opts.Follower,
		identity:  opts.Identity,
		groups:    make(map[string]*groupEntry),
		providers: make(map[string]*Provider),
	}
	if r.leader {
		r.leaderID = opts.Identity
		r.metrics.leader.Set(1)
	}
	return r
}

// Gatherer is the Recorder's own Prometheus registry, for a handler other
// than Server's to serve. Nothing is ever registered globally.
func (r *Recorder) Gatherer() prometheus.Gatherer { return r.metrics.registry }

// Registerer is the same registry, for collectors of other parts of watch
// (leader election, the state backend) to be served beside these. Their
// names must not clash with the Metric* names.
func (r *Recorder) Registerer() prometheus.Registerer { return r.metrics.registry }

// Status returns a snapshot of the whole service. It shares nothing with
// the Recorder.
func (r *Recorder) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	leader, leaderID := r.leader, r.leaderID
	if leader && r.standing != nil && !r.standing() {
		// The leadership has ended although the loop has not said so yet
		// (a process that resumes from a freeze): never show it.
		leader = false
		if leaderID == r.identity {
			leaderID = ""
		}
	}
	s := Status{
		Version:                 r.version,
		Started:                 r.started,
		UptimeSeconds:           max(now.Sub(r.started), 0).Seconds(),
		Leader:                  leader,
		Identity:                r.identity,
		LeaderIdentity:          leaderID,
		LastPass:                clonePtr(r.lastPass),
		LastPassDurationSeconds: r.lastTook.Seconds(),
		LastError:               r.lastError,
		Passes:                  r.passes,
		Groups:                  make([]Group, 0, len(r.groups)),
		Providers:               make([]Provider, 0, len(r.providers)),
	}
	for _, g := range r.groups {
		s.Groups = append(s.Groups, g.view.clone())
	}
	for _, p := range r.providers {
		c := *p
		c.LastErrorAt = clonePtr(p.LastErrorAt)
		s.Providers = append(s.Providers, c)
	}
	slices.SortFunc(s.Groups, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Providers, func(a, b Provider) int { return cmp.Compare(a.Key, b.Key) })
	r.fillOwners(&s)
	return s
}

// Group returns the status of one group, and false when no pass has
// reported it.
func (r *Recorder) Group(name string) (Group, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.groups[name]
	if !ok {
		return Group{}, false
	}
	return g.view.clone(), true
}

// clone copies g with its own time values, so a caller writing through the
// pointers cannot change the Recorder.
func (g Group) clone() Group {
	g.LastPass = clonePtr(g.LastPass)
	g.Brake.Since = clonePtr(g.Brake.Since)
	g.Brake.ReleaseAt = clonePtr(g.Brake.ReleaseAt)
	if g.Autoscale != nil {
		a := *g.Autoscale
		a.Decisions = slices.Clone(a.Decisions)
		g.Autoscale = &a
	}
	return g
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// SetGroup replaces a group's status with what its latest pass saw, and
// its metrics with the same counts.
func (r *Recorder) SetGroup(rep GroupReport) {
	now := r.now().UTC()
	start := rep.Start.UTC()
	if rep.Start.IsZero() {
		start = now.Add(-rep.Duration)
	}
	c := CountMembers(rep.Members)
	kind := KindCattle
	if rep.Desired.IsPets() {
		kind = KindPets
	}
	view := Group{
		Name:                    rep.Name,
		Kind:                    kind,
		Desired:                 DesiredCount(rep.Desired),
		Actual:                  c.Live,
		Pending:                 c.Pending,
		Expected:                max(rep.Expected, 0),
		Terminating:             c.Terminating,
		Health:                  c.Health,
		Rolling:                 rep.Rolling,
		LastPass:                &start,
		LastPassDurationSeconds: rep.Duration.Seconds(),
	}
	if rep.Err != nil {
		view.LastError = rep.Err.Error()
	}

	var brakeEvent *Event
	r.mu.Lock()
	e, ok := r.groups[rep.Name]
	if !ok {
		e = &groupEntry{}
		r.groups[rep.Name] = e
	}
	was := e.view.Brake
	switch {
	case rep.Braked && was.Engaged:
		view.Brake = Brake{Engaged: true, Reason: rep.BrakeReason, Since: was.Since}
	case rep.Braked:
		view.Brake = Brake{Engaged: true, Reason: rep.BrakeReason, Since: &now}
		brakeEvent = &Event{Kind: EventBrake, Message: "replacement paused: " + rep.BrakeReason}
		r.metrics.brakeEngaged.WithLabelValues(rep.Name).Inc()
	case was.Engaged:
		msg := "replacement resumed"
		if rep.BrakeRateLimit > 0 {
			msg = fmt.Sprintf("replacement resumed, at most %d per settle time until none is owed", rep.BrakeRateLimit)
		}
		brakeEvent = &Event{Kind: EventBrakeReleased, Message: msg}
	}
	if rep.Braked && !rep.BrakeReleaseAt.IsZero() {
		at := rep.BrakeReleaseAt
		view.Brake.ReleaseAt = &at
	}
	view.Brake.RateLimit = rep.BrakeRateLimit
	view.Autoscale = e.view.Autoscale // the autoscaler's, not the pass's
	e.view = view
	// Metrics are set under the lock so that two reports of one group
	// never interleave their series.
	r.setGroupMetrics(e, c, view)
	r.mu.Unlock()

	if brakeEvent != nil {
		brakeEvent.Time = now
		brakeEvent.Group = rep.Name
		r.events.add(*brakeEvent)
	}
}

func (r *Recorder) setGroupMetrics(e *groupEntry, c Counts, view Group) {
	next := make(map[StateHealth]bool, len(standardSeries)+len(c.ByStateHealth))
	for _, sh := range standardSeries {
		next[sh] = true
	}
	for sh := range c.ByStateHealth {
		next[sh] = true
	}
	for sh := range next {
		r.metrics.instances.WithLabelValues(view.Name, string(sh.State), string(sh.Health)).Set(float64(c.ByStateHealth[sh]))
	}
	for sh := range e.series {
		if !next[sh] {
			r.metrics.instances.DeleteLabelValues(view.Name, string(sh.State), string(sh.Health))
		}
	}
	e.series = next
	r.metrics.desired.WithLabelValues(view.Name).Set(float64(view.Desired))
	braked := 0.0
	if view.Brake.Engaged {
		braked = 1
	}
	r.metrics.braked.WithLabelValues(view.Name).Set(braked)
	r.metrics.brakeEngaged.WithLabelValues(view.Name) // 0 until it first engages
}

// RemoveGroup forgets a group that left the stack (after a reload), with
// its metric series.
func (r *Recorder) RemoveGroup(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, name)
	r.metrics.removeGroup(name)
}

// ObservePass records one pass over all groups: it started at start, took
// took, and failed with err (nil on success).
func (r *Recorder) ObservePass(start time.Time, took time.Duration, err error) {
	start = start.UTC()
	r.mu.Lock()
	r.lastPass = &start
	r.lastTook = took
	r.lastError = ""
	if err != nil {
		r.lastError = err.Error()
	}
	r.passes++
	r.mu.Unlock()

	r.metrics.passDuration.Observe(took.Seconds())
	result := passOK
	if err != nil {
		result = passError
	}
	r.metrics.passes.WithLabelValues(result).Inc()
	end := start.Add(took)
	// Seconds and fraction apart: UnixNano()/1e9 loses the last digits.
	r.metrics.lastPass.Set(float64(end.Unix()) + float64(end.Nanosecond())/1e9)
}

// SetLeader records whether this process leads and under which identity
// (an empty identity keeps the current one). A change records EventLeader.
// The leader's identity follows: this process's own while it leads, and
// unknown ("") once it no longer does, until SetLeaderIdentity says who
// leads now.
func (r *Recorder) SetLeader(leader bool, identity string) {
	r.mu.Lock()
	changed := r.leader != leader
	r.leader = leader
	if identity != "" {
		r.identity = identity
	}
	id := r.identity
	switch {
	case leader:
		r.leaderID = id
	case changed && r.leaderID == id:
		r.leaderID = ""
	}
	r.mu.Unlock()

	v := 0.0
	if leader {
		v = 1
	}
	r.metrics.leader.Set(v)
	if changed {
		msg := id + " lost leadership"
		if leader {
			msg = id + " became the leader"
		}
		r.Event(Event{Kind: EventLeader, Message: msg})
	}
}

// SetLeaderCheck sets what Status asks, while SetLeader says this process
// leads, whether that leadership still stands (nil: nothing; it leads until
// SetLeader says otherwise). The leader election's own view is quicker than
// the loop that calls SetLeader, so the status never shows a leadership
// that has ended.
func (r *Recorder) SetLeaderCheck(standing func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.standing = standing
}

// SetLeaderIdentity records who leads as the leader election last said
// ("" for nobody).
func (r *Recorder) SetLeaderIdentity(identity string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaderID = identity
}

// ReasonVanished is the replacement reason of an instance that is no longer
// listed by its provider (nothing was destroyed, so the SPI has no reason
// for it).
const ReasonVanished instance.DestroyReason = "vanished"

// Replacement records that a group replaces an instance for reason
// (group.ReasonUnhealthy, group.ReasonRollingUpdate, ReasonVanished), and
// records EventReplaced with message.
func (r *Recorder) Replacement(groupName string, id instance.ID, reason instance.DestroyReason, message string) {
	r.metrics.replacements.WithLabelValues(groupName, string(reason)).Inc()
	r.Event(Event{Kind: EventReplaced, Group: groupName, Instance: id, Reason: string(reason), Message: message})
}

// SetProvider records that the provider with key runs as pid (0: it is not
// running). A provider seen for the first time starts with no restarts.
func (r *Recorder) SetProvider(key string, pid int) {
	r.mu.Lock()
	r.provider(key).PID = pid
	r.mu.Unlock()
	// The series exists from launch, so increase() sees the first restart.
	r.metrics.providerRestarts.WithLabelValues(key)
}

// RemoveProvider forgets a provider no longer in the stack, with its
// metric series.
func (r *Recorder) RemoveProvider(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.providers, key)
	r.metrics.removeProvider(key)
}

// ProviderError records a failed call to a provider's SPI method
// ("Provision", "DescribeInstances", ...). It records no event: a failing
// provider fails every pass, and the loop reports what it gave up on.
func (r *Recorder) ProviderError(key, method string, err error) {
	msg := method + " failed"
	if err != nil {
		msg = err.Error()
	}
	now := r.now().UTC()
	r.mu.Lock()
	p := r.provider(key)
	p.LastError = msg
	p.LastErrorAt = &now
	r.mu.Unlock()
	r.metrics.providerErrors.WithLabelValues(key, method).Inc()
}

// ProviderRestart records that the provider with key was relaunched as pid
// because of cause (its crash or hang; may be nil), and records
// EventProviderRestart.
func (r *Recorder) ProviderRestart(key string, pid int, cause error) {
	now := r.now().UTC()
	msg := fmt.Sprintf("relaunched as pid %d", pid)
	r.mu.Lock()
	p := r.provider(key)
	p.PID = pid
	p.Restarts++
	if cause != nil {
		p.LastError = cause.Error()
		p.LastErrorAt = &now
		msg += " after: " + cause.Error()
	}
	r.mu.Unlock()
	r.metrics.providerRestarts.WithLabelValues(key).Inc()
	r.events.add(Event{Time: now, Kind: EventProviderRestart, Provider: key, Message: msg})
}

// provider returns the entry for key, creating it. r.mu must be held.
func (r *Recorder) provider(key string) *Provider {
	p, ok := r.providers[key]
	if !ok {
		p = &Provider{Key: key}
		r.providers[key] = p
	}
	return p
}

// Event records e and returns it as stored: numbered, and timed now when
// e.Time is zero.
func (r *Recorder) Event(e Event) Event {
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	e.Time = e.Time.UTC()
	return r.events.add(e)
}

// EventsAfter returns the events after seq that the ring still holds,
// oldest first, and a channel closed when the next event is recorded.
func (r *Recorder) EventsAfter(seq uint64) ([]Event, <-chan struct{}) {
	return r.events.since(seq)
}

// Events returns the recent events q selects, oldest first.
func (r *Recorder) Events(q EventQuery) []Event {
	return r.events.list(q)
}
