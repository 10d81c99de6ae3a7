package enrollment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// DefaultParallelism bounds the Authorize and Revoke calls in flight.
const DefaultParallelism = 10

// Source lists the source group's instances (with properties when the
// target properties use member.properties; see NeedsProperties) and says
// what the group wants. An error means the membership is unknown, and
// nothing is changed.
type Source func(ctx context.Context) (Membership, error)

// Options configure a Controller. Zero values take the defaults.
type Options struct {
	// Source serves the controller.Controller verbs that are given no
	// membership (Plan and Commit). Nil makes their membership unknown, so
	// they change nothing. Sync and Preview take the membership as arguments
	// instead, because a watch pass has just observed the group.
	Source Source
	// Parallelism bounds the provider calls in flight (DefaultParallelism).
	Parallelism int
	Logger      hclog.Logger
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Controller keeps the authorizations of one enrollment block in step with
// its source group, through the target's nfs.Authorizer. One pass (Sync)
// lists the authorizations once, decides with Diff and acts with bounded
// parallelism: every authorize first, then every revoke.
//
// It implements controller.Controller for its one enrollment; specs carry a
// config.Enrollment as Properties. Acting methods (Sync, RevokeAll, Commit,
// Free, Destroy) are serialised; the others are safe at any time.
type Controller struct {
	auth nfs.Authorizer
	opts Options

	// acting serialises the methods that change authorizations.
	acting sync.Mutex

	mu         sync.Mutex
	enrollment *config.Enrollment
	freed      bool
}

var _ controller.Controller = (*Controller)(nil)

// New returns the controller of enrollment e, acting through the target's
// authorizer (the target provider's Authorizer of e.Target.Type). e is copied.
func New(e *config.Enrollment, auth nfs.Authorizer, opts Options) (*Controller, error) {
	if e == nil {
		return nil, errors.New("enrollment controller: nil enrollment")
	}
	if auth == nil {
		return nil, fmt.Errorf("enrollment %q: no authorizer", e.Name)
	}
	if e.Name == "" {
		return nil, errors.New("enrollment controller: the enrollment has no name")
	}
	c := &Controller{auth: auth, opts: opts.withDefaults(), enrollment: copyEnrollment(e)}
	return c, nil
}

func copyEnrollment(e *config.Enrollment) *config.Enrollment {
	out := *e
	return &out
}

// Name is the enrollment's name.
func (c *Controller) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enrollment.Name
}

// Enrollment returns a copy of the enrollment configuration the controller enforces.
func (c *Controller) Enrollment() *config.Enrollment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copyEnrollment(c.enrollment)
}

// Freed reports whether Free was called and no Commit of Enforce has resumed
// management since.
func (c *Controller) Freed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.freed
}

