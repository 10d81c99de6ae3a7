package operation

import (
	"context"
	"fmt"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// enrollmentController builds the controller of e, acting through its
// target provider's authorizer.
func (r *Runner) enrollmentController(ctx context.Context, st *config.Stack, e *config.Enrollment) (*enrollment.Controller, error) {
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	c, err := h.Client(ctx, e.Target.Provider)
	if err != nil {
		return nil, fmt.Errorf("enrollment %q: %w", e.Name, err)
	}
	return enrollment.New(e, c.Authorizer(e.Target.Type), enrollment.Options{Parallelism: r.opts.Parallelism, Logger: r.log.Named("enrollment")})
}

// planEnrollments previews every enrollment of desired and of the stored
// stack. The source group is listed once more for each (with properties
// when the target properties use them): the plan's own observation keeps no
// descriptions. The members the plan destroys are left out of the listing,
// and the group wants what desired says, so the preview shows what apply's
// sync after the groups change revokes. A source whose observation failed
// leaves the enrollment held. Settings that changed (destroy_on_free,
// sync_interval) make an in-place update.
func (r *Runner) planEnrollments(ctx context.Context, desired *config.Stack, doc *state.Document, world plan.World, destroyed map[string]map[instance.ID]bool, changed map[string]bool) []plan.EnrollmentChange {
	var out []plan.EnrollmentChange
	for _, e := range desired.Enrollments {
		c := plan.EnrollmentChange{Enrollment: e.Name, Action: plan.ActionNoOp}
		if changed[e.Source] {
			c.FollowsGroups = []string{e.Source}
		}
		ctrl, err := r.enrollmentController(ctx, desired, e)
		if err == nil {
			source := enrollment.Membership{Want: enrollment.WantOf(desired.Group(e.Source))}
			known := world.Failed[e.Source] == nil
			if g := desired.Group(e.Source); known && g != nil {
				var descs []instance.Description
				if descs, err = r.describeGroup(ctx, desired.Name, g, enrollment.NeedsProperties(&e.Target)); err != nil {
					known, err = false, nil
				}
				source.Instances = slices.DeleteFunc(descs, func(d instance.Description) bool { return destroyed[e.Source][d.ID] })
			}
			c.Changes, err = ctrl.Preview(ctx, source, known)
		}
		var stored *config.Enrollment
		if doc.Stack != nil {
			stored = doc.Stack.Enrollment(e.Name)
		}
		c.Changes.Settings = enrollment.SettingChanges(stored, e)
		if err == nil && enrollment.TargetChanged(stored, e) && !freed(doc.Enrollments, e.Name) {
			c.Retarget, err = r.previewRetarget(ctx, doc.Stack, desired, e.Name)
		}
		if err == nil && !freed(doc.Enrollments, e.Name) {
			err = r.previewPendingRevocations(ctx, doc, desired, e.Name, &c)
		}
		switch {
		case err != nil:
			c.Action, c.Error = plan.ActionUnknown, err.Error()
		case freed(doc.Enrollments, e.Name):
			c.Action = plan.ActionResume
		case stored == nil:
			c.Action = plan.ActionCreate
		case c.Count() > 0 || len(c.Changes.Settings) > 0 || len(c.Pending) > 0:
			c.Action = plan.ActionUpdate
		}
		out = append(out, c)
	}
	// Those that left the stack, then those only pending revocations remember.
	var gone []string
	if doc.Stack != nil {
		for _, e := range doc.Stack.Enrollments {
			if desired.Enrollment(e.Name) == nil {
				gone = append(gone, e.Name)
			}
		}
	}
	gone = append(gone, pendingNames(doc.Enrollments, func(name string) bool {
		return desired.Enrollment(name) != nil || doc.Stack != nil && doc.Stack.Enrollment(name) != nil
	})...)
	for _, name := range gone {
		c := plan.EnrollmentChange{Enrollment: name, Action: plan.ActionDestroy}
		if freed(doc.Enrollments, name) {
			c.Action = plan.ActionFree
			out = append(out, c)
			continue
		}
		var err error
		if doc.Stack != nil && doc.Stack.Enrollment(name) != nil {
			var ctrl *enrollment.Controller
			ctrl, err = r.enrollmentController(ctx, doc.Stack, doc.Stack.Enrollment(name))
			if err == nil {
				var auths []nfs.Authorization
				auths, err = ctrl.Authorizations(ctx)
				c.Changes = enrollment.Teardown(name, auths, enrollment.ReasonDestroy)
			}
		}
		if err == nil {
			err = r.previewPendingRevocations(ctx, doc, desired, name, &c)
		}
		if err != nil {
			c.Action, c.Error = plan.ActionUnknown, err.Error()
		}
		out = append(out, c)
	}
	return out
}

// previewPendingRevocations adds to c the preview of the pending
// revocations recorded for enrollment name (see pending.go): at each old
// target, what releaseTarget revokes there.
func (r *Runner) previewPendingRevocations(ctx context.Context, doc *state.Document, desired *config.Stack, name string, c *plan.EnrollmentChange) error {
	for _, part := range pendingOf(doc.Enrollments, name) {
		old, now := part.Enrollment(name), desired.Enrollment(name)
		if old == nil || now != nil && !enrollment.TargetChanged(old, now) {
			continue // the stack took the target back: its sync keeps it
		}
		from := enrollment.TargetString(old.Target)
		if now != nil {
			rt, err := r.previewRetarget(ctx, part, desired, name)
			if err != nil {
				return fmt.Errorf("revocations left at %s by an earlier apply: %w", from, err)
			}
			c.Pending = append(c.Pending, *rt)
			continue
		}
		ctrl, err := r.enrollmentController(ctx, part, old)
		var auths []nfs.Authorization
		if err == nil {
			auths, err = ctrl.Authorizations(ctx)
		}
		if err != nil {
			return fmt.Errorf("revocations left at %s by an earlier apply: %w", from, err)
		}
		c.Pending = append(c.Pending, plan.Retarget{From: from, Changes: enrollment.Teardown(name, auths, enrollment.ReasonDestroy)})
	}
	return nil
}

// retargetControllers returns the controllers of enrollment name at its target as
// applied in previous and at its target in desired.
func (r *Runner) retargetControllers(ctx context.Context, previous, desired *config.Stack, name string) (was, now *enrollment.Controller, err error) {
	if was, err = r.enrollmentController(ctx, previous, previous.Enrollment(name)); err != nil {
		return nil, nil, fmt.Errorf("old target: %w", err)
	}
	if now, err = r.enrollmentController(ctx, desired, desired.Enrollment(name)); err != nil {
		return nil, nil, err
	}
	return was, now, nil
}

// previewRetarget is what enrollment name, whose target changed from
// previous to desired, revokes at its old target (enrollment.Retarget).
func (r *Runner) previewRetarget(ctx context.Context, previous, desired *config.Stack, name string) (*plan.Retarget, error) {
	was, now, err := r.retargetControllers(ctx, previous, desired, name)
	if err != nil {
		return nil, err
	}
	had, err := was.Authorizations(ctx)
	if err != nil {
		return nil, fmt.Errorf("old target: %w", err)
	}
	has, err := now.Authorizations(ctx)
	if err != nil {
		return nil, err
	}
	return &plan.Retarget{From: enrollment.TargetString(previous.Enrollment(name).Target),
		Changes: enrollment.Retarget(name, had, has)}, nil
}

// retarget revokes at the old target of enrollment name (as applied in
// previous) what it has there, less what its target in desired lists too
// (one store seen through both: see enrollment.Retarget). The new target
// must answer first: when it cannot be listed, nothing is revoked.
func (r *Runner) retarget(ctx context.Context, previous, desired *config.Stack, name string, res *ControllerResult) error {
	was, now, err := r.retargetControllers(ctx, previous, desired, name)
	if err != nil {
		return err
	}
	has, err := now.Authorizations(ctx)
	if err != nil {
		return err
	}
	done, err := was.Release(ctx, has)
	res.addEnrollmentAt(done, "on the old target "+enrollment.TargetString(previous.Enrollment(name).Target))
	if err != nil {
		return fmt.Errorf("old target: %w", err)
	}
	return nil
}

// releaseTarget revokes what enrollment name, as applied in previous, has
// at its target there when desired no longer has it there: every
// authorization of it when it left desired (RevokeAll), those the new
// target does not list too when its target changed (retarget). The error
// names the target.
func (r *Runner) releaseTarget(ctx context.Context, previous, desired *config.Stack, name string, res *ControllerResult) error {
	old, now := previous.Enrollment(name), desired.Enrollment(name)
	if old == nil {
		return nil
	}
	target := enrollment.TargetString(old.Target)
	wrap := func(err error) error {
		return fmt.Errorf("enrollment %q: revoking at %s failed; the state keeps what is left there and the next apply retries it: %w",
			name, target, err)
	}
	if now == nil {
		ctrl, err := r.enrollmentController(ctx, previous, old)
		if err != nil {
			return wrap(err)
		}
		done, err := ctrl.RevokeAll(ctx)
		res.addEnrollment(done)
		if err != nil {
			return wrap(err)
		}
		return nil
	}
	if !enrollment.TargetChanged(old, now) {
		return nil
	}
	if err := r.retarget(ctx, previous, desired, name, res); err != nil {
		return wrap(err)
	}
	return nil
}

// DescribeEnrollment asks an enrollment's target provider for its authorizations.
func (r *Runner) DescribeEnrollment(ctx context.Context, name string) (*enrollment.View, bool, error) {
	st, doc, err := r.stackFor(ctx, func(s *config.Stack) bool { return s.Enrollment(name) != nil })
	if err != nil {
		return nil, false, err
	}
	if st == nil {
		return nil, false, fmt.Errorf("enrollment %q is declared neither in the applied stack nor in the stack files", name)
	}
	ctrl, err := r.enrollmentController(ctx, st, st.Enrollment(name))
	if err != nil {
		return nil, false, err
	}
	auths, err := ctrl.Authorizations(ctx)
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(auths, func(a, b nfs.Authorization) int {
		if c := compareIDs(enrollment.SourceOf(a), enrollment.SourceOf(b)); c != 0 {
			return c
		}
		return compareIDs(instance.ID(a.ID), instance.ID(b.ID))
	})
	v := enrollment.ViewOf(name, auths)
	return &v, freed(doc.Enrollments, name), nil
}

func compareIDs(a, b instance.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// FreeEnrollment stops syncing an enrollment. It touches nothing, unless the
// enrollment has destroy_on_free: then its authorizations are revoked. A
// later apply resumes it.
func (r *Runner) FreeEnrollment(ctx context.Context, name string) (*ControllerResult, error) {
	doc, unlock, err := r.storedObject(ctx, "enrollment free", "enrollment", name, func(s *config.Stack) bool { return s.Enrollment(name) != nil })
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &ControllerResult{}
	e := doc.Stack.Enrollment(name)
	if doc.Enrollments == nil {
		doc.Enrollments = map[string]*state.ControllerStatus{}
	}
	doc.Enrollments[name] = keepPending(doc.Enrollments, name, true)
	if err := r.store.Write(ctx, doc); err != nil {
		return res, err
	}
	if !e.DestroyOnFree {
		return res, nil
	}
	ctrl, err := r.enrollmentController(ctx, doc.Stack, e)
	if err != nil {
		return res, err
	}
	done, err := ctrl.RevokeAll(ctx)
	res.addEnrollment(done)
	return res, err
}

// DestroyEnrollment revokes every authorization of an enrollment and
// removes it from the state (a later apply of a stack that still declares
// it authorizes the members again).
func (r *Runner) DestroyEnrollment(ctx context.Context, name string) (*ControllerResult, error) {
	doc, unlock, err := r.storedObject(ctx, "enrollment destroy", "enrollment", name, func(s *config.Stack) bool { return s.Enrollment(name) != nil })
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctrl, err := r.enrollmentController(ctx, doc.Stack, doc.Stack.Enrollment(name))
	if err != nil {
		return nil, err
	}
	res := &ControllerResult{}
	done, err := ctrl.RevokeAll(ctx)
	res.addEnrollment(done)
	if err != nil {
		return res, err
	}
	out := *doc.Stack
	out.Enrollments = slices.DeleteFunc(slices.Clone(out.Enrollments), func(e *config.Enrollment) bool { return e.Name == name })
	doc.Stack = &out
	resume(doc.Enrollments, name) // pending revocations stay for apply to retry
	return res, r.store.Write(context.WithoutCancel(ctx), doc)
}
