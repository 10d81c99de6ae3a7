package execute

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// StateRecorder is the Recorder of a state store: it keeps a document in
// step with the steps done and writes it through the store. A record step
// is written at once (an intent must be durable before the steps after it
// act); members made and destroyed are written at most every interval
// (longer for a state slow to write), and by Flush. Memberships being
// changed are held as maps by ID, so noting a member costs that member, and
// a group's Instances list is rebuilt (sorted by ID) only when the document
// is written.
//
// The caller holds the state lock for the recorder's lifetime.
type StateRecorder struct {
	store    state.Store
	desired  *config.Stack
	interval time.Duration
	log      hclog.Logger

	mu        sync.Mutex
	doc       *state.Document
	members   map[string]map[string]state.Instance // group -> ID -> instance
	changed   map[string]bool                      // groups whose Instances need rebuilding
	dirty     bool
	nextWrite time.Time
	err       error
}

var _ Recorder = (*StateRecorder)(nil)

// NewStateRecorder returns the recorder of doc (as read from store, under
// its lock) for a plan whose desired stack is desired.
func NewStateRecorder(store state.Store, doc *state.Document, desired *config.Stack, interval time.Duration, log hclog.Logger) *StateRecorder {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &StateRecorder{
		store: store, doc: doc, desired: desired, interval: interval, log: log,
		members:   map[string]map[string]state.Instance{},
		changed:   map[string]bool{},
		nextWrite: time.Now().Add(interval),
	}
}

// Document is the document as recorded so far (the caller must not change
// it while the recorder is in use).
func (w *StateRecorder) Document() *state.Document {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rebuild()
	return w.doc
}

// Record applies changes and writes the document, except changes that only
// set recorded members (observationOnly), which are written with the next
// batch or by Flush.
func (w *StateRecorder) Record(ctx context.Context, changes []plan.StateChange) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.rebuild()
	for _, c := range changes {
		plan.ApplyChange(w.doc, w.desired, c)
		if c.Kind == plan.SetMembers || c.Kind == plan.ForgetGroup {
			_, name := plan.SplitObject(c.Object)
			delete(w.members, name)
			delete(w.changed, name)
		}
	}
	w.dirty = true
	if observationOnly(changes) {
		// Correcting the record of members to what was observed is no
		// intent: nothing acts on it, and a pass that loses it observes
		// the same again. It is written with the members the steps make
		// (or by Flush), which keeps a heal to one write, not two.
		return nil
	}
	return w.write(ctx)
}

// observationOnly reports whether changes only set recorded members.
func observationOnly(changes []plan.StateChange) bool {
	for _, c := range changes {
		if c.Kind != plan.SetMembers {
			return false
		}
	}
	return len(changes) > 0
}

// Created notes a member provisioned.
func (w *StateRecorder) Created(ctx context.Context, group string, m group.Member) error {
	return w.note(ctx, group, func(byID map[string]state.Instance) {
		byID[string(m.ID)] = state.Instance{ID: string(m.ID), LogicalID: m.LogicalID, ConfigHash: m.ConfigHash,
			State: string(m.State), Address: m.Address}
	})
}

// Destroyed notes a member destroyed.
func (w *StateRecorder) Destroyed(ctx context.Context, group string, id instance.ID) error {
	return w.note(ctx, group, func(byID map[string]state.Instance) { delete(byID, string(id)) })
}

func (w *StateRecorder) note(ctx context.Context, name string, change func(map[string]state.Instance)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	byID := w.members[name]
	if byID == nil {
		byID = map[string]state.Instance{}
		for _, in := range w.doc.Group(name).Instances {
			byID[in.ID] = in
		}
		w.members[name] = byID
	}
	change(byID)
	w.changed[name], w.dirty = true, true
	if time.Now().Before(w.nextWrite) {
		return nil
	}
	return w.write(ctx)
}

// Flush writes the document if anything changed since the last write. After
// a failed write every later call returns that error.
func (w *StateRecorder) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || !w.dirty {
		return w.err
	}
	return w.write(ctx)
}

// rebuild puts the members held as maps back into the document.
func (w *StateRecorder) rebuild() {
	for name := range w.changed {
		byID := w.members[name]
		if _, kept := w.doc.Groups[name]; !kept && len(byID) == 0 {
			continue // forgotten meanwhile
		}
		st := w.doc.Group(name)
		st.Instances = make([]state.Instance, 0, len(byID))
		for _, in := range byID {
			st.Instances = append(st.Instances, in)
		}
		slices.SortFunc(st.Instances, func(a, b state.Instance) int { return cmp.Compare(a.ID, b.ID) })
	}
	clear(w.changed)
}

func (w *StateRecorder) write(ctx context.Context) error {
	w.rebuild()
	start := time.Now()
	if err := w.store.Write(ctx, w.doc); err != nil {
		w.err = fmt.Errorf("record state: %w", err)
		return w.err
	}
	took := time.Since(start)
	w.log.Debug("state written", "serial", w.doc.Serial, "took", took)
	w.dirty = false
	// Space writes by the interval, or by ten times what this one took, so
	// rewriting a large state never takes more than about a tenth of the
	// time: the cost of recording stays linear in the work done.
	w.nextWrite = time.Now().Add(max(w.interval, 10*took))
	return nil
}
