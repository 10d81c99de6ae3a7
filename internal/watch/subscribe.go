package watch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Resubscription backoff: a stream that ends (the provider crashed and is
// being relaunched) is opened again after minResubscribe, doubling up to
// maxResubscribe while it keeps failing.
const (
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 30 * time.Second
)

// source is where a group's members are listed: a subscription is for one.
type source struct {
	stack, group, provider, typ string
}

// subscription is one group's stream of instance events from its provider.
// The service owns it: cancel ends it; the WaitGroup given to subscribe
// tells when its goroutine has returned.
type subscription struct {
	source source
	cancel context.CancelFunc
	// live: the stream is open, so what changes is announced (relist.go).
	live streaming
}

// subscribe starts streaming the provider's events about the group's
// members; each burst of events becomes one notify(group). A provider that
// cannot watch (errors.ErrUnsupported) leaves the group to the interval.
// After the stream breaks (the provider died) it subscribes again, through
// the host, which relaunches the provider, and notifies once: events may
// have been missed meanwhile.
// wg counts the subscription's goroutine.
func subscribe(ctx context.Context, wg *sync.WaitGroup, src source, prov *providers, notify func(context.Context, string), log hclog.Logger) *subscription {
	ctx, cancel := context.WithCancel(ctx)
	s := &subscription{source: src, cancel: cancel}
	log = log.With("group", src.group, "provider", src.provider)
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait := minResubscribe
		first := true
		for ctx.Err() == nil {
			events, err := open(ctx, src, prov)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, errors.ErrUnsupported):
				log.Info("the provider cannot push changes; the group is listed every interval", "error", err)
				return
			case err != nil:
				log.Warn("subscribing to instance events failed; retrying", "error", err, "retry_in", wait)
				if !sleepCtx(ctx, wait) {
					return
				}
				wait = min(2*wait, maxResubscribe)
				continue
			}
			if !first {
				log.Info("subscribed to instance events again")
				notify(ctx, src.group)
			}
			first = false
			start := time.Now()
			s.live.opened(start)
			drain(ctx, events, func() { notify(ctx, src.group) })
			s.live.closed()
			if ctx.Err() != nil {
				return
			}
			// A stream that lasted is a fresh failure: start the backoff
			// over. One that broke at once backs off further.
			if time.Since(start) > maxResubscribe {
				wait = minResubscribe
			}
			log.Debug("instance event stream ended; subscribing again", "retry_in", wait)
			if !sleepCtx(ctx, wait) {
				return
			}
			wait = min(2*wait, maxResubscribe)
		}
	}()
	return s
}

func open(ctx context.Context, src source, prov *providers) (<-chan instance.Event, error) {
	c, err := prov.client(ctx, src.provider)
	if err != nil {
		return nil, err
	}
	w, ok := c.Instance(src.typ).(instance.Watcher)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return w.Watch(ctx, tags.GroupSelector(src.stack, src.group))
}

// drain reads events until the channel closes, calling burst once for each
// run of events that arrive together.
func drain(ctx context.Context, events <-chan instance.Event, burst func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				return
			}
		}
	more:
		for {
			select {
			case _, ok := <-events:
				if !ok {
					burst()
					return
				}
			default:
				break more
			}
		}
		burst()
	}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
