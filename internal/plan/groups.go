package plan

import (
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
)

// GroupWork is what a plan does to one group's members, as the caller's
// policy decided it: Decide and RollSchedule for plan and apply (ApplyWork),
// a watch pass's own decision, a group verb's. The plan turns it into
// steps, with the steps of the load balancers and enrollments that follow
// the group.
type GroupWork struct {
	// Create are members to add.
	Create []group.Create
	// Destroy are members to take away (a scale-down, duplicates, the
	// group destroyed, destroy-instances).
	Destroy []group.Destroy
	// Replace are members replaced now, each by a new one (make before
	// break for cattle; a pet is destroyed first).
	Replace []Replacement
	// Batches are a rolling update: each batch is replaced once the one
	// before it is done.
	Batches [][]Replacement
	// Finish are replacements whose new member exists already (a watch
	// finishing a rolling update or a heal): the old member is taken away
	// once the new one is registered and authorized.
	Finish []Replacement
	// Gone are members that left without the plan (vanished, terminating):
	// their backends are deregistered at once.
	Gone []instance.ID
}

// Replacement is one member replaced by another.
type Replacement struct {
	Old       instance.ID            `json:"old"`
	LogicalID string                 `json:"logical_id,omitempty"`
	Reason    instance.DestroyReason `json:"reason"`
	// New is the member that replaces Old when it exists already (Finish).
	New instance.ID `json:"new,omitempty"`
}

// Empty reports whether the work does nothing.
func (w GroupWork) Empty() bool {
	return len(w.Create)+len(w.Destroy)+len(w.Replace)+len(w.Batches)+len(w.Finish)+len(w.Gone) == 0
}

// ApplyWork is what apply does to a group whose members are observed: what
// Decide says (its destroys of unhealthy members, with their creates, made
// replacements), then the whole rolling update of the members left out of
// date (RollSchedule), after those. wait says why out-of-date members are
// not part of the roll ("" when all are).
func ApplyWork(d group.Desired, members []group.Member) (w GroupWork, wait string) {
	dec := group.Decide(d, members)
	w.Create, w.Destroy, w.Replace = pairReplacements(dec, members)
	if len(dec.Roll) == 0 {
		return w, ""
	}
	leaving := make(map[instance.ID]bool, len(dec.Destroy))
	for _, x := range dec.Destroy {
		leaving[x.ID] = true
	}
	remaining := slices.DeleteFunc(slices.Clone(members), func(m group.Member) bool { return leaving[m.ID] })
	batches, wait := group.RollSchedule(d, remaining)
	lid := make(map[instance.ID]string, len(remaining))
	for _, m := range remaining {
		lid[m.ID] = m.LogicalID
	}
	for _, b := range batches {
		rs := make([]Replacement, len(b))
		for i, id := range b {
			rs[i] = Replacement{Old: id, LogicalID: lid[id], Reason: instance.ReasonRollingUpdate}
		}
		w.Batches = append(w.Batches, rs)
	}
	return w, wait
}

// pairReplacements turns Decide's destroys of unhealthy members, and the
// creates it asks for them, into replacements: for cattle one create per
// unhealthy destroy, for pets the create of the member's logical ID.
func pairReplacements(dec group.Decision, members []group.Member) ([]group.Create, []group.Destroy, []Replacement) {
	var destroys, unhealthy []group.Destroy
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonUnhealthy {
			unhealthy = append(unhealthy, x)
		} else {
			destroys = append(destroys, x)
		}
	}
	if len(unhealthy) == 0 {
		return dec.Create, destroys, nil
	}
	lids := make(map[instance.ID]string, len(members))
	for _, m := range members {
		lids[m.ID] = m.LogicalID
	}
	creates := slices.Clone(dec.Create)
	out := make([]Replacement, 0, len(unhealthy))
	for _, x := range unhealthy {
		lid := lids[x.ID]
		i := slices.IndexFunc(creates, func(c group.Create) bool { return c.LogicalID == lid })
		if i < 0 {
			destroys = append(destroys, x) // cannot happen: Decide pairs them
			continue
		}
		creates = slices.Delete(creates, i, i+1)
		out = append(out, Replacement{Old: x.ID, LogicalID: lid, Reason: group.ReasonUnhealthy})
	}
	return creates, destroys, out
}

