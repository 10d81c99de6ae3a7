package plan

import (
	"fmt"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// ingresses plans the ingresses of the desired stack, then those that left
// it (and those only a pending teardown remembers).
func (c *computation) ingresses() {
	groups := c.scopedGroups()
	for _, in := range c.desired.Ingresses {
		full := c.scope.hasIngress(in.Name)
		if !full && !followsAny(ingressGroups(in), groups) {
			continue
		}
		object := Address(KindIngress, in.Name)
		ic := IngressChange{Ingress: in.Name}
		if isFreed(c.doc.Ingresses, in.Name) {
			if !c.scope.All() {
				continue // only apply resumes what `ingress free` stopped
			}
			ic.Action = ActionResume
			c.intent.marks = append(c.intent.marks, StateChange{Kind: Resume, Object: object})
		}
		start := len(c.b.steps)
		var errText string
		ic.Held, errText = c.b.ingressSteps(c.desired, in, c.world, ingressOptions{full: full, groups: groups, checked: c.scope.checkedSet()})
		if full && !c.scope.Sync {
			errText = firstOf(errText, c.releases(in.Name, &ic), c.pendingIngress(in.Name, &ic))
		}
		stored := c.doc.Stack != nil && c.doc.Stack.Ingress(in.Name) != nil
		switch {
		case errText != "":
			ic.Action, ic.Error = ActionUnknown, errText
		case ic.Action != "":
		case !stored && full:
			ic.Action = ActionCreate
		case len(c.b.steps) > start:
			ic.Action = ActionUpdate
		default:
			ic.Action = ActionNoOp
		}
		c.plan.Ingresses = append(c.plan.Ingresses, ic)
	}
	for _, name := range c.leavingIngresses() {
		if !c.scope.hasIngress(name) || c.scope.Sync {
			continue
		}
		ic := IngressChange{Ingress: name, Action: ActionDestroy}
		if isFreed(c.doc.Ingresses, name) {
			ic.Action = ActionFree
		} else if errText := firstOf(c.releases(name, &ic), c.pendingIngress(name, &ic)); errText != "" {
			ic.Action, ic.Error = ActionUnknown, errText
		}
		c.plan.Ingresses = append(c.plan.Ingresses, ic)
	}
}

// leavingIngresses are the ingresses the stored stack has and the desired
// one lacks, then those only pending teardowns remember, by name.
func (c *computation) leavingIngresses() []string {
	var out []string
	if c.doc.Stack != nil {
		for _, in := range c.doc.Stack.Ingresses {
			if c.desired.Ingress(in.Name) == nil {
				out = append(out, in.Name)
			}
		}
	}
	for _, name := range pendingNames(c.doc.Ingresses) {
		if c.desired.Ingress(name) == nil && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// releases tears down, on each load balancer ingress name (as stored) lets
// go of, what the desired stack's rules naming it do not want. It returns
// an error text when one could not be observed.
func (c *computation) releases(name string, ic *IngressChange) string {
	if c.doc.Stack == nil || c.doc.Stack.Ingress(name) == nil {
		return ""
	}
	lbs, remain := releases(c.doc.Stack, c.desired, name)
	errText := ""
	for _, lb := range lbs {
		ic.Released = append(ic.Released, lb)
		errText = firstOf(errText, c.teardown(KindIngress, name, IngressPart(c.doc.Stack, name, lb), lb, remain[lb]))
	}
	return errText
}

// pendingIngress finishes the teardowns an earlier apply left of ingress
// name, keeping what the desired stack's rules want.
func (c *computation) pendingIngress(name string, ic *IngressChange) string {
	errText := ""
	for _, part := range pendingOf(c.doc.Ingresses, name) {
		for _, lb := range part.LoadBalancers {
			remain := ingress.DesiredLB{LoadBalancer: lb.Name}
			if d := c.desired.LoadBalancer(lb.Name); d != nil && d.Provider == lb.Provider {
				remain = ingress.Wanted(lb.Name, c.desired.Ingresses)
			}
			ic.Pending = append(ic.Pending, lb.Name)
			errText = firstOf(errText, c.teardown(KindIngress, name, part, lb.Name, remain))
		}
	}
	return errText
}

// teardown plans one ingress teardown: recorded as pending by the intent
// (unless it is already), carried out, then cleared.
func (c *computation) teardown(kind, name string, part *config.Stack, lb string, remain ingress.DesiredLB) string {
	object := Address(kind, name)
	if !hasPending(c.doc, kind, name, part) {
		c.intent.pending = append(c.intent.pending, StateChange{Kind: AddPending, Object: object, Part: part})
	}
	block := part.LoadBalancer(lb)
	if block == nil {
		// Nothing is known of where it was: only the record can go.
		c.b.add(Step{Kind: StepRecord, Object: object, Changes: []StateChange{{Kind: ClearPending, Object: object, Part: part}}})
		return ""
	}
	steps, err := c.b.teardownLB(object, block, remain, c.world)
	if err != nil {
		return err.Error()
	}
	c.b.add(Step{Kind: StepRecord, Object: object, Changes: []StateChange{{Kind: ClearPending, Object: object, Part: part}}, After: steps})
	return ""
}

// enrollments plans the enrollments of the desired stack, then those that
// left it (and those only a pending revocation remembers).
func (c *computation) enrollments() {
	groups := c.scopedGroups()
	for _, e := range c.desired.Enrollments {
		full := c.scope.hasEnrollment(e.Name)
		if !full && !groups[e.Source] {
			continue
		}
		object := Address(KindEnrollment, e.Name)
		ec := EnrollmentChange{Enrollment: e.Name}
		if isFreed(c.doc.Enrollments, e.Name) {
			if !c.scope.All() {
				continue
			}
			ec.Action = ActionResume
			c.intent.marks = append(c.intent.marks, StateChange{Kind: Resume, Object: object})
		}
		var stored *config.Enrollment
		if c.doc.Stack != nil {
			stored = c.doc.Stack.Enrollment(e.Name)
		}
		if full && !c.scope.Sync {
			ec.Settings = enrollment.SettingChanges(stored, e)
		}
		start := len(c.b.steps)
		c.b.enrollmentSteps(c.desired, e, c.world, &ec)
		if full && !c.scope.Sync && stored != nil && enrollment.TargetChanged(stored, e) && ec.Error == "" {
			ec.Retarget = enrollment.TargetString(stored.Target)
			ec.Error = c.revokeOld(e.Name, e, EnrollmentPart(c.doc.Stack, e.Name))
		}
		if full && !c.scope.Sync && ec.Error == "" {
			ec.Error = c.pendingEnrollment(e.Name, e, &ec)
		}
		switch {
		case ec.Error != "":
			ec.Action = ActionUnknown
		case ec.Action != "":
		case stored == nil && full:
			ec.Action = ActionCreate
		case len(c.b.steps) > start || len(ec.Settings) > 0:
			ec.Action = ActionUpdate
		default:
			ec.Action = ActionNoOp
		}
		c.plan.Enrollments = append(c.plan.Enrollments, ec)
	}
	for _, name := range c.leavingEnrollments() {
		if !c.scope.hasEnrollment(name) || c.scope.Sync {
			continue
		}
		ec := EnrollmentChange{Enrollment: name, Action: ActionDestroy}
		switch {
		case isFreed(c.doc.Enrollments, name):
			ec.Action = ActionFree
		default:
			errText := ""
			if c.doc.Stack != nil && c.doc.Stack.Enrollment(name) != nil {
				errText = c.revokeOld(name, nil, EnrollmentPart(c.doc.Stack, name))
			}
			if errText = firstOf(errText, c.pendingEnrollment(name, nil, &ec)); errText != "" {
				ec.Action, ec.Error = ActionUnknown, errText
			}
		}
		c.plan.Enrollments = append(c.plan.Enrollments, ec)
	}
}

func (c *computation) leavingEnrollments() []string {
	var out []string
	if c.doc.Stack != nil {
		for _, e := range c.doc.Stack.Enrollments {
			if c.desired.Enrollment(e.Name) == nil {
				out = append(out, e.Name)
			}
		}
	}
	for _, name := range pendingNames(c.doc.Enrollments) {
		if c.desired.Enrollment(name) == nil && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// pendingEnrollment finishes the revocations an earlier apply left at old
// targets of enrollment name (current is it in the desired stack, or nil).
func (c *computation) pendingEnrollment(name string, current *config.Enrollment, ec *EnrollmentChange) string {
	errText := ""
	for _, part := range pendingOf(c.doc.Enrollments, name) {
		if pe := part.Enrollment(name); pe != nil {
			ec.Pending = append(ec.Pending, enrollment.TargetString(pe.Target))
		}
		errText = firstOf(errText, c.revokeOld(name, current, part))
	}
	return errText
}

// revokeOld revokes at the target of enrollment name as part holds it what
// the enrollment made there: everything when current is nil (it left the
// stack), else what the current target does not list too, each once the
// current target's authorization of its member (or of the member
// replacing it) is made. Waiting for that one only, not for every
// authorization of the plan, keeps the graph acyclic: a member a roll
// replaces is drained after its revocations, and a later batch's
// authorizations come after that drain. The revocations are recorded as
// pending by the intent and cleared once done.
func (c *computation) revokeOld(name string, current *config.Enrollment, part *config.Stack) string {
	object := Address(KindEnrollment, name)
	old := part.Enrollment(name)
	if old == nil {
		return ""
	}
	t := old.Target
	obs, ok := c.world.Authorizers[TargetKey(t.Provider, t.Type)]
	switch {
	case !ok:
		return "target " + enrollment.TargetString(t) + " was not observed"
	case obs.Err != nil:
		return "target " + enrollment.TargetString(t) + ": " + obs.Err.Error()
	}
	if !hasPending(c.doc, KindEnrollment, name, part) {
		c.intent.pending = append(c.intent.pending, StateChange{Kind: AddPending, Object: object, Part: part})
	}
	var rev enrollment.Changes
	var after func(instance.ID) StepID
	if current == nil {
		rev = enrollment.Teardown(name, obs.Authorizations, enrollment.ReasonDestroy)
	} else {
		now := c.world.Authorizers[TargetKey(current.Target.Provider, current.Target.Type)]
		rev = enrollment.Retarget(name, obs.Authorizations, now.Authorizations)
		after = func(member instance.ID) StepID { // make before break
			if id := c.b.authorized[authKey{where: name, id: string(member)}]; id != 0 {
				return id
			}
			if l := c.b.leaverOf(old.Source, member); l != nil && l.by != nil {
				return c.b.authorizedFor(name, l.by)
			}
			return 0
		}
	}
	src := old.Source
	steps := c.b.revokeAt(object, t.Provider, t.Type, name, src, rev, after)
	c.b.add(Step{Kind: StepRecord, Object: object, Changes: []StateChange{{Kind: ClearPending, Object: object, Part: part}}, After: steps})
	return ""
}

// EnrollmentPart is enrollment name as applied in st (with its target), in
// a stack of its own: how a revocation at a target it left is recorded
// until it is done.
func EnrollmentPart(st *config.Stack, name string) *config.Stack {
	part := &config.Stack{Name: st.Name}
	if e := st.Enrollment(name); e != nil {
		part.Enrollments = []*config.Enrollment{e}
	}
	return part
}

// scopedGroups are the groups a scoped plan covers (nil for a full plan).
func (c *computation) scopedGroups() map[string]bool {
	return scopedGroups(c.scope, c.doc)
}

// scopedGroups are the groups scope names that it plans (nil when it names
// none): the followers of a scoped plan act for these groups' members only.
func scopedGroups(scope Scope, doc *state.Document) map[string]bool {
	if scope.Groups == nil {
		return nil
	}
	out := make(map[string]bool, len(scope.Groups))
	for _, g := range scope.Groups {
		if scope.plansGroup(doc, g) {
			out[g] = true
		}
	}
	return out
}

func followsAny(names []string, groups map[string]bool) bool {
	return slices.ContainsFunc(names, func(g string) bool { return groups[g] })
}

// ingressGroups are the groups an ingress's rules name, each once.
func ingressGroups(in *config.Ingress) []string {
	var out []string
	for _, r := range in.Rules {
		for _, g := range r.Groups {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

func pendingOf(m map[string]*state.ControllerStatus, name string) []*config.Stack {
	if m[name] == nil {
		return nil
	}
	return m[name].Pending
}

// pendingNames are the names in m with pending teardowns, sorted.
func pendingNames(m map[string]*state.ControllerStatus) []string {
	var out []string
	for name, st := range m {
		if st != nil && len(st.Pending) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func hasPending(doc *state.Document, kind, name string, part *config.Stack) bool {
	m := doc.Ingresses
	if kind == KindEnrollment {
		m = doc.Enrollments
	}
	return slices.ContainsFunc(pendingOf(m, name), func(p *config.Stack) bool { return sameStack(p, part) })
}

// firstOf is the first non-empty text.
func firstOf(texts ...string) string {
	for _, t := range texts {
		if t != "" {
			return t
		}
	}
	return ""
}

// ComputeFree plans freeing object (a group, ingress or enrollment of the
// stored stack): the intent marks it freed, and an enrollment with
// destroy_on_free revokes its authorizations (world has its target).
// Nothing else is touched.
func ComputeFree(doc *state.Document, world World, kind, name string) (*Plan, error) {
	if doc == nil || doc.Stack == nil {
		return nil, fmt.Errorf("plan: %s %q: no stack is stored", kind, name)
	}
	p := &Plan{FormatVersion: FormatVersion, Stack: doc.Stack.Name, Desired: doc.Stack,
		StateLineage: doc.Lineage, StateSerial: doc.Serial}
	c := &computation{b: newBuilder(), desired: doc.Stack, doc: doc, world: world, plan: p}
	object := Address(kind, name)
	c.intent.marks = append(c.intent.marks, StateChange{Kind: MarkFreed, Object: object})
	if e := doc.Stack.Enrollment(name); kind == KindEnrollment && e != nil && e.DestroyOnFree {
		ec := EnrollmentChange{Enrollment: name, Action: ActionUpdate}
		if errText := c.revokeOld(name, nil, EnrollmentPart(doc.Stack, name)); errText != "" {
			ec.Action, ec.Error = ActionUnknown, errText
		}
		p.Enrollments = append(p.Enrollments, ec)
	}
	c.b.intent = c.intent.ordered()
	p.Steps = c.b.finish()
	p.Summary = CountSteps(p.Steps)
	if err := Check(p.Steps); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return p, nil
}
