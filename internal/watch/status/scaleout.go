package status

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Scale-out (backend "etcd" { scale_out = true }): several watch
// processes share a stack, each group, ingress and enrollment leased to one
// of them at a time. The status then says who is in and who owns what.

// ScaleOut is the "scale_out" object of GET /v1/status, set only in
// scale-out mode. Its JSON shape is a contract (website/watch.md).
type ScaleOut struct {
	// Member is this process's member ID (its session lease, in hex).
	Member string `json:"member"`
	// Members are the live watch processes of the stack, by ID.
	Members []Member `json:"members"`
	// LeasesHeld counts the objects this process owns now.
	LeasesHeld int `json:"leases_held"`
	// Objects are every group, ingress and enrollment of the applied
	// stack, sorted by kind then name, with their owners.
	Objects []Object `json:"objects"`
}

// Member is one live watch process of a scale-out stack.
type Member struct {
	ID       string `json:"id"`
	Identity string `json:"identity"`
}

// Object is one group, ingress or enrollment and who owns it.
type Object struct {
	// Kind is "group", "ingress" or "enrollment".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Owner is the owning member's ID, "" while nobody owns it (it is
	// being moved, or its owner's lease is in doubt).
	Owner string `json:"owner"`
	// OwnerIdentity is the owner's identity, "" when unknown.
	OwnerIdentity string `json:"owner_identity"`
	// Mine is true when this process owns it.
	Mine bool `json:"mine"`
}

// Lease move directions of infrakit_lease_moves_total.
const (
	LeaseAcquired = "acquired"
	LeaseReleased = "released"
)

// Metric names of scale-out (and the passes per group, in every mode).
const (
	MetricLeasesHeld          = "infrakit_leases_held"
	MetricLeaseMoves          = "infrakit_lease_moves_total"
	MetricFencedWritesRefused = "infrakit_fenced_writes_refused_total"
	MetricGroupPasses         = "infrakit_group_passes_total"
)

// objectKindGroup is the Kind of a group's Object.
const objectKindGroup = "group"

// scaleOutMetrics are the collectors of scale-out and of passes per group.
type scaleOutMetrics struct {
	leasesHeld    prometheus.Gauge
	leaseMoves    *prometheus.CounterVec
	fencedRefused prometheus.Counter
	groupPasses   *prometheus.CounterVec
}

func newScaleOutMetrics(reg *prometheus.Registry) scaleOutMetrics {
	m := scaleOutMetrics{
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricLeasesHeld,
			Help: "Groups, ingresses and enrollments this watch process owns now (scale-out; 0 otherwise).",
		}),
		leaseMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLeaseMoves,
			Help: "Objects this watch process took (acquired) or gave up (released), scale-out.",
		}, []string{"direction"}),
		fencedRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricFencedWritesRefused,
			Help: "State writes of this process that etcd refused because the lease fencing them no longer stood.",
		}),
		groupPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricGroupPasses,
			Help: "Passes of each group run by this process (a follower's observe-only passes included).",
		}, []string{"group"}),
	}
	reg.MustRegister(m.leasesHeld, m.leaseMoves, m.fencedRefused, m.groupPasses)
	m.leaseMoves.WithLabelValues(LeaseAcquired)
	m.leaseMoves.WithLabelValues(LeaseReleased)
	return m
}

// SetScaleOut records the scale-out view (nil: not in scale-out mode),
// and sets infrakit_leases_held from it.
func (r *Recorder) SetScaleOut(so *ScaleOut) {
	var c *ScaleOut
	if so != nil {
		c = so.clone()
		slices.SortFunc(c.Objects, func(a, b Object) int {
			return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
		})
		slices.SortFunc(c.Members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
		r.metrics.scaleOut.leasesHeld.Set(float64(c.LeasesHeld))
	} else {
		r.metrics.scaleOut.leasesHeld.Set(0)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scaleOut = c
}

// LeaseMoved counts one object acquired or released (LeaseAcquired,
// LeaseReleased).
func (r *Recorder) LeaseMoved(direction string) {
	r.metrics.scaleOut.leaseMoves.WithLabelValues(direction).Inc()
}

// FencedWriteRefused counts one state write etcd refused on its fence.
func (r *Recorder) FencedWriteRefused() { r.metrics.scaleOut.fencedRefused.Inc() }

// GroupPassed counts one pass of a group run by this process.
func (r *Recorder) GroupPassed(name string) {
	r.metrics.scaleOut.groupPasses.WithLabelValues(name).Inc()
}

// ReleaseGroup forgets the status of a group this process no longer owns
// (scale-out): its view and gauges go (its new owner reports them), its
// counters stay, as what this process did.
func (r *Recorder) ReleaseGroup(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, name)
	l := prometheus.Labels{"group": name}
	r.metrics.instances.DeletePartialMatch(l)
	r.metrics.desired.DeletePartialMatch(l)
	r.metrics.braked.DeletePartialMatch(l)
}

// fillOwners sets each group's owner from the scale-out view. r.mu held.
func (r *Recorder) fillOwners(s *Status) {
	if r.scaleOut == nil {
		return
	}
	s.ScaleOut = r.scaleOut.clone()
	owners := map[string]string{}
	for _, o := range r.scaleOut.Objects {
		if o.Kind == objectKindGroup {
			owners[o.Name] = o.OwnerIdentity
		}
	}
	for i := range s.Groups {
		s.Groups[i].Owner = owners[s.Groups[i].Name]
	}
}

func (so *ScaleOut) clone() *ScaleOut {
	c := *so
	c.Members = slices.Clone(so.Members)
	c.Objects = slices.Clone(so.Objects)
	if c.Members == nil {
		c.Members = []Member{}
	}
	if c.Objects == nil {
		c.Objects = []Object{}
	}
	return &c
}
