package execute

import (
	"context"
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// job is one call (or one batched call) with everything it needs resolved
// by the scheduler: the members provisions made, where they are listed.
type job struct {
	r     *run
	steps []plan.Step
	// member is the instance a step with Made acts on; desc how an await
	// saw it.
	member group.Member
	desc   instance.Description
	// backends are a register batch's, resolved.
	backends []loadbalancer.Backend
	target   *config.EnrollmentTarget
}

func (r *run) job(ids []plan.StepID) *job {
	j := &job{r: r, steps: make([]plan.Step, len(ids))}
	for i, id := range ids {
		j.steps[i] = r.steps[id-1]
	}
	s := j.steps[0]
	j.member, j.desc = r.subject(s)
	switch s.Kind {
	case plan.StepRegister:
		for _, st := range j.steps {
			if st.Backend != nil {
				j.backends = append(j.backends, *st.Backend)
				continue
			}
			m, d := r.subject(st)
			j.backends = append(j.backends, loadbalancer.Backend{ID: m.ID, Address: firstNonEmpty(d.Address, m.Address)})
		}
	case plan.StepAuthorize:
		if e := r.p.Desired.Enrollment(s.Enrollment); e != nil {
			t := e.Target
			j.target = &t
		}
	}
	return j
}

// subject is the member a step acts on when the plan could not say all of
// it: the one its provision made, or the one it names, as its await listed
// it (when it waits for one).
func (r *run) subject(s plan.Step) (group.Member, instance.Description) {
	m := group.Member{ID: s.Instance}
	if s.Made != 0 {
		m = r.made[s.Made]
	}
	var d instance.Description
	if s.Awaited != 0 {
		d = r.listed[s.Awaited]
	}
	return m, d
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// results runs the job and reports on its steps ids: one result for all
// of them, or for a batch of provisions one per step. Provider calls are
// detached from ctx's cancellation: they finish, each bounded by its
// deadline, and are recorded (unless Options.Abort ends them, or
// Options.Before refuses them).
func (j *job) results(ctx context.Context, ids []plan.StepID) []result {
	rs := j.do(ctx)
	if len(rs) == 1 && rs[0].ids == nil {
		rs[0].ids = ids
	}
	rs[0].slot = true
	return rs
}

func (j *job) do(ctx context.Context) []result {
	call := context.WithoutCancel(ctx)
	s := j.steps[0]
	if s.Kind == plan.StepRecord {
		if err := j.r.rec.Record(call, s.Changes); err != nil {
			return []result{{err: err, stop: err}}
		}
		return []result{{}}
	}
	if abort := j.r.o.Abort; abort != nil {
		var cancel context.CancelCauseFunc
		call, cancel = context.WithCancelCause(call)
		stop := context.AfterFunc(abort, func() { cancel(context.Cause(abort)) })
		defer func() { stop(); cancel(nil) }()
	}
	if before := j.r.o.Before; before != nil {
		if err := before(call, s); err != nil {
			return []result{{err: err}}
		}
	}
	switch s.Kind {
	case plan.StepProvision:
		return j.provisions(ctx, call)
	case plan.StepDrain, plan.StepDestroy:
		return []result{j.groupCall(call, s)}
	case plan.StepAuthorize, plan.StepRevoke:
		return []result{j.authorizerCall(call, s)}
	}
	return []result{j.loadBalancerCall(call, s)}
}

// provisions makes the job's members (provisions of one group), one
// after another, Options.Before asked before each but the first (do asked
// for it): a result per step made or failed. Groups whose flavors prepare
// ahead have all the members prepared in one call first. Once the run
// stops (ctx, or a member the state could not record), the members not
// begun are left: the run ends them not run.
func (j *job) provisions(ctx, call context.Context) []result {
	s := j.steps[0]
	g, err := j.r.b.Group(call, s.Group)
	if err != nil {
		return []result{{err: err}}
	}
	var ahead []group.Prepared
	if len(j.steps) > 1 && g.PreparesAhead() {
		lids := make([]string, len(j.steps))
		for i, st := range j.steps {
			lids[i] = st.LogicalID
		}
		ahead = g.PrepareBatch(call, lids)
	}
	rs := make([]result, 0, len(j.steps))
	for i, st := range j.steps {
		if i > 0 && ctx.Err() != nil {
			break
		}
		rs = append(rs, result{ids: []plan.StepID{st.ID}})
		if before := j.r.o.Before; before != nil && i > 0 {
			if rs[i].err = before(call, st); rs[i].err != nil {
				continue
			}
		}
		var p group.Prepared
		if ahead != nil {
			p = ahead[i]
		} else {
			p = g.PrepareBatch(call, []string{st.LogicalID})[0]
		}
		m, d, err := g.ProvisionPrepared(call, p)
		if err != nil {
			rs[i].err = err
			continue
		}
		rs[i].member, rs[i].desc = m, d
		if err := j.r.rec.Created(call, st.Group, m); err != nil {
			rs[i].stop = err // the run stops: nothing more is made unrecorded
			break
		}
	}
	return rs
}

// groupCall drains or destroys a member.
func (j *job) groupCall(call context.Context, s plan.Step) result {
	g, err := j.r.b.Group(call, s.Group)
	if err != nil {
		return result{err: err}
	}
	if s.Kind == plan.StepDrain {
		return result{err: g.Drain(call, s.Instance)}
	}
	if err := g.Destroy(call, s.Instance, instance.DestroyReason(s.Reason)); err != nil {
		return result{err: err}
	}
	if err := j.r.rec.Destroyed(call, s.Group, s.Instance); err != nil {
		return result{stop: err}
	}
	return result{}
}

func (j *job) loadBalancerCall(call context.Context, s plan.Step) result {
	l4, err := j.r.b.LoadBalancer(call, s.Provider, s.LoadBalancer)
	if err != nil {
		return result{err: err}
	}
	cctx, cancel := context.WithTimeout(call, j.r.o.CallTimeout)
	defer cancel()
	fail := func(what string, err error) result {
		if err == nil {
			return result{}
		}
		return result{err: fmt.Errorf("load balancer %q: %s: %w", s.LoadBalancer, what, err)}
	}
	switch s.Kind {
	case plan.StepPublish:
		return fail(fmt.Sprintf("publish port %d", s.Route.LoadBalancerPort), l4.Publish(cctx, *s.Route))
	case plan.StepUnpublish:
		return fail(fmt.Sprintf("unpublish port %d", s.Route.LoadBalancerPort), l4.Unpublish(cctx, s.Route.LoadBalancerPort))
	case plan.StepRepublish:
		if err := l4.Unpublish(cctx, s.OldRoute.LoadBalancerPort); err != nil {
			return fail(fmt.Sprintf("republish port %d: unpublish", s.OldRoute.LoadBalancerPort), err)
		}
		return fail(fmt.Sprintf("republish port %d: publish", s.Route.LoadBalancerPort), l4.Publish(cctx, *s.Route))
	case plan.StepHealthCheck:
		return fail("configure health check", l4.ConfigureHealthCheck(cctx, *s.HealthCheck))
	case plan.StepRegister:
		return fail(fmt.Sprintf("register %d backend(s)", len(j.backends)), l4.RegisterBackends(cctx, j.backends))
	case plan.StepDeregister:
		ids := make([]instance.ID, len(j.steps))
		for i, st := range j.steps {
			ids[i] = st.Backend.ID
		}
		return fail(fmt.Sprintf("deregister %d backend(s)", len(ids)), l4.DeregisterBackends(cctx, ids))
	}
	return result{err: fmt.Errorf("step %d: unknown kind %q", s.ID, s.Kind)}
}

func (j *job) authorizerCall(call context.Context, s plan.Step) result {
	auth, err := j.r.b.Authorizer(call, s.Provider, s.TargetType)
	if err != nil {
		return result{err: err}
	}
	cctx, cancel := context.WithTimeout(call, j.r.o.CallTimeout)
	defer cancel()
	if s.Kind == plan.StepRevoke {
		if err := auth.Revoke(cctx, s.Authorization.ID); err != nil {
			return result{err: fmt.Errorf("enrollment %q: revoke %s: %w", s.Enrollment, s.Authorization.ID, err)}
		}
		return result{}
	}
	a, err := j.authorization(s)
	if err != nil {
		return result{err: err}
	}
	if _, err := auth.Authorize(cctx, a); err != nil {
		return result{err: fmt.Errorf("enrollment %q: authorize %s: %w", s.Enrollment, a.SourceID, err)}
	}
	return result{}
}

// authorization is what an authorize step makes: the plan's, or for a
// member the plan made or awaited, the target's properties rendered for
// it as it was listed running.
func (j *job) authorization(s plan.Step) (nfs.Authorization, error) {
	if s.Authorization != nil {
		return *s.Authorization, nil
	}
	if j.target == nil {
		return nfs.Authorization{}, fmt.Errorf("enrollment %q is not in the plan's stack", s.Enrollment)
	}
	d := j.desc
	if d.ID == "" {
		d = instance.Description{ID: j.member.ID, Address: j.member.Address, State: instance.StateRunning}
	}
	props, err := plan.RenderAuthorizationProperties(j.target, d)
	if err != nil {
		return nfs.Authorization{}, fmt.Errorf("enrollment %q: %w", s.Enrollment, err)
	}
	m := group.Member{ID: d.ID, LogicalID: j.member.LogicalID, Address: d.Address, State: d.State}
	return enrollment.Authorization(s.Enrollment, m, props), nil
}