// groupSteps adds the steps of w for group g (members as observed). The
// steps of its followers (registering arrivals, deregistering and revoking
// what leaves) are added after, by the ingress and enrollment planning,
// which also adds the dependencies that make replacements make before
// break. followed is whether any load balancer or enrollment follows the
// group: a plain create is awaited only then.
func (b *builder) groupSteps(g *config.Group, members []group.Member, w GroupWork, followed bool) {
	object := Address(KindGroup, g.Name)
	provider := g.Instance.Provider
	b.providers[g.Name] = provider
	pets := g.Size == nil
	lids := make(map[instance.ID]string, len(members))
	for _, m := range members {
		lids[m.ID] = m.LogicalID
	}

	// Members taken away: drain, then destroy.
	var destroys []StepID
	for _, x := range w.Destroy {
		l := b.leaveSteps(object, provider, g, x.ID, string(x.Reason), pets)
		destroys = append(destroys, l.destroy)
	}
	// Members added. A pet waits for every destroy of its group, so no
	// pet ever has two live copies.
	for _, c := range w.Create {
		a := b.arrive(object, provider, g, c.LogicalID, "", "", followed)
		if pets {
			b.after(a.provision, destroys...)
		}
	}
	// Replacements finished now: the old member goes (a roll's next batch
	// waits for that, so the group never holds more than max_parallel
	// members beyond its size).
	for _, r := range w.Finish {
		l := b.leaveSteps(object, provider, g, r.Old, string(r.Reason), pets)
		a := &arrival{group: g.Name, logicalID: r.LogicalID, id: r.New, replaces: l}
		l.by = a
		b.arrivals[g.Name] = append(b.arrivals[g.Name], a)
		destroys = append(destroys, l.destroy)
	}
	for _, gone := range w.Gone {
		b.addLeave(&leave{group: g.Name, id: gone, pet: pets && lids[gone] != ""})
	}
	for _, r := range w.Replace {
		b.replace(object, provider, g, r, pets)
	}
	// A rolling update: each batch once the one before it is done.
	var prev []*replacementSteps
	for _, batch := range w.Batches {
		var cur []*replacementSteps
		for _, r := range batch {
			rs := b.replace(object, provider, g, r, pets)
			cur = append(cur, rs)
			if len(prev) == 0 {
				// The first batch once the group's other creates and
				// destroys are done (a roll starts on a settled group).
				b.after(rs.entry, destroys...)
				for _, a := range b.arrivals[g.Name] {
					if a.replaces == nil {
						b.after(rs.entry, a.provision)
					}
				}
				continue
			}
			for _, p := range prev {
				b.later(rs.entry, p.done)
				rs.leave.gates = append(rs.leave.gates, p.done)
			}
		}
		prev = cur
	}
}

// replacementSteps are the steps of one replacement a rolling update
// chains: entry is the first (the new member's provision for cattle, the
// old pet's drain), done lists the steps after which it is finished.
type replacementSteps struct {
	entry StepID
	done  func() []StepID
	leave *leave
}

// replace adds the steps of one replacement. Cattle: provision the new
// member, await it running and healthy, then drain and destroy the old one
// (its followers' steps come between, added later). A pet: drain and
// destroy the old instance, then provision the new one with its logical ID
// and await it running and healthy.
func (b *builder) replace(object, provider string, g *config.Group, r Replacement, pets bool) *replacementSteps {
	if pets {
		l := b.leaveSteps(object, provider, g, r.Old, string(r.Reason), true)
		a := b.arrive(object, provider, g, r.LogicalID, r.Old, string(r.Reason), true)
		a.replaces, l.by = l, a
		b.after(a.provision, l.destroy)
		return &replacementSteps{entry: l.drain, done: func() []StepID { return a.ready }, leave: l}
	}
	a := b.arrive(object, provider, g, r.LogicalID, r.Old, string(r.Reason), true)
	l := b.leaveSteps(object, provider, g, r.Old, string(r.Reason), false)
	a.replaces, l.by = l, a
	b.after(l.drain, a.await)
	return &replacementSteps{entry: a.provision, done: func() []StepID { return []StepID{l.destroy} }, leave: l}
}

// arrive adds a member's provision, and its await when awaited (followed,
// or a replacement, which always waits for health).
func (b *builder) arrive(object, provider string, g *config.Group, logicalID string, replaces instance.ID, reason string, awaited bool) *arrival {
	a := &arrival{group: g.Name, logicalID: logicalID}
	a.provision = b.add(Step{Kind: StepProvision, Object: object, Provider: provider, Group: g.Name,
		LogicalID: logicalID, Replaces: replaces, Reason: reason})
	if awaited {
		s := Step{Kind: StepAwait, Object: object, Provider: provider, Group: g.Name,
			Made: a.provision, Healthy: replaces != "", After: []StepID{a.provision}}
		if s.Healthy {
			s.Timeout = g.Update.HealthTimeout
			if s.Timeout <= 0 {
				s.Timeout = config.DefaultUpdatePolicy().HealthTimeout
			}
		}
		a.await = b.add(s)
		a.ready = []StepID{a.await}
	}
	b.arrivals[g.Name] = append(b.arrivals[g.Name], a)
	return a
}

// leaveSteps adds the drain and destroy of a member that leaves.
func (b *builder) leaveSteps(object, provider string, g *config.Group, id instance.ID, reason string, pet bool) *leave {
	l := &leave{group: g.Name, id: id, pet: pet}
	l.drain = b.add(Step{Kind: StepDrain, Object: object, Provider: provider, Group: g.Name, Instance: id,
		Reason: reason, DrainDelay: g.DrainDelay})
	l.destroy = b.add(Step{Kind: StepDestroy, Object: object, Provider: provider, Group: g.Name, Instance: id,
		Reason: reason, After: []StepID{l.drain}})
	b.addLeave(l)
	return l
}
