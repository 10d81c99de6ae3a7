package operation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// An enrollment authorizes running members only, and a provider may take
// seconds or minutes to start one (a machine, a container). So `apply` and
// `group scale` wait, before syncing the ingresses and enrollments, until
// the members they created in a group an enrollment follows are running:
// the authorizations are then right when the command returns, with or
// without a running watch. Load balancers need no wait (a pending member is
// registered at once), and the wait ends early for members that vanish or
// terminate. It is bounded by runningWait; when that passes, the followers
// are synced with the members as they are (backends registered, running
// members authorized) and the command says which members are still
// pending: they stay recorded in the state, and are authorized once running
// by `infrakit watch`, or by the next apply or group verb.

// runningWait bounds how long apply and the group verbs wait for the
// members they created to run. Tests shorten it.
var runningWait = 10 * time.Minute

// Bounds of the pause between two listings while waiting: the first is
// short (a process starts in milliseconds), later ones longer.
const (
	awaitFirstPause = 100 * time.Millisecond
	awaitMaxPause   = time.Second
)

// ActionWait is the Progress action of waiting for created members to run:
// Done of Total are running (or gone).
const ActionWait = "wait"

// enrolled are the groups among names that an enrollment of st follows
// (less those doc marks freed; nil doc: none is).
func enrolled(st *config.Stack, doc *state.Document, names []string) []string {
	var out []string
	if st == nil {
		return nil
	}
	for _, e := range st.Enrollments {
		if doc != nil && freed(doc.Enrollments, e.Name) {
			continue
		}
		if slices.Contains(names, e.Source) && !slices.Contains(out, e.Source) {
			out = append(out, e.Source)
		}
	}
	return out
}

// pendingRecorded are the members of the named groups that w records as
// pending: those apply created (recorded as just provisioned), and those it
// found starting. Groups without any are left out.
func pendingRecorded(w *recorder, names []string) map[string][]instance.ID {
	if w == nil || len(names) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]instance.ID{}
	for _, name := range names {
		for id, in := range w.members[name] {
			if in.State == string(instance.StatePending) {
				out[name] = append(out[name], instance.ID(id))
			}
		}
		slices.Sort(out[name])
	}
	for name, ids := range out {
		if len(ids) == 0 {
			delete(out, name)
		}
	}
	return out
}

// awaitRunning waits, listing the groups again with growing pauses, until
// no member of await (by group) is listed pending, reporting progress as
// it goes (ActionWait), and updates m with the last listing. A group whose
// listing fails is not waited for (its followers are held anyway). It
// returns an error naming the members still pending when runningWait
// passes, and ctx's error when ctx ends.
func (r *Runner) awaitRunning(ctx context.Context, st *config.Stack, doc *state.Document, m *membership, await map[string][]instance.ID, withProps map[string]bool) error {
	if len(await) == 0 {
		return nil
	}
	deadline := time.Now().Add(runningWait)
	pause := awaitFirstPause
	reported := map[string]int{}
	for {
		pending := map[string][]instance.ID{}
		for _, name := range slices.Sorted(maps.Keys(await)) {
			if _, bad := m.failed[name]; bad {
				continue
			}
			ids := stillPending(m, name, await[name])
			done := len(await[name]) - len(ids)
			if was, ok := reported[name]; !ok && len(ids) > 0 || ok && was != done {
				reported[name] = done
				r.progress(Progress{Group: name, Action: ActionWait, Done: done, Total: len(await[name])})
			}
			if len(ids) > 0 {
				pending[name] = ids
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return stillPendingError(pending, await)
		}
		t := time.NewTimer(min(pause, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, awaitMaxPause)
		again := r.observeMembers(ctx, st, doc, slices.Sorted(maps.Keys(pending)), withProps)
		for name := range pending {
			delete(m.failed, name)
			delete(m.members, name)
			delete(m.descs, name)
			if err, bad := again.failed[name]; bad {
				m.failed[name] = err
				continue
			}
			m.members[name], m.descs[name] = again.members[name], again.descs[name]
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// stillPending are the members of ids that m lists pending in the group
// named; one not listed (gone) or terminating is not waited for.
func stillPending(m *membership, name string, ids []instance.ID) []instance.ID {
	state := make(map[instance.ID]instance.State, len(m.members[name]))
	for _, mem := range m.members[name] {
		state[mem.ID] = mem.State
	}
	var out []instance.ID
	for _, id := range ids {
		if state[id] == instance.StatePending {
			out = append(out, id)
		}
	}
	return out
}

// stillPendingError says which created members did not run in time.
func stillPendingError(pending, await map[string][]instance.ID) error {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		ids := pending[name]
		shown := ids
		if len(shown) > 5 {
			shown = shown[:5]
		}
		list := make([]string, len(shown))
		for i, id := range shown {
			list[i] = string(id)
		}
		more := ""
		if len(ids) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(ids)-len(shown))
		}
		parts = append(parts, fmt.Sprintf("group %q: %d of %d still pending (%s%s)",
			name, len(ids), len(await[name]), strings.Join(list, ", "), more))
	}
	return fmt.Errorf("new members not running after waiting %s for them: %s. They are recorded in the state and registered "+
		"with the load balancers, and are authorized once running, by `infrakit watch` or the next apply or group verb",
		runningWait, strings.Join(parts, "; "))
}

// progress reports p to Options.Progress, when set.
func (r *Runner) progress(p Progress) {
	if r.opts.Progress != nil {
		r.opts.Progress(p)
	}
}
