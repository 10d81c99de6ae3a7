// Package process implements the "process" instance provider: an instance
// is a local OS process started from its properties (command, args, env,
// dir, a port range to hand out as $PORT), reachable at 127.0.0.1:$PORT.
//
// What it promises:
//
//   - Instances outlive the provider. Each runs as the leader of its own
//     process group, with no parent-death signal, so neither the provider's
//     exit nor a Ctrl-C in the terminal that started infrakit reaches it. A
//     provider started later adopts it from its record.
//   - The provider never signals a pid it cannot prove is its own. Each
//     record holds the pid, the process's start time and the boot ID (see
//     plugins/process/proc); a record whose pid now names another process is
//     forgotten, and nothing is signalled.
//   - DescribeInstances lists what is alive, not what was started: a record
//     whose process exited is removed.
//   - Watch reports an exit at once: the provider waits on a pidfd for every
//     instance it knows (its children, which it also reaps, and the ones it
//     adopted), and re-reads the records every 200 ms to see what other
//     provider processes did.
//   - Destroy sends SIGTERM to the process group, waits kill_timeout
//     (default 5s) for the group to end, then sends SIGKILL to it. When an
//     instance's main process exits on its own, what is left of its group is
//     killed, so nothing of a gone instance keeps running or holds its port.
//
// State lives under Config.Dir ($INFRAKIT_PROCESS_DIR, default
// .infrakit/process in the stack directory); see store for the layout.
package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Provider is the process instance plugin. It implements instance.Plugin
// and instance.Watcher. Call Close when done: it stops the goroutines that
// wait for exits and serve watches; the processes keep running.
type Provider struct {
	cfg     Config
	store   store
	workDir string
	logger  hclog.Logger

	// ctx ends at Close; it bounds every goroutine the provider starts.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	monitors map[instance.ID]*monitor
	watchers map[chan struct{}]struct{} // each watch's nudge channel
	// destroying are the instances this provider is destroying: their
	// group's stragglers are Destroy's to stop, after the grace.
	destroying map[instance.ID]bool
}

var (
	_ instance.Plugin  = (*Provider)(nil)
	_ instance.Watcher = (*Provider)(nil)
)

// New opens (creating it if needed) the state directory and adopts the
// instances recorded there: live ones are watched, records of exited ones
// removed.
func New(cfg Config) (*Provider, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	// Absolute, because a relative command would otherwise be resolved
	// against the instance's own dir.
	workDir, err := filepath.Abs(cfg.WorkDir) // "" is the working directory
	if err != nil {
		return nil, fmt.Errorf("process provider: %w", err)
	}
	dir := cfg.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workDir, dir)
	}
	p := &Provider{
		cfg:        cfg,
		store:      store{dir: dir},
		workDir:    workDir,
		logger:     cfg.Logger,
		monitors:   map[instance.ID]*monitor{},
		watchers:   map[chan struct{}]struct{}{},
		destroying: map[instance.ID]bool{},
	}
	if err := p.store.init(); err != nil {
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if _, err := p.live(nil); err != nil { // adopt
		p.Close()
		return nil, err
	}
	return p, nil
}

// Dir is the state directory.
func (p *Provider) Dir() string { return p.store.dir }

// Close stops watching: every Watch channel closes and every goroutine of
// the provider ends before Close returns. Instances keep running, and a
// later provider adopts them.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, m := range p.monitors {
		m.stop()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// errClosed is returned by calls after Close.
var errClosed = errors.New("process provider is closed")

// Validate checks the properties (see Parse). A command that cannot be
// found now is a warning, not an error: it may be built before apply.
func (p *Provider) Validate(ctx context.Context, properties json.RawMessage) error {
	props, err := Parse(properties)
	if err != nil {
		return err
	}
	if _, err := p.resolveCommand(props.Command); err != nil {
		return provider.Diagnostics{{
			Severity: provider.Warning,
			Summary:  "Command not found",
			Detail:   err.Error(),
			Path:     []string{"command"},
		}}
	}
	return nil
}

// resolveCommand finds the program: a path (anything with a slash) is taken
// relative to the work directory; a bare name is looked up in PATH.
func (p *Provider) resolveCommand(command string) (string, error) {
	if strings.ContainsRune(command, '/') {
		path := command
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.workDir, path)
		}
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("command %q: %w", command, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("command %q: %s is not an executable file", command, path)
		}
		return path, nil
	}
	path, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("command %q: %w", command, err)
	}
	return path, nil
}

