package process

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Watch streams events about the instances carrying every tag until ctx
// ends or the provider closes; then the channel is closed. The instances
// live when Watch returns are the baseline and produce no events; then a new
// or changed one (tags, state) is EventChanged and one that exited or was
// destroyed is EventGone.
//
// Changes made through this provider (provision, label, destroy, an exit it
// saw) are reported at once; changes by other provider processes sharing
// the directory within the poll interval (200 ms).
func (p *Provider) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	tags = maps.Clone(tags)
	prev, err := p.snapshot(tags)
	if err != nil {
		return nil, fmt.Errorf("process: watch: %w", err)
	}
	nudge := make(chan struct{}, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("process: watch: %w", errClosed)
	}
	p.watchers[nudge] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()

	ch := make(chan instance.Event, 64)
	go p.watch(ctx, tags, prev, nudge, ch)
	return ch, nil
}

// nudge makes every watch look again now.
func (p *Provider) nudge() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := range p.watchers {
		select {
		case n <- struct{}{}:
		default: // one is already pending
		}
	}
}

func (p *Provider) watch(ctx context.Context, tags map[string]string, prev map[instance.ID]instance.Description, nudge chan struct{}, ch chan<- instance.Event) {
	defer p.wg.Done()
	defer close(ch)
	defer func() {
		p.mu.Lock()
		delete(p.watchers, nudge)
		p.mu.Unlock()
	}()
	t := time.NewTicker(p.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.ctx.Done():
			return
		case <-t.C:
		case <-nudge:
		}
		next, err := p.snapshot(tags)
		if err != nil {
			// A transient failure (a record being replaced): keep the old
			// view and look again on the next tick.
			p.logger.Warn("watch: listing instances failed", "error", err)
			continue
		}
		for _, ev := range instance.Diff(prev, next) {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			case <-p.ctx.Done():
				return
			}
		}
		prev = next
	}
}

// snapshot is the live instances carrying tags, by ID.
func (p *Provider) snapshot(tags map[string]string) (map[instance.ID]instance.Description, error) {
	recs, err := p.live(tags)
	if err != nil {
		return nil, err
	}
	out := make(map[instance.ID]instance.Description, len(recs))
	for _, r := range recs {
		out[instance.ID(r.ID)] = r.describe(false)
	}
	return out, nil
}
