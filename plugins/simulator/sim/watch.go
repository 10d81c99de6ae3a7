package sim

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

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
// Polls share the type's listing cache with DescribeInstances. A poll
// first stats the type's directory: every write the store makes (create,
// update, remove) renames or unlinks in it, which changes its mtime, so
// while the directory is unchanged, no pending instance is due to turn
// running, and the last full listing is recent (WatchFullScan), the poll
// costs one stat instead of an fstatat per file. The full listing catches
// what changes no directory entry: a file edited in place by hand.
func (p *Instances) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	tags = maps.Clone(tags)
	stamp := p.dirStamp()
	prev, wake, err := p.snapshot(ctx, tags)
	if err != nil {
		return nil, err
	}
	ch := make(chan instance.Event, 64)
	go p.watch(ctx, tags, prev, watchMark{stamp: stamp, wake: wake, full: p.sim.cfg.Now()}, ch) // ends with ctx
	return ch, nil
}

// WatchFullScan is how often Watch lists every file even when the type's
// directory did not change.
const WatchFullScan = 30 * time.Second

// dirSettle is how old a directory's mtime must be before an unchanged
// mtime is trusted to mean "no change since": file systems stamp times with
// a coarse clock (a few milliseconds, whole seconds on some), so two
// changes close together may leave the same mtime.
const dirSettle = 2 * time.Second

// dirStamp identifies one state of a directory: the inode (a directory
// replaced), and the change and modification times.
type dirStamp struct {
	ok           bool
	ino          uint64
	mtime, ctime time.Time
}

func (p *Instances) dirStamp() dirStamp {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(p.sim.store.Root(), filepath.FromSlash(p.collection)), &st); err != nil {
		return dirStamp{} // missing (no instance yet) or unreadable: never trusted
	}
	return dirStamp{ok: true, ino: uint64(st.Ino),
		mtime: time.Unix(st.Mtim.Unix()), ctime: time.Unix(st.Ctim.Unix())}
}

// watchMark is what the last full listing left: the directory's stamp
// taken just before it, when the next pending instance turns running, and
// when it ran.
type watchMark struct {
	stamp      dirStamp
	wake, full time.Time
}

// unchanged reports whether a poll may skip listing: the directory is as
// it was before the last listing (and had settled by the wall clock, which
// file times follow), no pending instance is due by the simulator's clock
// now, and the last full listing is recent.
func (m watchMark) unchanged(stamp dirStamp, wall, now time.Time) bool {
	return stamp.ok && stamp == m.stamp && wall.Sub(stamp.mtime) > dirSettle && wall.Sub(stamp.ctime) > dirSettle &&
		(m.wake.IsZero() || now.Before(m.wake)) && now.Sub(m.full) < WatchFullScan
}

func (p *Instances) watch(ctx context.Context, tags map[string]string, prev map[instance.ID]instance.Description, mark watchMark, ch chan<- instance.Event) {
	defer close(ch)
	t := time.NewTicker(p.sim.cfg.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The stamp is taken before listing: a change made while listing
		// then shows at the next poll.
		stamp, now := p.dirStamp(), p.sim.cfg.Now()
		if mark.unchanged(stamp, time.Now(), now) {
			continue
		}
		next, wake, err := p.snapshot(ctx, tags)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A transient failure (the directory being replaced): keep the
			// old view and try again on the next tick.
			p.sim.cfg.Logger.Warn("watch: poll failed", "type", p.typ, "error", err)
			continue
		}
		mark = watchMark{stamp: stamp, wake: wake, full: now}
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

// snapshot is the current matching instances by ID, and the earliest time
// one of them that is pending turns running (zero: none will on its own).
func (p *Instances) snapshot(ctx context.Context, tags map[string]string) (map[instance.ID]instance.Description, time.Time, error) {
	objs, err := store.ListCached(ctx, p.sim.store, p.collection, p.cache)
	if err != nil {
		return nil, time.Time{}, err
	}
	now := p.sim.cfg.Now()
	snap := make(map[instance.ID]instance.Description, len(objs))
	var wake time.Time
	for _, o := range objs {
		if hasTags(o.Value.Tags, tags) {
			d := describe(o.Name, o.Value, now, false)
			snap[d.ID] = d
			if until := o.Value.PendingUntil; o.Value.State == "" && until != nil && until.After(now) && (wake.IsZero() || until.Before(wake)) {
				wake = *until
			}
		}
	}
	return snap, wake, nil
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