// NeedsProperties reports whether the target properties use the members'
// properties (member.properties, or member as a whole), so the source must be
// listed with properties (DescribeInstances withProperties).
func NeedsProperties(t *config.EnrollmentTarget) bool {
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		return false
	}
	for _, tr := range expr.Variables() {
		if tr.RootName() != "member" {
			continue
		}
		if len(tr) < 2 {
			return true
		}
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			if step.Name == "properties" {
				return true
			}
		case hcl.TraverseIndex:
			k := step.Key
			if k.Type() != cty.String || !k.IsKnown() || k.IsNull() || k.AsString() == "properties" {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// Authorizations lists the enrollment's authorizations at the target.
func (c *Controller) Authorizations(ctx context.Context) ([]nfs.Authorization, error) {
	name := c.Name()
	all, err := c.auth.Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("enrollment %q: describe authorizations: %w", name, err)
	}
	var out []nfs.Authorization
	for _, a := range all {
		if Ours(name, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// renderer returns the render function Diff takes for the source
// descriptions: the target properties evaluated with member = the
// description (config.MemberValue). The expression is parsed once.
func renderer(e *config.Enrollment, source []instance.Description) (func(group.Member) (json.RawMessage, error), error) {
	t := e.Target
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		return nil, fmt.Errorf("enrollment %q: target properties: %w", e.Name, diags)
	}
	t.PropertiesExpr = expr
	byID := make(map[instance.ID]int, len(source))
	for i, d := range source {
		if _, dup := byID[d.ID]; !dup {
			byID[d.ID] = i
		}
	}
	return func(m group.Member) (json.RawMessage, error) {
		d := instance.Description{ID: m.ID, Address: m.Address, State: m.State}
		if i, ok := byID[m.ID]; ok {
			d = source[i]
		}
		v, err := config.MemberValue(d)
		if err != nil {
			return nil, err
		}
		props, err := t.RenderProperties(v)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.ID, err)
		}
		return props, nil
	}, nil
}

// Preview returns what Sync would do now with this source, changing nothing.
func (c *Controller) Preview(ctx context.Context, source Membership, known bool) (Changes, error) {
	return c.preview(ctx, c.Enrollment(), source, known)
}

func (c *Controller) preview(ctx context.Context, e *config.Enrollment, source Membership, known bool) (Changes, error) {
	if !known {
		return Changes{Enrollment: e.Name, Held: true}, nil
	}
	render, err := renderer(e, source.Instances)
	if err != nil {
		return Changes{Enrollment: e.Name}, err
	}
	observed, err := c.auth.Describe(ctx)
	if err != nil {
		return Changes{Enrollment: e.Name}, fmt.Errorf("enrollment %q: describe authorizations: %w", e.Name, err)
	}
	return Diff(e.Name, group.MembersFromDescriptions(source.Instances, nil), source.Want, observed, render), nil
}

// Sync is one pass: it lists the target's authorizations, diffs them against
// source (the source group's instances as listed by its provider, and what
// the group wants, which holds the authorizations of members that left
// while their replacements start) and acts, and returns what it did (with
// the held authorizations in Deferred). With known false (the group could
// not be listed) it changes nothing, and a freed controller does nothing.
// Failed calls are left out of what it did and returned as one error after
// the rest is done; members whose properties cannot be rendered are in
// Changes.Failed and in the error.
func (c *Controller) Sync(ctx context.Context, source Membership, known bool) (Changes, error) {
	c.acting.Lock()
	defer c.acting.Unlock()
	e := c.Enrollment()
	if c.Freed() {
		return Changes{Enrollment: e.Name}, nil
	}
	ch, err := c.preview(ctx, e, source, known)
	if err != nil || ch.Held {
		return ch, err
	}
	done, err := c.act(ctx, e.Name, ch)
	if len(ch.Failed) > 0 {
		errs := make([]error, len(ch.Failed))
		for i, f := range ch.Failed {
			errs[i] = f.Err
		}
		err = errors.Join(err, summarize(fmt.Sprintf("enrollment %q: render properties", e.Name), errs))
	}
	return done, err
}

// RevokeAll revokes every authorization of the enrollment and returns what
// it did. It needs no membership.
func (c *Controller) RevokeAll(ctx context.Context) (Changes, error) {
	c.acting.Lock()
	defer c.acting.Unlock()
	return c.revokeAll(ctx)
}

func (c *Controller) revokeAll(ctx context.Context) (Changes, error) {
	name := c.Name()
	observed, err := c.auth.Describe(ctx)
	if err != nil {
		return Changes{Enrollment: name}, fmt.Errorf("enrollment %q: describe authorizations: %w", name, err)
	}
	return c.act(ctx, name, Teardown(name, observed, ReasonDestroy))
}

// Release revokes, at this controller's target, every authorization of the
// enrollment except those others lists (by ID): what an enrollment whose
// target changed does at its old target, others being what the new target
// lists (see Retarget). It returns what it did.
func (c *Controller) Release(ctx context.Context, others []nfs.Authorization) (Changes, error) {
	c.acting.Lock()
	defer c.acting.Unlock()
	name := c.Name()
	observed, err := c.auth.Describe(ctx)
	if err != nil {
		return Changes{Enrollment: name}, fmt.Errorf("enrollment %q: describe authorizations: %w", name, err)
	}
	return c.act(ctx, name, Retarget(name, observed, others))
}

// errNotStarted marks a call that never started because ctx ended.
var errNotStarted = errors.New("not started")

// act carries out ch and returns what succeeded: first every authorize (new
// members and re-authorizations) with bounded parallelism, and only once all
// of them have returned, every revoke. The old authorization of a
// re-authorization is revoked only if its successor was made. When ctx ends
// no call starts; if it ends while authorizing, nothing is revoked.
func (c *Controller) act(ctx context.Context, name string, ch Changes) (Changes, error) {
	done := Changes{Enrollment: name, Deferred: ch.Deferred, Failed: ch.Failed, Held: ch.Held}

	// Phase 1: authorize.
	news := make([]nfs.Authorization, 0, len(ch.Authorize)+len(ch.Reauthorize))
	news = append(news, ch.Authorize...)
	for _, r := range ch.Reauthorize {
		news = append(news, r.New)
	}
	ids := make([]string, len(news))
	errs := make([]error, len(news))
	for i := range errs {
		errs[i] = errNotStarted
	}
	c.each(ctx, len(news), func(i int) {
		ids[i], errs[i] = c.auth.Authorize(ctx, news[i])
	})
	var failed []error
	for i, a := range news {
		if errors.Is(errs[i], errNotStarted) {
			continue
		}
		if errs[i] != nil {
			failed = append(failed, fmt.Errorf("authorize member %s: %w", a.SourceID, errs[i]))
			continue
		}
		a = cloneAuthorization(a)
		a.ID = ids[i]
		if i < len(ch.Authorize) {
			done.Authorize = append(done.Authorize, a)
		} else {
			r := ch.Reauthorize[i-len(ch.Authorize)]
			done.Reauthorize = append(done.Reauthorize, Replacement{Old: r.Old, New: a})
		}
	}
	if err := ctx.Err(); err != nil {
		return done, errors.Join(summarize(fmt.Sprintf("enrollment %q", name), failed), err)
	}

	// Phase 2: revoke, now that every replacement exists.
	revs := make([]Revocation, 0, len(ch.Revoke)+len(done.Reauthorize))
	revs = append(revs, ch.Revoke...)
	for _, r := range done.Reauthorize {
		revs = append(revs, Revocation{Authorization: r.Old, Reason: ReasonReplaced})
	}
	errs = make([]error, len(revs))
	for i := range errs {
		errs[i] = errNotStarted
	}
	c.each(ctx, len(revs), func(i int) {
		errs[i] = c.auth.Revoke(ctx, revs[i].Authorization.ID)
	})
	for i, r := range revs {
		switch {
		case errors.Is(errs[i], errNotStarted):
		case errs[i] != nil:
			failed = append(failed, fmt.Errorf("revoke %s (member %s): %w", r.Authorization.ID, SourceOf(r.Authorization), errs[i]))
		case r.Reason != ReasonReplaced:
			done.Revoke = append(done.Revoke, r)
		}
	}
	return done, errors.Join(summarize(fmt.Sprintf("enrollment %q", name), failed), ctx.Err())
}

// summarize joins errs under a prefix, keeping the first few: a thousand
// identical failures make one readable error, not a thousand lines.
func summarize(prefix string, errs []error) error {
	const keep = 5
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) <= keep:
		return fmt.Errorf("%s: %w", prefix, errors.Join(errs...))
	default:
		return fmt.Errorf("%s: %d calls failed, the first %d: %w", prefix, len(errs), keep, errors.Join(errs[:keep]...))
	}
}

