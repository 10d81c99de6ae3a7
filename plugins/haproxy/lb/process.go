package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
)

// probeTimeout bounds asking the master whether it is alive.
const probeTimeout = 2 * time.Second

// running reports whether the HAProxy the provider talks to answers on the
// master socket. In owned mode it must also be the one the provider started:
// its master pid is the one in haproxy.pid and its command line names the
// provider's configuration file. A process that answers but is not provably
// the provider's is an error, never adopted and never signalled.
func (p *Provider) running(ctx context.Context) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	procs, err := p.master.Processes(pctx)
	if errors.Is(err, runtimeapi.ErrUnavailable) {
		if p.s.External() {
			return false, fmt.Errorf("the HAProxy to manage does not answer on its master socket %s: %w", p.s.MasterSocket, err)
		}
		pid, perr := readPID(p.s.pidPath())
		if perr != nil || !commandNames(pid, p.s.Config) {
			return false, nil // gone: start a new one
		}
		// Ours, alive, and not answering: a master re-executing itself
		// (someone reloaded it) is back within moments. Starting a second
		// HAProxy beside it would be wrong.
		if procs, err = p.awaitMaster(ctx); err != nil {
			return false, fmt.Errorf("haproxy (master pid %d) runs but does not answer on %s: %w", pid, p.s.MasterSocket, err)
		}
	}
	if err != nil {
		return false, err
	}
	if p.s.External() {
		return true, nil
	}
	pid, err := readPID(p.s.pidPath())
	if err != nil || pid != procs.MasterPID || !commandNames(pid, p.s.Config) {
		return false, fmt.Errorf("a process (master pid %d) answers on %s but is not the HAProxy this provider started (pid file %s: %d, %v); stop it or use another %s",
			procs.MasterPID, p.s.MasterSocket, p.s.pidPath(), pid, err, EnvDir)
	}
	return true, nil
}

// awaitMaster asks the master for its processes until it answers with a
// worker, for at most the reload timeout.
func (p *Provider) awaitMaster(ctx context.Context) (runtimeapi.Processes, error) {
	ctx, cancel := context.WithTimeout(ctx, p.s.ReloadTimeout)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		procs, err := p.master.Processes(ctx)
		if err == nil && len(procs.Workers) > 0 {
			return procs, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("no worker")
			}
			return procs, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// readPID reads a pid file.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: %q is not a pid", path, bytes.TrimSpace(b))
	}
	return pid, nil
}

// commandNames reports whether process pid is an haproxy run with cfg.
func commandNames(pid int, cfg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "haproxy") {
		return false
	}
	for _, a := range args[1:] {
		if a == cfg {
			return true
		}
	}
	return false
}

// binary finds the haproxy executable: the configured one through PATH,
// then /usr/sbin and /usr/local/sbin, which a non-root PATH often lacks.
func (p *Provider) binary() (string, error) {
	if path, err := exec.LookPath(p.s.Binary); err == nil {
		return path, nil
	}
	if !strings.ContainsRune(p.s.Binary, '/') {
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
			path := filepath.Join(dir, p.s.Binary)
			if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return path, nil
			}
		}
	}
	return "", fmt.Errorf("haproxy executable %q not found (install HAProxy, or set %s)", p.s.Binary, EnvBinary)
}

// start runs the provider's own HAProxy on the configuration already
// written: `haproxy -W -D -S <master.sock>,mode,600 -p <haproxy.pid> -f
// <haproxy.cfg>`, master-worker, daemonized so it outlives the provider
// (a restarted provider adopts it; see running). Its output goes to
// haproxy.log. start returns once a worker serves.
func (p *Provider) start(ctx context.Context) error {
	bin, err := p.binary()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(p.s.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start haproxy: %w", err)
	}
	defer log.Close()
	fmt.Fprintf(log, "--- %s infrakit-provider-haproxy starts haproxy\n", time.Now().UTC().Format(time.RFC3339))
	ctx, cancel := context.WithTimeout(ctx, p.s.ReloadTimeout)
	defer cancel()
	// The launcher parses the configuration, binds, forks the daemon and
	// exits; its status says whether that worked.
	cmd := exec.CommandContext(ctx, bin, "-W", "-D",
		"-S", p.s.MasterSocket+",mode,600",
		"-p", p.s.pidPath(),
		"-f", p.s.Config)
	cmd.Dir = p.s.Dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("start haproxy: %w%s", err, tail(p.s.logPath()))
	}
	procs, err := p.awaitMaster(ctx)
	if err != nil {
		return fmt.Errorf("start haproxy: no worker answered on %s: %w%s", p.s.MasterSocket, err, tail(p.s.logPath()))
	}
	p.s.Logger.Info("started haproxy", "master_pid", procs.MasterPID, "worker_pid", procs.Workers[0], "config", p.s.Config)
	return nil
}

// check runs `haproxy -c` on a configuration file.
func (p *Provider) check(ctx context.Context, cfg string) error {
	bin, err := p.binary()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, bin, "-c", "-q", "-f", cfg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("haproxy -c: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// tail returns the end of a log file for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n" + path + ":\n" + strings.Join(lines, "\n")
}
