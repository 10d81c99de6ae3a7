package operation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// ErrNoGroup is matched (errors.Is) by the error for a group the state does not know.
var ErrNoGroup = controller.ErrNotFound

// GroupView is a group as the providers report it now: the State of its
// controller.Object.
type GroupView struct {
	Name string `json:"name"`
	// Size is the desired size of cattle (nil for pets).
	Size       *int `json:"size,omitempty"`
	Freed      bool `json:"freed,omitempty"`
	Destroying bool `json:"destroying,omitempty"`
	// ConfigHash is the configuration hash members should carry; members
	// with another are out of date (empty when the configuration is not in
	// the state).
	ConfigHash string `json:"config_hash,omitempty"`
	// UpdateStopped is set after `group stop-update`, until the next apply.
	UpdateStopped bool `json:"update_stopped,omitempty"`
	// Instances are the live members (terminating ones left out), by ID,
	// with their health.
	Instances []group.Member `json:"instances"`
	// Tags of each member, by ID.
	Tags map[instance.ID]map[string]string `json:"tags,omitempty"`
}

// groups is the controller.Group of a runner's stack.
type groups struct{ r *Runner }

var _ controller.Group = groups{}

// groupNames lists the groups of doc: the stored stack's in order, then the
// others the state records, by name.
func groupNames(doc *state.Document) []string {
	var names []string
	seen := map[string]bool{}
	if doc.Stack != nil {
		for _, g := range doc.Stack.Groups {
			names = append(names, g.Name)
			seen[g.Name] = true
		}
	}
	var rest []string
	for name := range doc.Groups {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

func storedGroup(doc *state.Document, name string) *config.Group {
	if doc.Stack == nil {
		return nil
	}
	return doc.Stack.Group(name)
}

// Describe observes the selected groups (every one in the state when meta
// is nil), members with health, up to Parallelism at once.
func (g groups) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	doc, err := g.r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	g.r.useProviders(doc.Stack)
	names := groupNames(doc)
	if meta != nil {
		if storedGroup(doc, meta.Name) == nil && doc.Groups[meta.Name] == nil {
			return nil, controller.NotFound(controller.KindGroup, meta.Name)
		}
		names = []string{meta.Name}
	}
	objs := make([]controller.Object, len(names))
	errs := make([]error, len(names))
	eg := &errgroup.Group{}
	eg.SetLimit(g.r.opts.Parallelism)
	for i, name := range names {
		eg.Go(func() error {
			v, err := g.r.view(ctx, doc, name)
			objs[i], errs[i] = groupObject(doc, v), err
			return nil
		})
	}
	_ = eg.Wait()
	return objs, errors.Join(errs...)
}

func groupObject(doc *state.Document, v *GroupView) controller.Object {
	obj := controller.Object{Spec: controller.Spec{Kind: controller.KindGroup, Metadata: controller.Metadata{Name: v.Name}}, Freed: v.Freed}
	if cfg := storedGroup(doc, v.Name); cfg != nil {
		obj.Spec.Metadata.Tags = cfg.Tags
		obj.Spec.Properties, _ = json.Marshal(cfg)
	}
	obj.State, _ = json.Marshal(v)
	return obj
}

// GroupViewOf decodes the State of a group's Object.
func GroupViewOf(obj controller.Object) (GroupView, error) {
	var v GroupView
	if err := json.Unmarshal(obj.State, &v); err != nil {
		return v, fmt.Errorf("group %q: decode state: %w", obj.Spec.Metadata.Name, err)
	}
	return v, nil
}

// view observes one group of doc, with health. A group recorded without its
// configuration cannot be observed; its recorded members are shown.
func (r *Runner) view(ctx context.Context, doc *state.Document, name string) (*GroupView, error) {
	v := &GroupView{Name: name, Instances: []group.Member{}, Tags: map[instance.ID]map[string]string{}}
	if st := doc.Groups[name]; st != nil {
		v.Freed, v.UpdateStopped, v.Destroying = st.Freed, st.UpdateStopped, st.Destroying
	}
	cfg := storedGroup(doc, name)
	if cfg == nil {
		if st := doc.Groups[name]; st != nil {
			for _, in := range st.Instances {
				v.Instances = append(v.Instances, group.Member{ID: instance.ID(in.ID), LogicalID: in.LogicalID,
					ConfigHash: in.ConfigHash, State: instance.State(in.State), Health: "unknown", Address: in.Address})
			}
		}
		return v, fmt.Errorf("group %q: its configuration is not in the state, so its provider is unknown; showing the recorded members", name)
	}
	if cfg.Size != nil {
		n := *cfg.Size
		v.Size = &n
	}
	v.ConfigHash = cfg.ConfigHash()
	inst, err := r.instances(ctx, doc.Stack.Name, cfg)
	if err != nil {
		return v, err
	}
	descs, members, err := inst.ObserveDescriptions(ctx, true)
	if err != nil {
		return v, err
	}
	for i, m := range members {
		if m.State == instance.StateTerminating {
			continue
		}
		v.Instances = append(v.Instances, m)
		v.Tags[m.ID] = descs[i].Tags
	}
	slices.SortFunc(v.Instances, func(a, b group.Member) int { return cmp.Compare(a.ID, b.ID) })
	return v, nil
}

// Spec returns the specs of the stored groups.
func (g groups) Spec(ctx context.Context) ([]controller.Spec, error) {
	doc, err := g.r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	var out []controller.Spec
	if doc.Stack != nil {
		for _, cfg := range doc.Stack.Groups {
			out = append(out, groupObject(doc, &GroupView{Name: cfg.Name}).Spec)
		}
	}
	return out, nil
}

// Size is the stored size of cattle, or the number of logical IDs of pets.
func (g groups) Size(ctx context.Context, name string) (int, error) {
	doc, err := g.r.store.Read(ctx)
	if err != nil {
		return 0, err
	}
	cfg := storedGroup(doc, name)
	if cfg == nil {
		return 0, controller.NotFound(controller.KindGroup, name)
	}
	if cfg.Size == nil {
		return len(cfg.LogicalIDs), nil
	}
	return *cfg.Size, nil
}

// acting checks that a verb may act on group name of doc: known, with its
// configuration, and managed.
func acting(doc *state.Document, name string) (*config.Group, error) {
	cfg := storedGroup(doc, name)
	st := doc.Groups[name]
	switch {
	case cfg == nil && st == nil:
		return nil, controller.NotFound(controller.KindGroup, name)
	case cfg == nil:
		return nil, fmt.Errorf("group %q: its configuration is not in the state, so its provider is unknown", name)
	case st != nil && st.Freed:
		return nil, controller.Freed(controller.KindGroup, name)
	case st != nil && st.Destroying:
		return nil, fmt.Errorf("group %q is being destroyed: run \"infrakit group destroy %s\" to finish", name, name)
	}
	return cfg, nil
}

// withGroup replaces (or adds) group g in a copy of st.
func withGroup(st *config.Stack, g *config.Group) *config.Stack {
	out := *st
	out.Groups = slices.Clone(st.Groups)
	if i := slices.IndexFunc(out.Groups, func(x *config.Group) bool { return x.Name == g.Name }); i >= 0 {
		out.Groups[i] = g
	} else {
		out.Groups = append(out.Groups, g)
	}
	return &out
}

// withoutGroup is a copy of st without group name.
func withoutGroup(st *config.Stack, name string) *config.Stack {
	out := *st
	out.Groups = slices.DeleteFunc(slices.Clone(st.Groups), func(x *config.Group) bool { return x.Name == name })
	return &out
}

func quoteAll(ids []instance.ID) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}

// unique drops repeated IDs, keeping the first of each.
func unique(ids []instance.ID) []instance.ID {
	seen := map[instance.ID]bool{}
	return slices.DeleteFunc(slices.Clone(ids), func(id instance.ID) bool {
		if seen[id] {
			return true
		}
		seen[id] = true
		return false
	})
}

// scaleWork is what `group scale` does: Decide's creates and destroys (and
// replacements of unhealthy members, when the group replaces them), but no
// rolling update, which is apply's.
func scaleWork(name string, d group.Desired) func(plan.World) (map[string]plan.GroupWork, error) {
	return func(world plan.World) (map[string]plan.GroupWork, error) {
		if err := world.Failed[name]; err != nil {
			return nil, err
		}
		w, _ := plan.ApplyWork(d, world.Members[name])
		w.Batches = nil
		return map[string]plan.GroupWork{name: w}, nil
	}
}