// each runs do(0..n-1) on at most Parallelism goroutines and returns when
// every started call has returned. Once ctx is done no further call starts.
func (c *Controller) each(ctx context.Context, n int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.opts.Parallelism, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				do(i)
			}
		}()
	}
	wg.Wait()
}

// The controller.Controller verbs, for the one enrollment this controller is
// bound to. Specs carry the enrollment's configuration (a config.Enrollment)
// as Properties.

// Spec returns the spec of the enrollment.
func (c *Controller) Spec(ctx context.Context) ([]controller.Spec, error) {
	s, err := SpecOf(c.Enrollment())
	if err != nil {
		return nil, err
	}
	return []controller.Spec{s}, nil
}

// SpecOf is the controller spec of an enrollment block.
func SpecOf(e *config.Enrollment) (controller.Spec, error) {
	props, err := json.Marshal(e)
	if err != nil {
		return controller.Spec{}, fmt.Errorf("enrollment %q: encode spec: %w", e.Name, err)
	}
	return controller.Spec{
		Kind:       controller.KindEnrollment,
		Metadata:   controller.Metadata{Name: e.Name},
		Properties: props,
	}, nil
}

// enrollmentOf decodes an enrollment spec and checks it is this controller's.
func (c *Controller) enrollmentOf(spec controller.Spec) (*config.Enrollment, error) {
	name := c.Name()
	if spec.Kind != controller.KindEnrollment {
		return nil, fmt.Errorf("enrollment %q: spec %s is not an enrollment", name, spec)
	}
	var e config.Enrollment
	if err := json.Unmarshal(spec.Properties, &e); err != nil {
		return nil, fmt.Errorf("enrollment %q: decode spec: %w", name, err)
	}
	if e.Name == "" {
		e.Name = spec.Metadata.Name
	}
	if e.Name != name {
		return nil, fmt.Errorf("enrollment %q: spec is for enrollment %q", name, e.Name)
	}
	return &e, nil
}

// source asks Options.Source for the source group's membership.
func (c *Controller) source(ctx context.Context, name string) (Membership, bool) {
	if c.opts.Source == nil {
		return Membership{}, false
	}
	m, err := c.opts.Source(ctx)
	if err != nil {
		c.opts.Logger.Warn("source membership unknown; authorizations are left as they are", "enrollment", name, "error", err)
		return Membership{}, false
	}
	return m, true
}

