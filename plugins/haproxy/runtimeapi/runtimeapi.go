// Package runtimeapi speaks HAProxy's runtime API over the master CLI socket
// of a master-worker HAProxy (started with -W -S <socket>): it reloads the
// master, lists its processes and, through the master's "@1" prefix, reads
// and changes the servers of the current worker.
//
// Only the master socket is used so that the same code drives an HAProxy the
// provider started and one it merely manages: an operator has to expose one
// socket, not two. Every call opens its own connection, sends one command,
// half-closes and reads to EOF; the master CLI keeps a connection open
// after a command until the client closes its side.
//
// Written against HAProxy 2.6 (Debian 12), whose master "reload" answers
// nothing; Reload therefore watches "show proc" for the outcome.
package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Master is the master CLI socket of one HAProxy.
type Master struct {
	// Socket is the path of the master CLI UNIX socket (haproxy -S).
	Socket string
}

// defaultCallTimeout bounds one command when the context has no deadline.
const defaultCallTimeout = 10 * time.Second

// ErrUnavailable wraps failures to reach the socket: HAProxy is not running
// or is re-executing itself during a reload.
var ErrUnavailable = errors.New("haproxy master socket unavailable")

// Do sends one command to the master and returns its whole answer.
func (m Master) Do(ctx context.Context, cmd string) (string, error) {
	if strings.ContainsAny(cmd, "\n") {
		return "", fmt.Errorf("haproxy command %q: contains a newline", cmd)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCallTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", m.Socket)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl) // a unix conn always supports deadlines
	}
	// Close the connection when ctx ends early, so the read below returns.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("haproxy command %q: write: %w", cmd, gone(err))
	}
	// Half-close: the master answers and then closes once it sees EOF.
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return "", fmt.Errorf("haproxy command %q: %w", cmd, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("haproxy command %q: %w", cmd, ctx.Err())
		}
		return "", fmt.Errorf("haproxy command %q: read: %w", cmd, gone(err))
	}
	return string(out), nil
}

// gone marks an error of a connection the master dropped while it was being
// served (reset, broken pipe) as ErrUnavailable: a master that was killed,
// or that re-executes itself, accepts a connection and goes away with it,
// which is the master not being there, not a failed command.
func gone(err error) error {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Worker sends a command to the current worker ("@1 <cmd>").
func (m Master) Worker(ctx context.Context, cmd string) (string, error) {
	return m.Do(ctx, "@1 "+cmd)
}

// Processes is what "show proc" says about the master and its workers.
type Processes struct {
	MasterPID int
	// Reloads counts the master's reloads; Failed those whose new
	// configuration did not start.
	Reloads, Failed int
	// Workers are the current workers' pids (one, unless nbproc); Old are
	// workers of earlier generations still finishing their connections.
	Workers, Old []int
}

// Processes runs "show proc".
func (m Master) Processes(ctx context.Context) (Processes, error) {
	out, err := m.Do(ctx, "show proc")
	if err != nil {
		return Processes{}, err
	}
	p, err := ParseProcesses(out)
	if err != nil {
		return Processes{}, fmt.Errorf("haproxy show proc: %w", err)
	}
	return p, nil
}

// ParseProcesses parses the answer of the master's "show proc":
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	15964           master          1 [failed: 0]   0d00h00m45s     2.6.12
//	# workers
//	18645           worker          0               0d00h00m02s     2.6.12
//	# old workers
//	15965           worker          1               0d00h01m00s     2.6.12
//	# programs
func ParseProcesses(out string) (Processes, error) {
	var p Processes
	section := "master"
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#<PID>"):
			continue
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimPrefix(line, "#"))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return p, fmt.Errorf("unexpected line %q", line)
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			return p, fmt.Errorf("unexpected line %q: %w", line, err)
		}
		switch {
		case f[1] == "master":
			p.MasterPID = pid
			p.Reloads, _ = strconv.Atoi(f[2])
			// "[failed: N]" follows the reload count.
			if i := strings.Index(line, "[failed:"); i >= 0 {
				rest := strings.TrimSpace(line[i+len("[failed:"):])
				if j := strings.IndexByte(rest, ']'); j >= 0 {
					p.Failed, _ = strconv.Atoi(strings.TrimSpace(rest[:j]))
				}
			}
		case f[1] == "worker" && section == "workers":
			p.Workers = append(p.Workers, pid)
		case f[1] == "worker" && section == "old workers":
			p.Old = append(p.Old, pid)
		}
	}
	if p.MasterPID == 0 {
		return p, fmt.Errorf("no master line in %q", out)
	}
	return p, nil
}

// reloadPoll is how often Reload asks the master how the reload went.
const reloadPoll = 20 * time.Millisecond

// ErrReloadFailed means the master could not start the new configuration;
// it keeps the old workers serving (HAProxy's "wait mode").
var ErrReloadFailed = errors.New("haproxy rejected the new configuration")

// Reload asks the master to re-read its configuration files and waits until
// a new worker runs them. Established connections stay with the old worker,
// which exits once they are done: the reload is hitless. ctx bounds the wait.
func (m Master) Reload(ctx context.Context) error {
	before, err := m.Processes(ctx)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	// 2.6 answers "reload" with nothing; the master re-executes itself, so
	// the socket goes away for a moment and comes back; an answer cut
	// short by that is not a failure, not reaching the master is.
	if _, err := m.Do(ctx, "reload"); errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("reload: %w", err)
	}
	t := time.NewTicker(reloadPoll)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("reload: waiting for the new worker: %w (last: %w)", ctx.Err(), last)
			}
			return fmt.Errorf("reload: waiting for the new worker: %w", ctx.Err())
		case <-t.C:
		}
		now, err := m.Processes(ctx)
		if err != nil {
			last = err
			continue
		}
		switch {
		case now.Failed > before.Failed:
			return fmt.Errorf("reload: %w (reload %d failed)", ErrReloadFailed, now.Reloads)
		case now.Reloads > before.Reloads && len(now.Workers) > 0 && !overlaps(now.Workers, before.Workers):
			return nil
		}
	}
}

func overlaps(a, b []int) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
