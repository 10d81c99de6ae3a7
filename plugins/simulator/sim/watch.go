package sim

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Watch streams events about instances of this type carrying every tag,
// polling the store every Config.WatchInterval until ctx ends; then the
// channel is closed. The set present when Watch returns is the baseline and
// produces no events; afterwards a new or changed instance (tags, state,
// address, including pending turning running) is EventChanged, and one whose
// file is removed, or that no longer carries the tags, is EventGone.
//
// Polls share the type's listing cache with DescribeInstances, so watching
// 10k idle instances costs a directory read and an fstatat per file.
func (p *Instances) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	tags = maps.Clone(tags)
	prev, err := p.snapshot(ctx, tags)
	if err != nil {
		return nil, err
	}
	ch := make(chan instance.Event, 64)
	go p.watch(ctx, tags, prev, ch) // ends with ctx
	return ch, nil
}

func (p *Instances) watch(ctx context.Context, tags map[string]string, prev map[instance.ID]instance.Description, ch chan<- instance.Event) {
	defer close(ch)
	t := time.NewTicker(p.sim.cfg.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, err := p.snapshot(ctx, tags)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A transient failure (the directory being replaced): keep the
			// old view and try again on the next tick.
			p.sim.cfg.Logger.Warn("watch: poll failed", "type", p.typ, "error", err)
			continue
		}
		for _, ev := range diff(prev, next) {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		prev = next
	}
}

// snapshot is the current matching instances by ID.
func (p *Instances) snapshot(ctx context.Context, tags map[string]string) (map[instance.ID]instance.Description, error) {
	objs, err := store.ListCached(ctx, p.sim.store, p.collection, p.cache)
	if err != nil {
		return nil, err
	}
	now := p.sim.cfg.Now()
	snap := make(map[instance.ID]instance.Description, len(objs))
	for _, o := range objs {
		if hasTags(o.Value.Tags, tags) {
			d := describe(o.Name, o.Value, now, false)
			snap[d.ID] = d
		}
	}
	return snap, nil
}

// diff is the events that turn prev into next, sorted by ID.
func diff(prev, next map[instance.ID]instance.Description) []instance.Event {
	ids := slices.Sorted(maps.Keys(next))
	for id := range prev {
		if _, ok := next[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var evs []instance.Event
	for _, id := range ids {
		d, ok := next[id]
		switch old, had := prev[id]; {
		case !ok:
			evs = append(evs, instance.Event{Type: instance.EventGone, ID: id})
		case !had || !sameDescription(old, d):
			evs = append(evs, instance.Event{Type: instance.EventChanged, ID: id, Instance: &d})
		}
	}
	return evs
}

func sameDescription(a, b instance.Description) bool {
	return a.ID == b.ID && a.Address == b.Address && a.State == b.State &&
		maps.Equal(a.Tags, b.Tags) &&
		(a.LogicalID == nil) == (b.LogicalID == nil) &&
		(a.LogicalID == nil || *a.LogicalID == *b.LogicalID)
}
