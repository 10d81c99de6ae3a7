package plugin

import (
	"fmt"
	"time"
)

// DefaultStopTimeout bounds a graceful stop (Client.Kill) when
// ClientConfig.StopTimeout is zero.
const DefaultStopTimeout = 2 * time.Second

// reapTimeout bounds the wait for a process to be reaped once it has been
// sent SIGKILL. SIGKILL ends any process, stopped ones too, at once, unless
// it sleeps uninterruptibly in the kernel (a dead NFS server): such a
// process is given up on, and reaped whenever it wakes.
const reapTimeout = 5 * time.Second

// Kill stops the provider process: it asks it to exit (go-plugin's
// graceful shutdown), and when it has not exited within
// ClientConfig.StopTimeout, sends SIGKILL to its process group, the
// children it started included. It returns once the process has been
// reaped, or a few seconds after the SIGKILL at most; afterwards Exited
// is true. A frozen (SIGSTOPped, deadlocked) provider never answers the
// graceful request, so Kill takes StopTimeout plus the reaping then. It is
// safe to call more than once and concurrently; each call waits as above.
func (c *Client) Kill() { _ = c.stop(c.stopTimeout) }

// KillNow is Kill without the graceful request's wait: SIGKILL at once. It
// is for a provider that no longer answers, which would not answer that
// request either. It reports a process that could not be reaped in time.
func (c *Client) KillNow() error { return c.stop(0) }

// stop ends the process, waiting up to grace for it to exit by itself.
func (c *Client) stop(grace time.Duration) error {
	// go-plugin's Kill asks the provider to shut down and waits for the
	// answer without a deadline of its own (its context ends only when the
	// process does): it runs once, in a goroutine of its own, and ends when
	// the process is reaped, which the SIGKILL below guarantees.
	c.stopOnce.Do(func() {
		go func() {
			defer close(c.stopped)
			c.pc.Kill()
		}()
	})
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.stopped:
			return nil
		case <-t.C:
		}
	}
	select {
	case <-c.stopped:
		return nil
	default:
	}
	c.forced.Store(true)
	if c.pid > 0 && !c.pc.Exited() { // not reaped yet: the pid is still its
		c.logger.Warn("killing the provider process group", "pid", c.pid, "graceful_wait", grace)
		killGroup(c.pid)
	}
	t := time.NewTimer(reapTimeout)
	defer t.Stop()
	select {
	case <-c.stopped:
		return nil
	case <-t.C:
		return c.fail("Kill", fmt.Errorf("process %d not reaped %s after SIGKILL", c.pid, reapTimeout))
	}
}

// Exited reports whether the provider process has ended, or was killed
// (and is being reaped). Calls to an exited provider fail with
// ErrUnavailable; a host starts it again.
func (c *Client) Exited() bool { return c.forced.Load() || c.pc.Exited() }
