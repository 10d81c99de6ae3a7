package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// The ping that tells a slow provider from a hung one (pingTimeout) is
// bounded by a quarter of the call deadline, within [minPing, maxPing].
const (
	minPing = time.Second
	maxPing = 5 * time.Second
)

// providers supervises the provider processes through the plugin host,
// which launches them on first use and relaunches one that exited (with
// backoff). It notices a relaunch by the process ID changing and reports it
// to the status, and it kills a provider that stops answering and has it
// relaunched at once. Safe for concurrent use.
type providers struct {
	runner *operation.Runner
	rec    *status.Recorder
	log    hclog.Logger
	ping   time.Duration // bounds the ping of a suspect provider

	mu    sync.Mutex
	procs map[string]*procSeen // by provider key
}

type procSeen struct {
	pid int // the process last seen; 0 while none runs
	// running is set once a process was seen since the host was created,
	// so that a later new pid is a relaunch.
	running bool
	// checking is the process whose hang check is in flight (0: none), so
	// that the calls that time out together against one hung process ping
	// it, and kill it, once.
	checking int
	// killed says why the process last seen was killed, for the relaunch
	// that follows; empty when it was not.
	killed string
}

func newProviders(r *operation.Runner, rec *status.Recorder, log hclog.Logger, callTimeout time.Duration) *providers {
	return &providers{runner: r, rec: rec, log: log, ping: pingTimeout(callTimeout), procs: map[string]*procSeen{}}
}

// pingTimeout is how long a provider suspected of hanging has to answer
// Metadata, which a live process answers from memory at once: a quarter of
// the call deadline, at least minPing (or the deadline, when shorter) and
// at most maxPing. A hung provider is so killed within about 1.25 call
// deadlines of the call that found it (5 s more at the default 2 minutes).
func pingTimeout(callTimeout time.Duration) time.Duration {
	if callTimeout <= 0 {
		return maxPing
	}
	return min(maxPing, max(callTimeout/4, min(callTimeout, minPing)))
}

// suspect reports whether a failed call makes its provider's process
// suspect of hanging: the call ran out of time (a slow API does that
// too, which the ping tells apart).
func suspect(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// hung reports whether a suspect process hangs: the ping failed too, and
// not because the service is stopping (which cancels the ping).
func hung(stopping bool, pingErr error) bool { return !stopping && pingErr != nil }

// beginCheck reports whether the caller is to check process pid of key:
// no check of that process is in flight. endCheck ends the check.
func (p *providers) beginCheck(key string, pid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seen(key)
	if s.checking == pid {
		return false
	}
	s.checking = pid
	return true
}

func (p *providers) endCheck(key string, pid int, killed string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seen(key)
	if s.checking == pid {
		s.checking = 0
	}
	if killed != "" && s.pid == pid {
		s.killed = killed
	}
}

// seen returns key's record, creating it; p.mu is held.
func (p *providers) seen(key string) *procSeen {
	s, ok := p.procs[key]
	if !ok {
		s = &procSeen{}
		p.procs[key] = s
	}
	return s
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
		var refused *pluginhost.ConfigError
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &refused):
			// The process runs on; its next use configures it again.
			p.rec.ProviderError(key, "Configure", err)
		default:
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
	s := p.seen(key)
	old, running, killed := s.pid, s.running, s.killed
	s.pid, s.running = pid, true
	if old != pid {
		s.killed = ""
	}
	p.mu.Unlock()
	switch {
	case !running:
		p.log.Info("provider running", "provider", key, "pid", pid)
		p.rec.SetProvider(key, pid)
	case old != pid:
		cause := errors.New("its process had exited")
		switch {
		case old != 0 && killed != "":
			cause = fmt.Errorf("process %d was killed: %s", old, killed)
		case old != 0:
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
// time may mean the provider hangs (a frozen or deadlocked process): it is
// then asked for its metadata, and when that fails too it is killed at once
// (SIGKILL: it would not answer a request to exit either) and relaunched,
// so that the next call, and the event stream, reach a live process.
func (p *providers) failed(ctx context.Context, key, method string, err error) {
	if ctx.Err() != nil {
		return // shutting down: not the provider's fault
	}
	p.rec.ProviderError(key, method, err)
	if !suspect(err) {
		return
	}
	c, cerr := p.client(ctx, key)
	if cerr != nil {
		return
	}
	pid := c.Pid()
	if !p.beginCheck(key, pid) {
		return // another call that timed out is checking it
	}
	pctx, cancel := context.WithTimeout(ctx, p.ping)
	_, perr := c.Metadata(pctx)
	cancel()
	if !hung(ctx.Err() != nil, perr) {
		p.endCheck(key, pid, "")
		return
	}
	p.log.Error("provider does not answer; killing it so that it is relaunched",
		"provider", key, "pid", pid, "method", method, "error", err, "ping", perr)
	if kerr := c.KillNow(); kerr != nil {
		p.log.Error("killing the provider", "provider", key, "pid", pid, "error", kerr)
	}
	// The check ends before the relaunch, which reports why.
	p.endCheck(key, pid, fmt.Sprintf("%s ran out of time and it did not answer within %s", method, p.ping))
	if _, err := p.client(ctx, key); err != nil {
		p.log.Warn("relaunching the provider", "provider", key, "error", err)
	}
}
