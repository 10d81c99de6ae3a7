package process

import (
	"errors"
	"os/exec"
	"sync"
	"time"

	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/instance"
)

// monitor waits for one instance's main process to exit, so the provider
// reports it at once, and reaps it when it is the provider's child. It
// waits on a pidfd when the kernel has them and polls otherwise.
type monitor struct {
	rec  record
	cmd  *exec.Cmd       // the provider's child, which the monitor reaps; nil when adopted
	exit *proc.ExitWatch // nil: poll
	done chan struct{}   // closed by stop
	once sync.Once
}

// stop ends the wait (at Close); the process keeps running.
func (m *monitor) stop() {
	m.once.Do(func() {
		close(m.done)
		if m.exit != nil {
			m.exit.Close()
		}
	})
}

// wait blocks until the process exits (true) or stop (false).
func (m *monitor) wait(poll time.Duration) bool {
	if m.exit != nil {
		if err := m.exit.Wait(); err == nil {
			return true
		}
		select {
		case <-m.done:
			return false
		default: // the pidfd failed; poll instead
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if st, err := m.rec.Check(); err == nil && st != proc.Running {
			return true
		}
		select {
		case <-m.done:
			return false
		case <-t.C:
		}
	}
}

// watchExit starts a monitor for the instance unless one runs for it. cmd
// is the process when the provider just started it.
func (p *Provider) watchExit(rec record, cmd *exec.Cmd) {
	id := instance.ID(rec.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		if cmd != nil {
			_ = cmd.Process.Release()
		}
		return
	}
	if m, ok := p.monitors[id]; ok && m.rec.Identity == rec.Identity {
		return
	}
	w, err := proc.WatchExit(rec.Identity)
	switch {
	case err == nil:
	case errors.Is(err, proc.ErrNotRunning) && cmd == nil:
		return // already gone; whoever looks next cleans up
	case errors.Is(err, proc.ErrNotRunning):
		// A child that exited at once: the poll sees it and reaps it.
	default:
		p.logger.Debug("cannot wait on a pidfd; polling for the exit", "id", id, "error", err)
	}
	m := &monitor{rec: rec, cmd: cmd, exit: w, done: make(chan struct{})}
	p.monitors[id] = m
	p.wg.Add(1)
	go p.runMonitor(id, m)
}

// runMonitor is a monitor's goroutine; it ends at the exit or at Close.
func (p *Provider) runMonitor(id instance.ID, m *monitor) {
	defer p.wg.Done()
	exited := m.wait(p.cfg.PollInterval)
	p.mu.Lock()
	if p.monitors[id] == m {
		delete(p.monitors, id)
	}
	p.mu.Unlock()
	if m.exit != nil {
		m.exit.Close()
	}
	if !exited {
		if m.cmd != nil {
			// Closing: the process runs on and the next provider adopts it.
			_ = m.cmd.Process.Release()
		}
		return
	}
	if m.cmd != nil {
		_ = m.cmd.Wait() // reaps at once: the process has exited
	}
	st, err := m.rec.Check()
	if err != nil {
		st = proc.Exited
	}
	p.gone(m.rec, st)
}
