package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

// watchedActions are the container events that can change what Describe
// shows; exec and health events are left out by the Engine's filter.
var watchedActions = []string{"create", "start", "restart", "die", "oom", "kill", "stop", "pause", "unpause", "destroy"}

// Reconnect backoff of a broken event stream.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// errResubscribe ends a stream on purpose: the watch reopens it at once.
var errResubscribe = errors.New("resubscribe")

// watcher is one Watch call's state shared with Label (which nudges it).
type watcher struct {
	tags map[string]string

	mu      sync.Mutex
	pending map[instance.ID]bool // relabelled since last looked at
	signal  chan struct{}        // capacity 1: something is pending
	// filtered are the tag keys the open stream's Engine filter matches on.
	filtered map[string]bool
}

// Watch streams events about the containers carrying every tag until ctx
// ends or the provider closes; then the channel is closed. The containers
// listed when Watch returns are the baseline and produce no events; after
// that a container that is created, starts, dies, is killed, OOM-killed,
// stopped, paused or relabelled (through this provider process) is reported
// as EventChanged with its new description, and one that is removed as
// EventGone. Events come from Docker's event stream as they happen; when
// the stream breaks it is reopened (backoff 100 ms doubling to 5 s) and
// whatever changed meanwhile is reported from a fresh listing.
func (p *Provider) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	w := &watcher{tags: maps.Clone(tags), pending: map[instance.ID]bool{}, signal: make(chan struct{}, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("watch: %w", errClosed)
	}
	p.watchers[w] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()

	stream, known, err := p.subscribe(ctx, w)
	if err != nil {
		p.unregister(w)
		p.wg.Done()
		return nil, fmt.Errorf("watch: %w", err)
	}
	ch := make(chan instance.Event, 64)
	go p.watch(ctx, w, stream, known, ch)
	return ch, nil
}

func (p *Provider) unregister(w *watcher) {
	p.mu.Lock()
	delete(p.watchers, w)
	p.mu.Unlock()
}

// nudge makes every watch look at id again (its tags changed).
func (p *Provider) nudge(id instance.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.watchers {
		w.mu.Lock()
		w.pending[id] = true
		w.mu.Unlock()
		select {
		case w.signal <- struct{}{}:
		default: // one is already pending
		}
	}
}

// subscribe opens the event stream, then lists the containers: a change
// after the listing is in the stream, so none falls between the two.
func (p *Provider) subscribe(ctx context.Context, w *watcher) (*engine.EventStream, map[instance.ID]instance.Description, error) {
	extra, err := p.side.all()
	if err != nil {
		return nil, nil, err
	}
	overridden := overriddenBy(extra)
	f := labelFilter(w.tags, overridden)
	f["type"] = []string{"container"}
	f["event"] = watchedActions
	filtered := map[string]bool{}
	for k := range w.tags {
		if !overridden(k) {
			filtered[k] = true
		}
	}
	stream, err := p.engine.Events(ctx, f, time.Time{})
	if err != nil {
		return nil, nil, err
	}
	ds, err := p.DescribeInstances(ctx, w.tags, false)
	if err != nil {
		stream.Close()
		return nil, nil, err
	}
	w.mu.Lock()
	w.filtered = filtered
	w.mu.Unlock()
	known := make(map[instance.ID]instance.Description, len(ds))
	for _, d := range ds {
		known[d.ID] = d
	}
	return stream, known, nil
}

// watch follows streams until ctx ends or the provider closes, reopening
// them when they break.
func (p *Provider) watch(ctx context.Context, w *watcher, stream *engine.EventStream, known map[instance.ID]instance.Description, ch chan<- instance.Event) {
	defer p.wg.Done()
	defer close(ch)
	defer p.unregister(w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()

	for {
		err := p.follow(ctx, w, stream, known, ch)
		stream.Close()
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errResubscribe) {
			p.logger.Warn("docker event stream broke; reopening it", "error", err)
		}
		backoff := time.Duration(0)
		if !errors.Is(err, errResubscribe) {
			backoff = minBackoff
		}
		for {
			if !sleep(ctx, backoff) {
				return
			}
			s, next, err := p.subscribe(ctx, w)
			if err == nil {
				stream = s
				for _, ev := range instance.Diff(known, next) {
					if !send(ctx, ch, ev) {
						stream.Close()
						return
					}
				}
				known = next
				break
			}
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(backoff*2, minBackoff), maxBackoff)
			p.logger.Warn("reopening the docker event stream", "error", err, "retry_in", backoff)
		}
	}
}

