package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// pingTimeout bounds the Metadata call that tells a slow provider from a
// hung one.
const pingTimeout = 5 * time.Second

// providers supervises the provider processes through the plugin host,
// which launches them on first use and relaunches one that exited (with
// backoff). It notices a relaunch by the process ID changing and reports it
// to the status, and it kills a provider that stops answering, so that the
// host relaunches that one too. Safe for concurrent use.
type providers struct {
	runner *operation.Runner
	rec    *status.Recorder
	log    hclog.Logger

	mu    sync.Mutex
	procs map[string]*procSeen // by provider key
}

type procSeen struct {
	pid int // the process last seen; 0 while none runs
	// running is set once a process was seen since the host was created,
	// so that a later new pid is a relaunch.
	running bool
}

func newProviders(r *operation.Runner, rec *status.Recorder, log hclog.Logger) *providers {
	return &providers{runner: r, rec: rec, log: log, procs: map[string]*procSeen{}}
}

// client returns the running process of a provider key, launching or
// relaunching it as the host does.
func (p *providers) client(ctx context.Context, key string) (*plugin.Client, error) {
	h, err := p.runner.PluginHost()
	if err != nil {
		return nil, err
	}
	c, err := h.Client(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			p.rec.ProviderError(key, "Launch", err)
			p.down(key)
		}
		return nil, err
	}
	p.note(key, c.Pid())
	return c, nil
}

// note records that key runs as pid: its first process, or a relaunch.
func (p *providers) note(key string, pid int) {
	p.mu.Lock()
	s, ok := p.procs[key]
	if !ok {
		s = &procSeen{}
		p.procs[key] = s
	}
	old, running := s.pid, s.running
	s.pid, s.running = pid, true
	p.mu.Unlock()
	switch {
	case !running:
		p.log.Info("provider running", "provider", key, "pid", pid)
		p.rec.SetProvider(key, pid)
	case old != pid:
		cause := errors.New("its process had exited")
		if old != 0 {
			cause = fmt.Errorf("process %d exited", old)
		}
		p.log.Warn("provider relaunched", "provider", key, "pid", pid, "cause", cause)
		p.rec.ProviderRestart(key, pid, cause)
	}
}

// down records that key has no process now (its launch failed, or waits
// for the backoff).
func (p *providers) down(key string) {
	p.mu.Lock()
	s, ok := p.procs[key]
	wasUp := ok && s.pid != 0
	if wasUp {
		s.pid = 0
	}
	p.mu.Unlock()
	if wasUp {
		p.rec.SetProvider(key, 0)
	}
}

// reset forgets the processes: the host was replaced, and the processes it
// launches next are first launches, not relaunches.
func (p *providers) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.procs {
		s.pid, s.running = 0, false
	}
}

// forget drops keys that left the stack.
func (p *providers) forget(keep map[string]bool) {
	p.mu.Lock()
	var gone []string
	for key := range p.procs {
		if !keep[key] {
			gone = append(gone, key)
			delete(p.procs, key)
		}
	}
	p.mu.Unlock()
	for _, key := range gone {
		p.rec.RemoveProvider(key)
	}
}

// failed records a failed call to key's method. A call that ran out of
// time may mean the provider hangs: it is then asked for its metadata, and
// killed when that fails too, so that the host relaunches it.
func (p *providers) failed(ctx context.Context, key, method string, err error) {
	if ctx.Err() != nil {
		return // shutting down: not the provider's fault
	}
	p.rec.ProviderError(key, method, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	c, cerr := p.client(ctx, key)
	if cerr != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, perr := c.Metadata(pctx); perr != nil && ctx.Err() == nil {
		p.log.Error("provider does not answer; killing it so that it is relaunched",
			"provider", key, "pid", c.Pid(), "method", method, "error", err, "ping", perr)
		c.Kill()
	}
}
