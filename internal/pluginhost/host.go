package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/plugin"
)

// Options configure a Host.
type Options struct {
	// WorkDir is the working directory: providers are installed under it and
	// run with it as their working directory.
	WorkDir string
	// Lock pins the providers; nil reads WorkDir's lock file.
	Lock *Lock
	// Logger receives the host's and the providers' logs; nil drops them.
	Logger hclog.Logger
	// StartTimeout bounds each handshake; zero means the sdk/plugin default.
	StartTimeout time.Duration
	DisableMTLS  bool
	// Env is added to every provider's environment ("KEY=value") and wins
	// over what it inherits of infrakit's own: the allow-list of env.go and
	// what $INFRAKIT_PROVIDER_ENV names.
	Env []string
	// StopTimeout bounds the graceful part of a provider's stop, after which
	// its process group is killed; zero means the sdk/plugin default.
	StopTimeout time.Duration
	// MinBackoff and MaxBackoff bound the relaunch backoff of a crashing
	// provider; zero means DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// Host runs the providers of one working directory for one command (or one
// `watch`): one process per provider key, launched on first use from the
// installed binary the lock file pins, checked against the locked checksum at
// every launch, configured with its block's configuration (SetConfig),
// relaunched with backoff when it dies, and killed by Close.
// Its methods are safe for concurrent use.
type Host struct {
	opts    Options
	workdir string
	lock    *Lock
	log     hclog.Logger
	now     func() time.Time // a clock tests can drive
	// inherit says which of infrakit's environment variables providers
	// inherit, fixed at New.
	inherit func(name string) bool

	mu     sync.Mutex
	closed bool
	procs  map[string]*proc // by key
}

// proc is the process of one provider key.
type proc struct {
	// turn is held (a token in the channel) by the one caller inspecting or
	// launching this key, so concurrent callers share one launch and can still
	// give up when their context ends.
	turn chan struct{}

	// Under turn:
	restarts restarts
	lastErr  error // why the last launch failed or the last process ended
	// configured is the configuration client last took (nil: none yet).
	configured json.RawMessage

	// config is the block's configuration to hand out, under Host.mu (see
	// SetConfig).
	config json.RawMessage

	// client is written under turn and Host.mu, read under either.
	client *plugin.Client
}

// New returns a Host for opts.WorkDir. It reads the lock file unless
// opts.Lock is given; it launches nothing.
func New(opts Options) (*Host, error) {
	workdir, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	lock := opts.Lock
	if lock == nil {
		if lock, err = LoadLock(workdir); err != nil {
			return nil, err
		}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	return &Host{
		opts:    opts,
		workdir: workdir,
		lock:    lock,
		log:     logger(opts.Logger),
		now:     time.Now,
		inherit: inheritable(os.Getenv(EnvProviderEnv)),
		procs:   map[string]*proc{},
	}, nil
}

// ErrClosed is returned by Client after Close.
var ErrClosed = errors.New("plugin host closed")

// NotInstalledError says a provider the stack uses is not installed (or not
// locked): the fix is `infrakit init`.
type NotInstalledError struct {
	Name string
	// Path is the binary looked for; empty when the lock file does not name
	// the provider.
	Path string
}

func (e *NotInstalledError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("provider %q is not installed (the lock file does not name it): run `infrakit init`", e.Name)
	}
	return fmt.Sprintf("provider %q is not installed (no %s): run `infrakit init`", e.Name, e.Path)
}

// ChecksumError says an installed binary is not the one the lock file pins,
// so the Host refuses to run it.
type ChecksumError struct {
	Name     string
	Path     string
	Expected []Hash
	Actual   Hash
}

func (e *ChecksumError) Error() string {
	expected := "none"
	if len(e.Expected) > 0 {
		parts := make([]string, len(e.Expected))
		for i, h := range e.Expected {
			parts[i] = string(h)
		}
		expected = strings.Join(parts, " or ")
	}
	return fmt.Sprintf("provider %q: refusing to run %s: its checksum is %s but the lock file expects %s; "+
		"it changed after it was installed: reinstall it with `infrakit init -upgrade` or `infrakit plugins install`",
		e.Name, e.Path, e.Actual, expected)
}

// ParseKey splits a provider key, "name" or "name.alias".
func ParseKey(key string) (name, alias string, err error) {
	name, alias, hasAlias := strings.Cut(key, ".")
	if name == "" || (hasAlias && alias == "") || strings.Contains(alias, ".") {
		return "", "", fmt.Errorf("provider key %q: want NAME or NAME.ALIAS", key)
	}
	return name, alias, nil
}

// Client returns the running provider process for key ("simulator" or
// "simulator.nfs-auth"), launching it on first use. Each key is its own
// process; aliases run the same installed binary as their provider name.
//
// A process that has exited (it crashed or was killed) is noticed here and
// relaunched, no sooner than the backoff allows: until then Client returns an
// error that says when it will try again and why the last process ended.
//
// The process returned has taken the key's configuration (SetConfig); when
// it does not, Client returns a *ConfigError and the process stays, to be
// configured again by the next call.
func (h *Host) Client(ctx context.Context, key string) (*plugin.Client, error) {
	name, _, err := ParseKey(key)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, fmt.Errorf("provider %q: %w", key, ErrClosed)
	}
	p := h.proc(key)
	h.mu.Unlock()

	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("provider %q: %w", key, ctx.Err())
	}
	defer func() { <-p.turn }()
	if h.isClosed() {
		return nil, fmt.Errorf("provider %q: %w", key, ErrClosed)
	}

	now := h.now()
	if p.client != nil {
		if !p.client.Exited() {
			if err := h.configure(ctx, key, p, p.client); err != nil {
				return nil, err
			}
			return p.client, nil
		}
		h.log.Warn("provider process exited; relaunching", "provider", key)
		p.restarts.exited(now)
		p.lastErr = fmt.Errorf("its process exited (found dead %s after its launch)", now.Sub(p.restarts.lastLaunch).Round(time.Millisecond))
		dead := p.client
		h.setClient(p, nil)
		// Kill reaps the process and frees go-plugin's resources for it.
		dead.Kill()
	}
	if !p.restarts.allowed(now) {
		at := p.restarts.next()
		return nil, fmt.Errorf("provider %q: waiting to relaunch: next attempt in %s (at %s): %w",
			key, at.Sub(now).Round(time.Millisecond), at.Format("15:04:05.000"), p.lastErr)
	}
	p.restarts.launching(now)
	c, err := h.launch(ctx, key, name)
	if err != nil {
		p.restarts.launchFailed()
		p.lastErr = err
		return nil, err
	}
	if !h.setClient(p, c) {
		// Close ran while we were launching; it could not see this process.
		c.Kill()
		return nil, fmt.Errorf("provider %q: %w", key, ErrClosed)
	}
	p.configured = nil
	if err := h.configure(ctx, key, p, c); err != nil {
		return nil, err
	}
	return c, nil
}