// Plan returns what Commit would do now: for Enforce the Diff against the
// source from Options.Source (nothing when it is unknown), with the settings
// spec changes; for Destroy the
// revocation of every authorization of the enrollment.
func (c *Controller) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Change, error) {
	ch := controller.Change{Kind: controller.KindEnrollment, Name: c.Name(), Operation: op}
	e, err := c.enrollmentOf(spec)
	if err != nil {
		return ch, err
	}
	var changes Changes
	switch op {
	case controller.Enforce:
		source, known := c.source(ctx, e.Name)
		changes, err = c.preview(ctx, e, source, known)
		changes.Settings = SettingChanges(c.Enrollment(), e)
	case controller.Destroy:
		var observed []nfs.Authorization
		if observed, err = c.auth.Describe(ctx); err != nil {
			err = fmt.Errorf("enrollment %q: describe authorizations: %w", e.Name, err)
		}
		changes = Teardown(e.Name, observed, ReasonDestroy)
	default:
		return ch, fmt.Errorf("enrollment %q: unknown operation %q", ch.Name, op)
	}
	ch.Steps = changes.Steps()
	return ch, err
}

// Commit enforces spec (which becomes the enrollment's configuration and
// resumes a freed enrollment) with the source from Options.Source, or revokes
// every authorization, and returns the enrollment as observed afterwards.
func (c *Controller) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Object, error) {
	e, err := c.enrollmentOf(spec)
	if err != nil {
		return controller.Object{}, err
	}
	switch op {
	case controller.Enforce:
		c.mu.Lock()
		c.enrollment, c.freed = copyEnrollment(e), false
		c.mu.Unlock()
		source, known := c.source(ctx, e.Name)
		_, err = c.Sync(ctx, source, known)
	case controller.Destroy:
		_, err = c.RevokeAll(ctx)
	default:
		return controller.Object{}, fmt.Errorf("enrollment %q: unknown operation %q", e.Name, op)
	}
	obj, oerr := c.object(ctx)
	return obj, errors.Join(err, oerr)
}

// View is the JSON shape of `infrakit enrollment describe -json`, and of
// Describe's Object.State.
type View struct {
	Enrollment     string              `json:"enrollment"`
	Authorizations []AuthorizationView `json:"authorizations"`
}

// AuthorizationView is one authorization in a View.
type AuthorizationView struct {
	ID         string          `json:"id"`
	SourceID   instance.ID     `json:"source_id"`
	Properties json.RawMessage `json:"properties"`
}

// ViewOf is the view of an enrollment's authorizations.
func ViewOf(name string, auths []nfs.Authorization) View {
	v := View{Enrollment: name, Authorizations: make([]AuthorizationView, 0, len(auths))}
	for _, a := range auths {
		props := a.Properties
		if len(props) == 0 {
			props = json.RawMessage("{}")
		}
		v.Authorizations = append(v.Authorizations, AuthorizationView{ID: a.ID, SourceID: SourceOf(a), Properties: props})
	}
	return v
}

func (c *Controller) object(ctx context.Context) (controller.Object, error) {
	e := c.Enrollment()
	spec, err := SpecOf(e)
	if err != nil {
		return controller.Object{}, err
	}
	auths, err := c.Authorizations(ctx)
	if err != nil {
		return controller.Object{Spec: spec}, err
	}
	state, err := json.Marshal(ViewOf(e.Name, auths))
	if err != nil {
		return controller.Object{Spec: spec}, fmt.Errorf("enrollment %q: encode state: %w", e.Name, err)
	}
	return controller.Object{Spec: spec, State: state}, nil
}

func (c *Controller) selects(meta *controller.Metadata) bool {
	return meta == nil || meta.Name == c.Name()
}

// Describe asks the target for the enrollment's authorizations if meta
// selects it; the object's State is a View.
func (c *Controller) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	obj, err := c.object(ctx)
	if err != nil {
		return nil, err
	}
	return []controller.Object{obj}, nil
}

// Free stops syncing the enrollment: Sync does nothing until a Commit of
// Enforce resumes. With destroy_on_free it also revokes every authorization
// of the enrollment; without, it touches nothing. Callers keep the mark (in
// state) too.
func (c *Controller) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	c.acting.Lock()
	defer c.acting.Unlock()
	c.mu.Lock()
	c.freed = true
	destroy := c.enrollment.DestroyOnFree
	c.mu.Unlock()
	spec, err := SpecOf(c.Enrollment())
	if err != nil {
		return nil, err
	}
	if !destroy {
		return []controller.Object{{Spec: spec}}, nil
	}
	_, err = c.revokeAll(ctx)
	obj, oerr := c.object(ctx)
	return []controller.Object{obj}, errors.Join(err, oerr)
}

// Destroy revokes every authorization of the enrollment if meta selects it.
func (c *Controller) Destroy(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	_, err := c.RevokeAll(ctx)
	obj, oerr := c.object(ctx)
	return []controller.Object{obj}, errors.Join(err, oerr)
}
