package operation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/stateedit"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The state verbs (`state rm`, `state mv`, `import`) decide with package
// stateedit and act here, under one hold of the state lock: read the
// state, list the members the edit concerns, decide, relabel through the
// instance providers, then store the edited state (the local backend keeps
// the previous one as .backup).

// StateRemove forgets the objects at addrs; see stateedit.Remove.
func (r *Runner) StateRemove(ctx context.Context, addrs []stateedit.Address) (*stateedit.Edit, error) {
	return r.editState(ctx, "state rm", groupsOf(addrs...), nil, func(doc *state.Document, listed stateedit.Listing) (*stateedit.Edit, error) {
		return stateedit.Remove(doc, addrs, listed)
	})
}

// StateMove renames an object in the state, or moves a member to another
// group; see stateedit.Move.
func (r *Runner) StateMove(ctx context.Context, from, to stateedit.Address) (*stateedit.Edit, error) {
	return r.editState(ctx, "state mv", groupsOf(from), nil, func(doc *state.Document, listed stateedit.Listing) (*stateedit.Edit, error) {
		return stateedit.Move(doc, from, to, listed)
	})
}

// Import adopts instances into group name of the loaded stack st; see
// stateedit.Import. confirm is shown the decided edit before anything is
// done, and stops the import by returning an error.
func (r *Runner) Import(ctx context.Context, st *config.Stack, name string, ids []instance.ID, confirm func(*stateedit.Edit) error) (*stateedit.Edit, error) {
	g := st.Group(name)
	if g == nil {
		return nil, fmt.Errorf("the stack declares no group %q: declare it in the stack files, then import into it", name)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("group %q: no instance IDs given", name)
	}
	return r.editState(ctx, "import", nil, confirm, func(doc *state.Document, _ stateedit.Listing) (*stateedit.Edit, error) {
		if d := checkStackName(st, doc); d != nil {
			return nil, fmt.Errorf("%s: %s", d.Summary, d.Detail)
		}
		c, err := r.client(ctx, g.Instance.Provider)
		if err != nil {
			return nil, fmt.Errorf("group %q: %w", name, err)
		}
		all, err := c.Instance(g.Instance.Type).DescribeInstances(ctx, nil, false)
		if err != nil {
			return nil, fmt.Errorf("group %q: list the provider's %s instances: %w", name, g.Instance.Type, err)
		}
		return stateedit.Import(doc, stateedit.ImportRequest{Stack: st.Name, Group: g, IDs: ids, All: all})
	})
}

// groupsOf are the groups whose members an edit of addrs concerns.
func groupsOf(addrs ...stateedit.Address) []string {
	var out []string
	for _, a := range addrs {
		if a.Kind == plan.KindGroup {
			out = append(out, a.Name)
		}
	}
	return out
}

// editState runs one edit under the lock: list the groups' members (those
// the state holds a configuration of), decide, confirm (when asked),
// relabel, store. The state is stored only when the edit changed it.
func (r *Runner) editState(ctx context.Context, op string, groups []string, confirm func(*stateedit.Edit) error,
	decide func(*state.Document, stateedit.Listing) (*stateedit.Edit, error)) (*stateedit.Edit, error) {
	unlock, err := r.lock(ctx, op)
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	listed := stateedit.Listing{}
	for _, name := range groups {
		if doc.Stack == nil || doc.Stack.Group(name) == nil {
			continue
		}
		if _, done := listed[name]; done {
			continue
		}
		g, err := r.instances(ctx, doc.Stack.Name, doc.Stack.Group(name))
		if err != nil {
			return nil, err
		}
		descs, err := g.Describe(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("%s: list the members of group %q: %w; nothing was changed", op, name, err)
		}
		listed[name] = descs
	}
	e, err := decide(doc, listed)
	if err != nil {
		return nil, err
	}
	if confirm != nil {
		if err := confirm(e); err != nil {
			return nil, err
		}
	}
	for i, rl := range e.Relabels {
		if err := r.relabel(ctx, rl); err != nil {
			return nil, fmt.Errorf("%s: %w; %d of %d instances were relabeled and the state is unchanged: run the command again",
				op, err, i, len(e.Relabels))
		}
	}
	if changed, err := differs(doc, e.Doc); err != nil || !changed {
		return e, err
	}
	// Write stores e.Doc at the serial doc was read at.
	e.Doc.Serial, e.Doc.Lineage = doc.Serial, doc.Lineage
	if err := r.store.Write(ctx, e.Doc); err != nil {
		return nil, fmt.Errorf("%s: the instances were relabeled, but storing the state failed: %w; run the command again", op, err)
	}
	return e, nil
}

func (r *Runner) relabel(ctx context.Context, rl stateedit.Relabel) error {
	c, err := r.client(ctx, rl.Group.Instance.Provider)
	if err != nil {
		return fmt.Errorf("group %q: %w", rl.Group.Name, err)
	}
	if err := c.Instance(rl.Group.Instance.Type).Label(ctx, rl.ID, rl.Tags); err != nil {
		return fmt.Errorf("label instance %q: %w", rl.ID, err)
	}
	return nil
}

func differs(a, b *state.Document) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return !bytes.Equal(ja, jb), nil
}

// LockStatus says who holds the state lock, or held it last.
func (r *Runner) LockStatus(ctx context.Context) (state.LockStatus, error) {
	b, err := r.breaker()
	if err != nil {
		return state.LockStatus{}, err
	}
	return b.LockStatus(ctx)
}

// ForceUnlock breaks lock id (or clears the record a dead holder left).
// The caller decides first (state.CheckForceUnlock).
func (r *Runner) ForceUnlock(ctx context.Context, id string) (state.ForceUnlockResult, error) {
	b, err := r.breaker()
	if err != nil {
		return state.ForceUnlockResult{}, err
	}
	return b.ForceUnlock(ctx, id)
}

// StateName says where the state is (the file, or the etcd backend).
func (r *Runner) StateName() string { return stateName(r.backend, r.opts.WorkDir) }

// IsLocalState reports whether the state is the local file.
func (r *Runner) IsLocalState() bool { return r.backend.IsLocal() }

func (r *Runner) breaker() (state.LockBreaker, error) {
	b, ok := r.raw.(state.LockBreaker)
	if !ok {
		return nil, fmt.Errorf("the state backend %s cannot break locks", strings.TrimSpace(r.backend.String()))
	}
	return b, nil
}
