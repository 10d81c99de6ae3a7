package operation

import (
	"cmp"

	"context"
	"fmt"
	"github.com/hashicorp/go-hclog"
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// recorder keeps a state document in step with what the group controllers
// report and writes it at most every interval (longer for a state slow to
// write), plus on flush. Memberships
// being changed are held as maps by ID, so recording a batch costs the
// batch, and a group's Instances list is rebuilt (sorted by ID) only when the
// document is written.
//
// The caller holds the state lock for the recorder's lifetime.
type recorder struct {
	store    state.Store
	interval time.Duration
	// stop is called with the error of a failed write, to stop the work.
	stop func(error)
	log  hclog.Logger

	mu        sync.Mutex
	doc       *state.Document
	members   map[string]map[string]state.Instance // group -> ID -> instance
	changed   map[string]bool                      // groups whose Instances need rebuilding
	dirty     bool
	nextWrite time.Time
	err       error
}

func newRecorder(store state.Store, doc *state.Document, interval time.Duration, stop func(error), log hclog.Logger) *recorder {
	return &recorder{
		log:       log,
		store:     store,
		doc:       doc,
		interval:  interval,
		stop:      stop,
		members:   map[string]map[string]state.Instance{},
		changed:   map[string]bool{},
		nextWrite: time.Now().Add(interval),
	}
}

func instanceOf(m group.Member) state.Instance {
	return state.Instance{
		ID:         string(m.ID),
		LogicalID:  m.LogicalID,
		ConfigHash: m.ConfigHash,
		State:      string(m.State),
		Address:    m.Address,
	}
}

// seed replaces a group's recorded members with the live ones observed.
func (w *recorder) seed(name string, members []group.Member) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byID := make(map[string]state.Instance, len(members))
	for _, m := range members {
		if m.State != instance.StateTerminating {
			byID[string(m.ID)] = instanceOf(m)
		}
	}
	w.members[name] = byID
	w.doc.Group(name)
	w.changed[name], w.dirty = true, true
}

// markDirty makes the next flush write even if no member changed.
func (w *recorder) markDirty() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirty = true
}

// resume marks a group managed again.
func (w *recorder) resume(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.doc.Group(name).Freed = false
	w.dirty = true
}

// resumeUpdate clears a group's UpdateStopped mark.
func (w *recorder) resumeUpdate(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.doc.Group(name).UpdateStopped = false
	w.dirty = true
}

// removeGroup drops a group from the state: its record and its stored
// configuration.
func (w *recorder) removeGroup(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.members, name)
	delete(w.changed, name)
	delete(w.doc.Groups, name)
	if st := w.doc.Stack; st != nil && st.Group(name) != nil {
		out := *st
		out.Groups = slices.DeleteFunc(slices.Clone(st.Groups), func(g *config.Group) bool { return g.Name == name })
		w.doc.Stack = &out
	}
	w.dirty = true
}

// record returns the callback a group controller reports batches to.
func (w *recorder) record(name string) func(group.Record) {
	return func(rec group.Record) {
		w.mu.Lock()
		byID := w.members[name]
		if byID == nil {
			byID = map[string]state.Instance{}
			for _, in := range w.doc.Group(name).Instances {
				byID[in.ID] = in
			}
			w.members[name] = byID
		}
		for _, m := range rec.Created {
			byID[string(m.ID)] = instanceOf(m)
		}
		for _, id := range rec.Destroyed {
			delete(byID, string(id))
		}
		w.changed[name], w.dirty = true, true
		due := !time.Now().Before(w.nextWrite)
		w.mu.Unlock()
		if due {
			if err := w.flush(context.Background()); err != nil {
				w.stop(err)
			}
		}
	}
}

// flush writes the document if anything changed since the last write. After
// a failed write every later flush returns that error.
func (w *recorder) flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || !w.dirty {
		return w.err
	}
	for name := range w.changed {
		byID := w.members[name]
		st := w.doc.Group(name)
		st.Instances = make([]state.Instance, 0, len(byID))
		for _, in := range byID {
			st.Instances = append(st.Instances, in)
		}
		slices.SortFunc(st.Instances, func(a, b state.Instance) int { return cmp.Compare(a.ID, b.ID) })
	}
	start := time.Now()
	if err := w.store.Write(ctx, w.doc); err != nil {
		w.err = fmt.Errorf("record state: %w", err)
		return w.err
	}
	took := time.Since(start)
	w.log.Debug("state written", "serial", w.doc.Serial, "took", took)
	clear(w.changed)
	w.dirty = false
	// Space writes by the interval, or by ten times what this one took, so
	// rewriting a large state never takes more than about a tenth of the
	// time: the cost of recording stays linear in the work done.
	w.nextWrite = time.Now().Add(max(w.interval, 10*took))
	return nil
}