// Provision starts the process and returns its ID once the process runs
// and its record is written. See the package doc for what it runs with.
func (p *Provider) Provision(ctx context.Context, spec instance.Spec) (instance.ID, error) {
	if p.ctx.Err() != nil {
		return "", fmt.Errorf("process: provision: %w", errClosed)
	}
	props, err := Parse(spec.Properties)
	if err != nil {
		return "", err
	}
	path, err := p.resolveCommand(props.Command)
	if err != nil {
		return "", provider.AttributeError("Command not found", err.Error(), "command")
	}
	dir := p.workDir
	if props.Dir != "" {
		dir = props.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(p.workDir, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", provider.AttributeError("Invalid working directory", fmt.Sprintf("dir %q (%s) is not a directory", props.Dir, dir), "dir")
		}
	}
	id, err := newID()
	if err != nil {
		return "", err
	}
	rec := record{
		ID:          string(id),
		LogicalID:   spec.LogicalID,
		Tags:        maps.Clone(spec.Tags),
		Properties:  compact(spec.Properties),
		Init:        spec.Init,
		Attachments: spec.Attachments,
		Command:     path,
		Stdout:      filepath.Join(p.store.logsDir(), string(id)+".stdout.log"),
		Stderr:      filepath.Join(p.store.logsDir(), string(id)+".stderr.log"),
		KillTimeout: props.KillTimeout,
		CreatedAt:   time.Now().UTC(),
	}
	if rec.Tags == nil {
		rec.Tags = map[string]string{}
	}
	fail := func(err error) (instance.ID, error) {
		return "", fmt.Errorf("process: provision %s: %w", id, err)
	}
	started := false
	defer func() {
		if !started { // no instance, so no logs of one
			os.Remove(rec.Stdout)
			os.Remove(rec.Stderr)
		}
	}()
	stdout, err := openLog(rec.Stdout)
	if err != nil {
		return fail(err)
	}
	defer stdout.Close() // the child has its own descriptor
	stderr, err := openLog(rec.Stderr)
	if err != nil {
		return fail(err)
	}
	defer stderr.Close()

	// Choosing the port, starting the process and writing its record are one
	// step for every provider process sharing the directory, so no two
	// instances are handed the same port.
	unlock, err := p.store.lock(ctx)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	live, err := p.live(nil)
	if err != nil {
		return fail(err)
	}
	taken := map[int]bool{}
	for _, r := range live {
		taken[r.Port] = true
	}
	start := props.Ports.From + mrand.IntN(props.Ports.To-props.Ports.From+1)
	port, ok := choosePort(props.Ports, taken, start, bindableLocal)
	if !ok {
		return fail(fmt.Errorf("no free port in %d-%d", props.Ports.From, props.Ports.To))
	}
	rec.Port = port

	logical := ""
	if spec.LogicalID != nil {
		logical = string(*spec.LogicalID)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   append([]string{props.Command}, props.Args...),
		Dir:    dir,
		Env:    childEnv(os.Environ(), props.Env, port, string(id), logical, spec.Init),
		Stdout: stdout,
		Stderr: stderr,
		// Its own group: signals for the provider's group (a terminal's
		// Ctrl-C) do not reach it, and Destroy reaches all of it. No
		// Pdeathsig: instances outlive the provider.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		return "", provider.AttributeError("Cannot start command", fmt.Sprintf("start %s: %v", path, err), "command")
	}
	// Until the child is reaped (by its monitor) its pid cannot be reused,
	// so this identifies it.
	rec.Identity, err = proc.Identify(cmd.Process.Pid)
	if err == nil {
		err = p.store.write(rec)
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fail(err)
	}
	started = true
	p.logger.Info("started instance", "id", id, "pid", rec.PID, "port", port, "command", path)
	p.watchExit(rec, cmd)
	p.nudge()
	return id, nil
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// Label merges tags into the instance's record.
func (p *Provider) Label(ctx context.Context, id instance.ID, tags map[string]string) error {
	_, found, err := p.store.update(ctx, id, func(r *record) {
		if r.Tags == nil {
			r.Tags = map[string]string{}
		}
		maps.Copy(r.Tags, tags)
	})
	if err != nil {
		return fmt.Errorf("process: label %q: %w", id, err)
	}
	if !found {
		return fmt.Errorf("process: label %q: no such instance: %w", id, fs.ErrNotExist)
	}
	p.nudge()
	return nil
}

// DescribeInstances lists the live instances carrying every tag, sorted by
// ID. Records of processes that are gone are removed on the way.
func (p *Provider) DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]instance.Description, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs, err := p.live(tags)
	if err != nil {
		return nil, fmt.Errorf("process: describe: %w", err)
	}
	out := make([]instance.Description, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.describe(withProperties))
	}
	return out, nil
}

// live returns the records of running processes carrying every tag, and
// watches each for its exit. A record whose process exited is cleaned up
// (see gone); one whose pid names another process is forgotten.
func (p *Provider) live(tags map[string]string) ([]record, error) {
	recs, problems, err := p.store.list()
	if err != nil {
		return nil, err
	}
	for _, err := range problems {
		p.logger.Warn("skipping an unreadable record", "error", err)
	}
	out := recs[:0]
	for _, r := range recs {
		st, err := r.Check()
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", r.ID, err)
		}
		if st != proc.Running {
			p.gone(r, st)
			continue
		}
		p.watchExit(r, nil)
		if hasTags(r.Tags, tags) {
			out = append(out, r)
		}
	}
	return out, nil
}