// proc returns key's record, creating it; h.mu is held.
func (h *Host) proc(key string) *proc {
	p, ok := h.procs[key]
	if !ok {
		p = &proc{
			turn:     make(chan struct{}, 1),
			restarts: restarts{min: h.opts.MinBackoff, max: h.opts.MaxBackoff},
		}
		h.procs[key] = p
	}
	return p
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// setClient stores c as p's process unless the host is closed (c non-nil).
func (h *Host) setClient(p *proc, c *plugin.Client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c != nil && h.closed {
		return false
	}
	p.client = c
	return true
}

// launch starts the installed binary of provider name as process key. The
// binary must have one of the checksums the lock file pins: go-plugin hashes
// it right before executing it (SecureConfig), the one time it is read per
// launch, which is what a launch of a ~20 MB provider spends most on (sha256
// runs at about 1 GB/s, some 20 ms).
func (h *Host) launch(ctx context.Context, key, name string) (*plugin.Client, error) {
	locked, ok := h.lock.Provider(name)
	if !ok {
		return nil, &NotInstalledError{Name: name}
	}
	path := InstallPath(h.workdir, name, locked.Version)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, &NotInstalledError{Name: name, Path: path}
	} else if err != nil {
		return nil, fmt.Errorf("provider %q: %w", key, err)
	}
	sums := make([][]byte, 0, len(locked.Hashes))
	for _, hash := range locked.Hashes {
		sum, err := hash.sum()
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", key, err)
		}
		sums = append(sums, sum)
	}
	if len(sums) == 0 {
		// Nothing is pinned, so nothing is accepted (and go-plugin, given
		// no checksum, would check none).
		return nil, h.checksumError(name, path, locked)
	}
	h.log.Debug("launching provider", "provider", key, "path", path, "version", locked.Version)
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name:         key,
		Path:         path,
		Env:          h.opts.Env,
		InheritEnv:   h.inherit,
		Dir:          h.workdir,
		SHA256:       sums[0],
		AcceptSHA256: sums[1:],
		StartTimeout: h.opts.StartTimeout,
		StopTimeout:  h.opts.StopTimeout,
		DisableMTLS:  h.opts.DisableMTLS,
		Logger:       h.log,
	})
	if errors.Is(err, plugin.ErrChecksumMismatch) {
		return nil, h.checksumError(name, path, locked)
	}
	if err != nil {
		return nil, fmt.Errorf("provider %q: launch %s: %w", key, path, err)
	}
	return c, nil
}

// checksumError builds the error for a binary the lock file does not pin,
// hashing it to name its checksum (a failed launch only).
func (h *Host) checksumError(name, path string, locked LockedProvider) error {
	actual, err := HashFile(path)
	if err != nil {
		return fmt.Errorf("provider %q: refusing to run %s: %w", name, path, err)
	}
	return &ChecksumError{Name: name, Path: path, Expected: locked.Hashes, Actual: actual}
}

// Close stops every provider process and makes later Client calls fail. A
// launch in progress is killed as soon as it completes. It waits for the
// processes to end, which takes Options.StopTimeout at most for a provider
// that does not exit when asked (a frozen one), then its process group is
// killed (plugin.Client.Kill). It may be called more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	var clients []*plugin.Client
	for _, p := range h.procs {
		// p.client stays set: a Client call holding p's turn may read it, and
		// after closed it can only find it exited and be refused a relaunch.
		if p.client != nil {
			clients = append(clients, p.client)
		}
	}
	h.mu.Unlock()

	// Kill asks gracefully and forces after StopTimeout; do all at once so
	// Close takes as long as the slowest provider, not the sum.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Kill()
		}()
	}
	wg.Wait()
	return nil
}

// CloseWhenDone closes h when ctx is done (the command layer cancels its
// context on the first Ctrl-C or SIGTERM), so no provider outlives an
// interrupted command. stop detaches h from ctx; it reports whether it
// stopped the close from happening. Callers still defer h.Close for the
// normal path.
func (h *Host) CloseWhenDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = h.Close() })
}
