package plan

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// EnrollmentChange is what a plan does for one enrollment block. The work
// itself is in the plan's steps whose Object is the enrollment.
type EnrollmentChange struct {
	Enrollment string `json:"enrollment"`
	Action     Action `json:"action"`
	// Settings are changed attributes that need no call to the target.
	Settings []enrollment.Setting `json:"settings,omitempty"`
	// Deferred counts authorizations of members that left, kept until
	// their replacements run (enrollment.Diff's holding rule).
	Deferred int `json:"deferred,omitempty"`
	// Failed are members whose properties cannot be rendered; what they
	// have is left alone.
	Failed []enrollment.RenderFailure `json:"failed,omitempty"`
	// Held is set when the source membership is unknown: nothing changes.
	Held bool `json:"held,omitempty"`
	// Retarget names the old target when the target changed: what the
	// enrollment made there is revoked once the new target is authorized.
	Retarget string `json:"retarget,omitempty"`
	// Pending are old targets whose revocations an earlier apply could not
	// finish: this plan finishes them.
	Pending []string `json:"pending,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// enrollmentSteps plans enrollment e of stack st: an authorization for
// every running member of its source that stays, one for every member the
// plan provisions or awaits once it runs, and the revocation of what is
// left (at once, or for a member that leaves, before it is drained and
// after the member replacing it is authorized). It fills in c.
func (b *builder) enrollmentSteps(st *config.Stack, e *config.Enrollment, world World, c *EnrollmentChange) {
	t := e.Target
	obs, ok := world.Authorizers[TargetKey(t.Provider, t.Type)]
	switch {
	case !ok:
		c.Error = fmt.Sprintf("target %s was not observed", enrollment.TargetString(e.Target))
		return
	case obs.Err != nil:
		c.Error = fmt.Sprintf("target %s: %v", enrollment.TargetString(e.Target), obs.Err)
		return
	case world.Failed[e.Source] != nil:
		c.Held = true
		return
	}
	render, done, err := renderer(e, world.Instances[e.Source], world.Rendered)
	if err != nil {
		c.Error = err.Error()
		return
	}
	defer done()
	ep := &enrollmentPlan{b: b, e: e, object: Address(KindEnrollment, e.Name)}
	staying := b.staying(e.Source, world.Members[e.Source])
	ch := enrollment.DiffRendered(e.Name, staying, enrollment.WantOf(st.Group(e.Source)), obs.Authorizations, render)
	c.Failed = ch.Failed
	// Members that run and are authorized now may be those replacing
	// members that vanished (a heal's replacements, authorized by the sync
	// after the pass): each such revocation waits for one of them.
	var newcomers []StepID
	for _, a := range ch.Authorize {
		newcomers = append(newcomers, ep.authorize(a))
	}
	for _, r := range ch.Reauthorize {
		ep.revoke(enrollment.Revocation{Authorization: r.Old, Reason: enrollment.ReasonReplaced}, ep.authorize(r.New))
	}
	ep.awaited(staying, obs.Authorizations)
	fresh := ep.arrivals()
	for _, r := range ch.Revoke {
		source := enrollment.SourceOf(r.Authorization)
		var after []StepID
		switch l := b.leaverOf(e.Source, source); {
		case l != nil && l.by != nil:
			after = append(after, b.authorizedFor(e.Name, l.by)) // make before break
		case l == nil && len(newcomers) > 0:
			after, newcomers = append(after, newcomers[0]), newcomers[1:] // make before break
		}
		b.beforeDrain(e.Source, source, ep.revoke(r, after...))
	}
	c.Deferred = b.releaseHeld(e.Source, ch.Deferred, fresh, ep.revoke, e.Name)
}

// enrollmentPlan makes the steps of one enrollment.
type enrollmentPlan struct {
	b      *builder
	e      *config.Enrollment
	object string
}

func (ep *enrollmentPlan) step(kind StepKind) Step {
	t := ep.e.Target
	return Step{Kind: kind, Object: ep.object, Provider: t.Provider, Enrollment: ep.e.Name, TargetType: t.Type, Group: ep.e.Source}
}

// authorize makes authorization a (rendered by the plan), after after.
func (ep *enrollmentPlan) authorize(a nfs.Authorization, after ...StepID) StepID {
	s := ep.step(StepAuthorize)
	s.Instance, s.Authorization, s.After = a.SourceID, ptr(a), after
	id := ep.b.add(s)
	ep.b.authorized[authKey{where: ep.e.Name, id: string(a.SourceID)}] = id
	return id
}

// revoke revokes r once (a second ask adds its dependencies to the first).
func (ep *enrollmentPlan) revoke(r enrollment.Revocation, after ...StepID) StepID {
	t := ep.e.Target
	key := authKey{where: TargetKey(t.Provider, t.Type), id: r.Authorization.ID}
	if id, done := ep.b.revoked[key]; done {
		ep.b.after(id, after...)
		return id
	}
	s := ep.step(StepRevoke)
	s.Instance, s.Authorization, s.Reason = enrollment.SourceOf(r.Authorization), ptr(r.Authorization), r.Reason
	id := ep.b.add(s)
	ep.b.after(id, after...) // drops the zeros: replacements authorized already
	ep.b.revoked[key] = id
	return id
}

// awaited authorizes each pending member that stays once it runs
// (rendered from how it is listed then), unless it has an authorization
// already.
func (ep *enrollmentPlan) awaited(staying []group.Member, observed []nfs.Authorization) {
	if !slices.ContainsFunc(staying, func(m group.Member) bool { return m.State == instance.StatePending }) {
		return // the usual plan: what it would index is not looked at
	}
	has := map[instance.ID]bool{}
	for _, a := range observed {
		if enrollment.Ours(ep.e.Name, a) {
			has[enrollment.SourceOf(a)] = true
		}
	}
	for _, m := range staying {
		key := authKey{where: ep.e.Name, id: string(m.ID)}
		if _, done := ep.b.authorized[key]; m.ID == "" || m.State != instance.StatePending || has[m.ID] || done {
			continue
		}
		await := ep.b.awaitMember(ep.e.Source, m.ID)
		s := ep.step(StepAuthorize)
		s.Instance, s.Awaited, s.After = m.ID, await, []StepID{await}
		ep.b.authorized[key] = ep.b.add(s)
	}
}

// arrivals authorizes the members the plan brings to the source group,
// once they run, and returns those it provisions (which may release held
// authorizations).
func (ep *enrollmentPlan) arrivals() []*arrival {
	var fresh []*arrival
	for _, a := range ep.b.arrivals[ep.e.Source] {
		if a.provision == 0 {
			a.ready = append(a.ready, ep.b.authorized[authKey{where: ep.e.Name, id: string(a.id)}])
			continue
		}
		s := ep.step(StepAuthorize)
		s.Made, s.Awaited, s.After = a.provision, a.await, []StepID{a.running()}
		id := ep.b.add(s)
		ep.b.authorized[authKey{where: ep.e.Name, id: fmt.Sprintf("made:%d", a.provision)}] = id
		a.ready = append(a.ready, id)
		fresh = append(fresh, a)
	}
	return fresh
}

// releaseHeld decides on the authorizations Diff holds (of members that
// left): that of a member the plan takes away is revoked, before its drain
// and, when the plan replaces it, once its replacement is authorized; that
// of a member that left behind the plan's back is revoked once a member
// the plan adds in its place is authorized (a pet's by the one with its
// logical ID, cattle by the plain creates, in order), and otherwise stays
// held. It returns how many stay held.
func (b *builder) releaseHeld(src string, held []nfs.Authorization, fresh []*arrival,
	revoke func(enrollment.Revocation, ...StepID) StepID, name string) int {
	// The plain creates of each logical ID ("" for cattle), in order: each
	// is paired with one held authorization at most.
	unpaired := map[string][]*arrival{}
	for _, a := range fresh {
		if a.replaces == nil {
			unpaired[a.logicalID] = append(unpaired[a.logicalID], a)
		}
	}
	left := 0
	var untagged []nfs.Authorization
	for _, h := range held {
		source := enrollment.SourceOf(h)
		if l := b.leaverOf(src, source); l != nil && l.destroy != 0 {
			// The plan takes the member away: its authorization goes
			// before it is drained. (One that left behind the plan's back,
			// GroupWork.Gone, is held like any member that vanished.)
			var after []StepID
			if l.by != nil {
				after = append(after, b.authorizedFor(name, l.by)) // make before break
			}
			b.beforeDrain(src, source, revoke(enrollment.Revocation{Authorization: h, Reason: enrollment.ReasonMemberGone}, after...))
			continue
		}
		lid := h.Tags[tags.LogicalID]
		if lid == "" {
			untagged = append(untagged, h)
			continue
		}
		if by := take(unpaired, lid); by != nil {
			revoke(enrollment.Revocation{Authorization: h, Reason: enrollment.ReasonMemberGone}, b.authorizedFor(name, by))
		} else {
			left++
		}
	}
	// An authorization without a logical ID (cattle's, or made before the
	// tag was set) is held for any member the group awaits: the plain
	// creates first, then the pets no tagged authorization was paired with.
	others := slices.Sorted(maps.Keys(unpaired))
	for _, h := range untagged {
		by := take(unpaired, "")
		for i := 0; by == nil && i < len(others); i++ {
			by = take(unpaired, others[i])
		}
		if by == nil {
			left++
			continue
		}
		revoke(enrollment.Revocation{Authorization: h, Reason: enrollment.ReasonMemberGone}, b.authorizedFor(name, by))
	}
	return left
}

// take takes the first arrival of queues[lid], if any.
func take(queues map[string][]*arrival, lid string) *arrival {
	q := queues[lid]
	if len(q) == 0 {
		return nil
	}
	queues[lid] = q[1:]
	return q[0]
}

// beforeDrain makes a leaving member's drain wait for the revocation of
// its authorization, except for a pet being replaced: its new instance
// comes after the old one is destroyed, and keeps the authorization
// until then.
func (b *builder) beforeDrain(group string, member instance.ID, revocation StepID) {
	l := b.leaverOf(group, member)
	switch {
	case l == nil:
	case l.pet && l.by != nil:
		for _, gate := range l.gates {
			b.later(revocation, gate)
		}
	default:
		b.breaking(l, revocation)
	}
}

// authorizedFor is the step authorizing arrival a for enrollment name
// (zero when none: it is authorized already).
func (b *builder) authorizedFor(name string, a *arrival) StepID {
	if a.provision != 0 {
		return b.authorized[authKey{where: name, id: fmt.Sprintf("made:%d", a.provision)}]
	}
	return b.authorized[authKey{where: name, id: string(a.id)}]
}

// revokeAt revokes at target (provider, type) every authorization of
// enrollment name that rev lists (Teardown or Retarget), each after the
// step after gives for its member (after may be nil); a member leaving is
// drained only once its authorization is revoked.
func (b *builder) revokeAt(object, provider, typ, name, src string, rev enrollment.Changes, after func(instance.ID) StepID) []StepID {
	var out []StepID
	for _, r := range rev.Revoke {
		key := authKey{where: TargetKey(provider, typ), id: r.Authorization.ID}
		if id, done := b.revoked[key]; done {
			out = append(out, id)
			continue
		}
		s := Step{Kind: StepRevoke, Object: object, Provider: provider, Enrollment: name, TargetType: typ, Group: src,
			Instance: enrollment.SourceOf(r.Authorization), Authorization: ptr(r.Authorization), Reason: r.Reason}
		id := b.add(s)
		if after != nil {
			b.after(id, after(s.Instance))
		}
		b.revoked[key] = id
		b.beforeDrain(src, s.Instance, id)
		out = append(out, id)
	}
	return out
}

// renderer is the render function enrollment.Diff takes: the target
// properties evaluated with member = the member's description (from descs,
// else what the member says of itself), remembered in memo (may be nil);
// done stores what was rendered in memo once Diff is done. The expression
// is parsed once.
func renderer(e *config.Enrollment, descs []instance.Description, memo *RenderMemo) (
	render func(group.Member) (enrollment.Rendered, error), done func(), err error) {
	t := e.Target
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("enrollment %q: target properties: %w", e.Name, diags)
	}
	t.PropertiesExpr = expr
	byID := make(map[instance.ID]int, len(descs))
	for i, d := range descs {
		if _, dup := byID[d.ID]; !dup {
			byID[d.ID] = i
		}
	}
	one, done := memoRender(memo, e, func(d instance.Description) (json.RawMessage, error) {
		return RenderAuthorizationProperties(&t, d)
	})
	return func(m group.Member) (enrollment.Rendered, error) {
		d := instance.Description{ID: m.ID, Address: m.Address, State: m.State}
		if i, ok := byID[m.ID]; ok {
			d = descs[i]
		}
		return one(d)
	}, done, nil
}

// RenderAuthorizationProperties renders target t's properties for the
// member described by d.
func RenderAuthorizationProperties(t *config.EnrollmentTarget, d instance.Description) (json.RawMessage, error) {
	v, err := config.MemberValue(d)
	if err != nil {
		return nil, err
	}
	props, err := t.RenderProperties(v)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", d.ID, err)
	}
	return props, nil
}