// gone cleans up after an instance whose main process is no longer
// running: what is left of its group is killed (when provably its, and
// unless a Destroy is stopping it more gently), its record removed and
// watches told. It does nothing when the record is already gone, so the
// several paths that notice an exit (its monitor, a describe, Destroy)
// clean up once.
func (p *Provider) gone(r record, st proc.Status) {
	id := instance.ID(r.ID)
	cur, found, err := p.store.read(id)
	if err != nil {
		p.logger.Warn("cannot read the record of an exited instance", "id", id, "error", err)
		return
	}
	// Only the record of this very process: a concurrent Label may have
	// rewritten it, but never for another process (IDs are not reused).
	if !found || cur.Identity != r.Identity {
		return
	}
	p.mu.Lock()
	destroying := p.destroying[id]
	p.mu.Unlock()
	switch {
	case st == proc.Replaced:
		p.logger.Warn("forgetting instance: its pid names another process now; nothing signalled", "id", id, "pid", r.PID)
	case destroying || cur.Terminating:
		// A Destroy (here or in another provider process) stops the rest
		// of the group after its grace.
	default:
		if ok, err := proc.SignalGroup(r.Identity, syscall.SIGKILL); err != nil {
			p.logger.Warn("cannot stop what is left of an exited instance", "id", id, "pid", r.PID, "error", err)
		} else if ok {
			p.logger.Info("killed what was left of an exited instance's process group", "id", id, "pgid", r.PID)
		}
		p.logger.Info("instance exited", "id", id, "pid", r.PID)
	}
	if err := p.store.remove(id); err != nil {
		p.logger.Warn("cannot remove the record of an exited instance", "id", id, "error", err)
	}
	p.nudge()
}

// Destroy stops the instance: SIGTERM to its process group, up to
// kill_timeout for the group to end, then SIGKILL. Destroying an instance
// that is already gone is not an error. When ctx ends during the grace, the
// group is killed at once.
func (p *Provider) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	rec, found, err := p.store.update(ctx, id, func(r *record) { r.Terminating = true })
	if err != nil {
		return fmt.Errorf("process: destroy %q: %w", id, err)
	}
	if !found {
		return nil
	}
	p.mu.Lock()
	p.destroying[id] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.destroying, id)
		p.mu.Unlock()
	}()
	p.nudge() // terminating

	p.logger.Info("destroying instance", "id", id, "pid", rec.PID, "reason", reason)
	if err := stopGroup(ctx, rec.Identity, rec.KillTimeout, p.logger.With("id", id)); err != nil {
		return fmt.Errorf("process: destroy %q: %w", id, err)
	}
	st, err := rec.Check()
	if err != nil {
		st = proc.Exited
	}
	p.gone(rec, st)
	return nil
}

// killWait bounds the wait for a group to end after SIGKILL.
const killWait = 5 * time.Second

// stopGroup sends SIGTERM to the group, waits up to grace (less if ctx
// ends) for it to end, then sends SIGKILL and waits for that.
func stopGroup(ctx context.Context, id proc.Identity, grace time.Duration, logger hclog.Logger) error {
	signalled, err := proc.SignalGroup(id, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if !signalled {
		return nil // nothing provably ours is left
	}
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if gone, err := waitGroupGone(graceCtx, id); err != nil || gone {
		return err
	}
	logger.Info("still running after SIGTERM; sending SIGKILL", "pid", id.PID, "kill_timeout", grace)
	if _, err := proc.SignalGroup(id, syscall.SIGKILL); err != nil {
		return err
	}
	killCtx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	gone, err := waitGroupGone(killCtx, id)
	if err == nil && !gone {
		err = fmt.Errorf("%s: process group still running %s after SIGKILL", id, killWait)
	}
	return err
}

// waitGroupGone polls until the group has ended (true) or ctx ends (false).
func waitGroupGone(ctx context.Context, id proc.Identity) (bool, error) {
	wait := time.Millisecond
	for {
		gone, err := proc.GroupGone(id)
		if err != nil || gone {
			return gone, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func hasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// newID is "process-" followed by 8 random hex digits.
func newID() (instance.ID, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random ID: %w", err)
	}
	return instance.ID(Name + "-" + hex.EncodeToString(b[:])), nil
}

// compact returns raw without insignificant whitespace, or nil when absent.
func compact(raw json.RawMessage) json.RawMessage {
	if properties.IsNull(raw) {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw // Parse accepted it, so it is valid JSON
	}
	return b.Bytes()
}
