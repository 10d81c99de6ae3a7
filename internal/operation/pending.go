package operation

import (
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// Teardowns that fail are kept in the state (ControllerStatus.Pending):
// once apply stores the new stack, the stored one no longer names the load
// balancer an ingress let go of, or the target an enrollment left, so
// without the record what is still on them would be orphaned. Each pending
// teardown is a small stack holding the block as applied; the functions
// that tear down from the stored stack (release, releaseTarget) take it in
// the stored stack's place. Plans preview them and every apply retries
// them until they succeed; while an ingress or enrollment is freed its
// pending teardowns are left as they are.

// pendingOf returns the pending teardowns recorded for name in m.
func pendingOf(m map[string]*state.ControllerStatus, name string) []*config.Stack {
	if m[name] == nil {
		return nil
	}
	return m[name].Pending
}

// pendingNames are the names in m with pending teardowns that st lacks,
// sorted.
func pendingNames(m map[string]*state.ControllerStatus, has func(string) bool) []string {
	var out []string
	for name, st := range m {
		if st != nil && len(st.Pending) > 0 && !has(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ingressPart is what ingress name, as applied in st, has to do with load
// balancer lb: a stack holding the ingress with only the rules naming lb,
// and lb's block.
func ingressPart(st *config.Stack, name, lb string) *config.Stack {
	part := &config.Stack{Name: st.Name}
	if in := st.Ingress(name); in != nil {
		cp := *in
		cp.Rules = slices.DeleteFunc(slices.Clone(in.Rules), func(r config.Rule) bool { return r.LoadBalancer != lb })
		part.Ingresses = []*config.Ingress{&cp}
	}
	if b := st.LoadBalancer(lb); b != nil {
		part.LoadBalancers = []*config.LoadBalancer{b}
	}
	return part
}

// enrollmentPart is enrollment name as applied in st (with its target), in
// a stack of its own.
func enrollmentPart(st *config.Stack, name string) *config.Stack {
	part := &config.Stack{Name: st.Name}
	if e := st.Enrollment(name); e != nil {
		part.Enrollments = []*config.Enrollment{e}
	}
	return part
}

// setPending records parts as the pending teardowns of name in *m (one
// equal to another is kept once), and drops a record left with nothing.
// It reports whether the record changed.
func setPending(m *map[string]*state.ControllerStatus, name string, parts []*config.Stack) bool {
	var keep []*config.Stack
	for _, p := range parts {
		if !slices.ContainsFunc(keep, func(k *config.Stack) bool { return sameStack(k, p) }) {
			keep = append(keep, p)
		}
	}
	rec := (*m)[name]
	if rec == nil {
		if len(keep) == 0 {
			return false
		}
		if *m == nil {
			*m = map[string]*state.ControllerStatus{}
		}
		rec = &state.ControllerStatus{}
		(*m)[name] = rec
	}
	if len(keep) == 0 && len(rec.Pending) == 0 {
		return false
	}
	rec.Pending = keep
	if !rec.Freed && len(rec.Pending) == 0 {
		delete(*m, name)
	}
	return true
}

// keepPending is the record an object verb leaves for name when it drops
// its record (destroy) or replaces it (free): nil, or a record with only
// its pending teardowns (and freed as said).
func keepPending(m map[string]*state.ControllerStatus, name string, freed bool) *state.ControllerStatus {
	pending := pendingOf(m, name)
	if !freed && len(pending) == 0 {
		return nil
	}
	return &state.ControllerStatus{Freed: freed, Pending: pending}
}