// follow handles the events of one stream until it breaks, ctx ends or the
// stream must be reopened (errResubscribe); known is kept up to date.
func (p *Provider) follow(ctx context.Context, w *watcher, stream *engine.EventStream, known map[instance.ID]instance.Description, ch chan<- instance.Event) error {
	events := make(chan engine.Event)
	errc := make(chan error, 1)
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			e, err := stream.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- e:
			case <-done:
				return
			}
		}
	})
	defer reader.Wait()
	defer stream.Close() // ends a Next in progress
	defer close(done)

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return err
		case e := <-events:
			if err := p.handle(ctx, w, e, known, ch); err != nil {
				return err
			}
		case <-w.signal:
			w.mu.Lock()
			ids := slices.Sorted(maps.Keys(w.pending))
			clear(w.pending)
			filtered := maps.Clone(w.filtered)
			w.mu.Unlock()
			// A Label that changed a tag the Engine filters on may have
			// made containers match that the stream leaves out.
			extra, err := p.side.all()
			if err != nil {
				return err
			}
			for k := range extra {
				for tk := range extra[k] {
					if filtered[tk] {
						return errResubscribe
					}
				}
			}
			for _, id := range ids {
				if err := p.refresh(ctx, w, string(id), known, ch); err != nil {
					return err
				}
			}
		}
	}
}

// handle turns one Engine event into instance events.
func (p *Provider) handle(ctx context.Context, w *watcher, e engine.Event, known map[instance.ID]instance.Description, ch chan<- instance.Event) error {
	if e.Type != "container" || e.Actor.ID == "" {
		return nil
	}
	id := shortID(e.Actor.ID)
	_, wasKnown := known[id]
	switch e.Action {
	case "die":
		// Ahead of the listing: see died.go.
		p.markDied(id, e.Actor.Attributes, e.Time())
	case "destroy":
		p.forgetDied(id)
	}
	if e.Action == "destroy" {
		if err := p.side.remove(id); err != nil {
			p.logger.Debug("watch: forget label record", "id", id, "error", err)
		}
		if wasKnown {
			delete(known, id)
			if !send(ctx, ch, instance.Event{Type: instance.EventGone, ID: id}) {
				return ctx.Err()
			}
		}
		return nil
	}
	if !wasKnown {
		// Skip containers that cannot match without asking the Engine.
		keys, ok := tagKeys(e.Actor.Attributes)
		if !ok {
			return nil
		}
		tags := map[string]string{}
		for _, k := range keys {
			tags[k] = e.Actor.Attributes[k]
		}
		if extra, err := p.side.get(id); err == nil {
			maps.Copy(tags, extra)
		}
		if !matches(tags, w.tags) {
			return nil
		}
	}
	return p.refresh(ctx, w, e.Actor.ID, known, ch)
}

// refresh lists one container (by full or short ID) and reports how it
// changed. A failed listing reopens the stream, whose fresh listing then
// reports the change.
func (p *Provider) refresh(ctx context.Context, w *watcher, containerID string, known map[instance.ID]instance.Description, ch chan<- instance.Event) error {
	id := shortID(containerID)
	cs, err := p.engine.ContainerList(ctx, engine.Filters{"id": {containerID}, "label": {LabelTags}})
	if err != nil {
		return fmt.Errorf("list container %s: %w", id, err)
	}
	var (
		d     instance.Description
		found bool
	)
	for _, c := range cs {
		if shortID(c.ID) != id {
			continue // the id filter also matches other IDs containing this one
		}
		extra, _ := p.side.get(id)
		if d, found = p.describe(c, extra, false); found && !matches(d.Tags, w.tags) {
			found = false
		}
		break
	}
	old, wasKnown := known[id]
	var ev instance.Event
	switch {
	case !found && !wasKnown:
		return nil
	case !found:
		delete(known, id)
		ev = instance.Event{Type: instance.EventGone, ID: id}
	case wasKnown && instance.SameObservation(old, d):
		return nil
	default:
		known[id] = d
		ev = instance.Event{Type: instance.EventChanged, ID: id, Instance: &d}
	}
	if !send(ctx, ch, ev) {
		return ctx.Err()
	}
	return nil
}

// send delivers ev unless ctx ends first.
func send(ctx context.Context, ch chan<- instance.Event, ev instance.Event) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
