package sim

import (
	"context"
	"maps"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Watch streams events about instances of this type carrying every tag
// until ctx ends; then the channel is closed. The set present when Watch
// returns is the baseline and produces no events; afterwards a new or
// changed instance (tags, state, address, including pending turning
// running) is EventChanged, and one whose file is removed, or that no
// longer carries the tags, is EventGone.
//
// Watch shares the type's listing cache with DescribeInstances. While the
// cache follows the directory with inotify (see store.Cache), Watch sleeps
// until the cache says something changed (store.Cache.Changed), a pending
// instance is due to turn running, or WatchFullScan passes, and then
// compares the listing's generation with its last snapshot's: an idle
// store costs nothing at all, and a change is seen at once (snapshots are
// still at least Config.WatchInterval apart, so a burst of writes costs no
// more than polling did). Otherwise Watch polls every Config.WatchInterval:
// a poll first stats the type's directory: every write the store makes
// (create, update, remove) renames or unlinks in it, which changes its
// mtime, so while the directory is unchanged, no pending instance is due
// to turn running, and the last full listing is recent (WatchFullScan), the
// poll costs one stat instead of an fstatat per file. The full listing
// catches what changes no directory entry: a file edited in place by hand.
func (p *Instances) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	tags = maps.Clone(tags)
	stamp := p.dirStamp()
	prev, wake, gen, err := p.snapshot(ctx, tags)
	if err != nil {
		return nil, err
	}
	ch := make(chan instance.Event, 64)
	go p.watch(ctx, tags, prev, watchMark{stamp: stamp, wake: wake, full: p.sim.cfg.Now(), gen: gen}, ch) // ends with ctx
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
	gen        uint64 // the listing's generation
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
	interval := p.sim.cfg.WatchInterval
	poll := time.NewTicker(interval)
	defer poll.Stop()
	polling := true
	lastSnap := time.Now()
	for {
		var stamp dirStamp
		now := p.sim.cfg.Now()
		if changed := p.cache.Changed(); changed != nil {
			if polling {
				poll.Stop()
				polling = false
			}
			// Taken before comparing generations: what changes from here
			// on closes changed.
			_, gen, err := p.cache.List(ctx, p.sim.store, p.collection)
			if err == nil && gen == mark.gen && (mark.wake.IsZero() || now.Before(mark.wake)) {
				if !p.waitChange(ctx, changed, mark.wake, now) {
					return
				}
				continue
			}
			if !sleepWall(ctx, interval-time.Since(lastSnap)) {
				return
			}
		} else {
			if !polling {
				poll.Reset(interval)
				polling = true
			}
			select {
			case <-ctx.Done():
				return
			case <-poll.C:
			}
			// The stamp is taken before listing: a change made while
			// listing then shows at the next poll.
			stamp, now = p.dirStamp(), p.sim.cfg.Now()
			if mark.unchanged(stamp, time.Now(), now) {
				continue
			}
		}
		next, wake, gen, err := p.snapshot(ctx, tags)
		lastSnap = time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A transient failure (the directory being replaced): keep the
			// old view and try again later.
			p.sim.cfg.Logger.Warn("watch: poll failed", "type", p.typ, "error", err)
			if !sleepWall(ctx, interval) {
				return
			}
			continue
		}
		mark = watchMark{stamp: stamp, wake: wake, full: now, gen: gen}
		for _, ev := range instance.Diff(prev, next) {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		prev = next
	}
}

// waitChange waits until changed is closed, the next pending instance is
// due (wake, by the simulator's clock, whose time is now), WatchFullScan
// has passed, or ctx ends (false).
func (p *Instances) waitChange(ctx context.Context, changed <-chan struct{}, wake, now time.Time) bool {
	d := WatchFullScan
	if !wake.IsZero() {
		d = min(d, wake.Sub(now))
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-t.C:
	}
	return true
}

// sleepWall waits d (nothing when d ≤ 0) or until ctx ends (false).
func sleepWall(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// snapshot is the current matching instances by ID, the earliest time one
// of them that is pending turns running (zero: none will on its own), and
// the generation of the listing they come from.
func (p *Instances) snapshot(ctx context.Context, tags map[string]string) (map[instance.ID]instance.Description, time.Time, uint64, error) {
	objs, gen, err := p.cache.List(ctx, p.sim.store, p.collection)
	if err != nil {
		return nil, time.Time{}, 0, err
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
	return snap, wake, gen, nil
}
