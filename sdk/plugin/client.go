package plugin

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
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// DefaultStartTimeout bounds a provider's handshake when
// ClientConfig.StartTimeout is zero.
const DefaultStartTimeout = 10 * time.Second

// ClientConfig says how to launch a provider binary.
type ClientConfig struct {
	// Name is how errors and logs call the provider ("simulator" or
	// "simulator.nfs-auth"); the binary's base name when empty.
	Name string
	Path string
	Args []string
	// Env is added to the environment the provider inherits (and wins over
	// it).
	Env []string
	// InheritEnv says which of the host's environment variables (by name)
	// the provider inherits; nil means all of them. A host that holds
	// secrets in its environment passes an allow-list. go-plugin adds its
	// handshake variables itself.
	InheritEnv func(name string) bool
	// Dir is the provider's working directory; empty means the host's. Hosts
	// set it to the stack's directory, where providers keep relative files.
	Dir string
	// SHA256, when set, is checked against the binary at launch (go-plugin
	// SecureConfig hashes it right before executing it).
	SHA256 []byte
	// AcceptSHA256 are further sums the binary may have (a lock file pins
	// one per platform). The binary is still read and hashed once.
	AcceptSHA256 [][]byte
	// StartTimeout bounds the handshake; default DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout bounds the graceful part of Kill, after which the
	// process group is killed; default DefaultStopTimeout.
	StopTimeout time.Duration
	// DisableMTLS turns AutoMTLS off (on by default).
	DisableMTLS bool
	// Logger receives the provider's own logs (named after Name) and the
	// host side's; nil discards them.
	Logger hclog.Logger
}

// Client is one running provider process. Its methods are safe for
// concurrent use. The host owns the process: call Kill when done with it.
type Client struct {
	name        string
	pid         int
	pc          *goplugin.Client
	logger      hclog.Logger
	stopTimeout time.Duration

	stopOnce sync.Once
	stopped  chan struct{} // closed once go-plugin's Kill has returned: the process is reaped
	forced   atomic.Bool   // set when the process was sent SIGKILL

	provider      pb.ProviderClient
	instances     pb.InstanceClient
	flavors       pb.FlavorClient
	loadBalancers pb.LoadBalancerClient
	authorizers   pb.AuthorizerClient
	metrics       pb.MetricsClient

	// unimplemented holds the optional batch RPCs ("HealthyBatch",
	// "PrepareBatch") the provider answered with UNIMPLEMENTED (it was
	// built with an SDK older than the RPC): later batches go straight to
	// one call per item.
	unimplemented sync.Map // method name -> struct{}
}

// unsupported reports whether c's provider said it does not serve method.
func unsupported(c *Client, method string) bool {
	_, ok := c.unimplemented.Load(method)
	return ok
}

// remember notes that c's provider does not serve method.
func remember(c *Client, method string) { c.unimplemented.Store(method, struct{}{}) }

// Start launches a provider and completes the handshake. The handshake is
// bounded by cfg.StartTimeout and by ctx's deadline, whichever is sooner;
// the process outlives ctx. On failure no process is left behind and the
// error names the binary, with the end of its stderr when it wrote any.
func Start(ctx context.Context, cfg ClientConfig) (*Client, error) {
	name := cfg.Name
	if name == "" {
		name = filepath.Base(cfg.Path)
	}
	fail := func(err error) error { return fmt.Errorf("provider %q: start: %w", name, err) }
	if err := ctx.Err(); err != nil {
		return nil, fail(err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadlineBound := false // ctx's deadline, not StartTimeout, bounds the handshake
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < timeout {
		timeout, deadlineBound = max(time.Until(deadline), time.Millisecond), true
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named(name)

	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(environ(os.Environ(), cfg.InheritEnv, cfg.Env), envHostPID+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = ownProcessGroup()
	stderr := &tail{max: 2048}
	pcfg := &goplugin.ClientConfig{
		HandshakeConfig:  handshake,
		Plugins:          goplugin.PluginSet{pluginName: &grpcPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true, // cmd.Env has what the provider inherits
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         !cfg.DisableMTLS,
		StartTimeout:     timeout,
		Managed:          false, // the host owns the lifetime
		Logger:           logger,
		Stderr:           stderr,
		GRPCDialOptions:  dialOptions(),
	}
	accepted := cfg.acceptedSums()
	var sum *checksum
	if len(accepted) > 0 {
		sum = newChecksum(accepted)
		pcfg.SecureConfig = &goplugin.SecureConfig{Checksum: accepted[0], Hash: sum}
	}
	pc := goplugin.NewClient(pcfg)
	stopTimeout := cfg.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	c := &Client{name: name, pc: pc, logger: logger, stopTimeout: stopTimeout, stopped: make(chan struct{})}

	conn, err := dispense(pc)
	if rc := pc.ReattachConfig(); rc != nil {
		c.pid = rc.Pid
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.Kill() // kills and reaps the process, if it started
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, fail(checksumError(cmd.Path, accepted, sum.found()))
		}
		return nil, fail(startError(err, cmd.Path, timeout, deadlineBound, stderr.String()))
	}
	c.provider = pb.NewProviderClient(conn)
	c.instances = pb.NewInstanceClient(conn)
	c.flavors = pb.NewFlavorClient(conn)
	c.loadBalancers = pb.NewLoadBalancerClient(conn)
	c.authorizers = pb.NewAuthorizerClient(conn)
	c.metrics = pb.NewMetricsClient(conn)
	return c, nil
}

// dispense runs the go-plugin handshake and returns the gRPC connection.
func dispense(pc *goplugin.Client) (*grpc.ClientConn, error) {
	rpc, err := pc.Client()
	if err != nil {
		return nil, err
	}
	raw, err := rpc.Dispense(pluginName)
	if err != nil {
		return nil, err
	}
	return raw.(*grpc.ClientConn), nil
}

// startError explains a failed launch (checksumError explains a checksum
// mismatch). go-plugin's errors are sentences without the binary's name.
func startError(err error, path string, timeout time.Duration, deadlineBound bool, stderr string) error {
	msg := err.Error()
	switch {
	case isTimeout(err):
		if deadlineBound {
			err = fmt.Errorf("%s: no plugin handshake before the deadline: %w", path, context.DeadlineExceeded)
		} else {
			err = fmt.Errorf("%s: no plugin handshake within %s; is it an infrakit provider?", path, timeout.Round(time.Millisecond))
		}
	case strings.Contains(msg, "plugin exited before we could connect"),
		strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		// The second is go-plugin seeing stdout close before the exit.
		err = fmt.Errorf("%s exited before the plugin handshake", path)
	case strings.HasPrefix(msg, "Unrecognized remote plugin message: "):
		first, _, _ := strings.Cut(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n")
		err = fmt.Errorf("%s is not an infrakit provider: it printed %q instead of a plugin handshake", path, first)
	default:
		var pathErr *os.PathError // fork/exec: say it once
		if errors.As(err, &pathErr) && pathErr.Path == path {
			err = pathErr.Err
		}
		err = fmt.Errorf("%s: %w", path, err)
	}
	if stderr = strings.TrimSpace(stderr); stderr != "" {
		err = fmt.Errorf("%w; its stderr ends with:\n%s", err, stderr)
	}
	return err
}

// isTimeout recognises go-plugin's handshake timeout, which has no sentinel.
func isTimeout(err error) bool {
	return strings.Contains(err.Error(), "timeout while waiting for plugin to start")
}

// tail keeps the last max bytes written to it: the end of a provider's
// stderr, for the error of a failed start.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
		if i := bytes.IndexByte(t.buf, '\n'); i >= 0 {
			t.buf = t.buf[i+1:] // start at a line
		}
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Metadata asks the provider about itself.
func (c *Client) Metadata(ctx context.Context) (provider.Metadata, error) {
	resp, err := c.provider.Metadata(ctx, &pb.ProviderMetadataRequest{})
	if err := c.check(ctx, "Metadata", err, nil); err != nil {
		return provider.Metadata{}, err
	}
	m, err := metadataFromProto(resp)
	if err != nil {
		return provider.Metadata{}, c.fail("Metadata", err)
	}
	return m, nil
}

// Instance returns the instance SPI of one type; it also implements instance.Watcher.
func (c *Client) Instance(typ string) instance.Plugin { return instanceClient{c: c, typ: typ} }

// Flavor returns the flavor SPI of one type.
func (c *Client) Flavor(typ string) flavor.Plugin { return flavorClient{c: c, typ: typ} }

// LoadBalancer returns the named load balancer.
func (c *Client) LoadBalancer(name string) loadbalancer.L4 {
	return loadBalancerClient{c: c, name: name}
}

// Authorizer returns the NFS authorizer of one type.
func (c *Client) Authorizer(typ string) nfs.Authorizer { return authorizerClient{c: c, typ: typ} }

// Metrics returns the metrics source of one query language ("promql").
func (c *Client) Metrics(typ string) metrics.Source { return metricsClient{c: c, typ: typ} }

// Pid is the provider's process id.
func (c *Client) Pid() int { return c.pid }

// check turns a call's outcome into the SPI's error: a transport or status
// error, or the diagnostics when they hold an error. Warnings alone do not
// fail the call; they are logged.
func (c *Client) check(ctx context.Context, method string, err error, diags []*pb.Diagnostic) error {
	if err != nil {
		return c.fail(method, errorFromStatus(ctx, err))
	}
	ds := diagnosticsFromProto(diags)
	if ds.HasErrors() {
		return c.fail(method, ds)
	}
	for _, d := range ds {
		c.logger.Warn(d.Summary, "method", method, "detail", d.Detail, "attribute", strings.Join(d.Path, "."))
	}
	return nil
}

// fail wraps err as every error of a Client reads.
func (c *Client) fail(method string, err error) error {
	return fmt.Errorf("provider %q: %s: %w", c.name, method, err)
}

// providerServer serves the Provider service.
type providerServer struct {
	pb.UnimplementedProviderServer
	s *server
}

func (x providerServer) Metadata(context.Context, *pb.ProviderMetadataRequest) (*pb.ProviderMetadataResponse, error) {
	resp, err := metadataToProto(x.s.metadata)
	if err != nil {
		return nil, badResult(err)
	}
	return resp, nil
}

// environ is a provider's environment: the host's variables that inherit
// accepts (all when nil), then extra, later entries winning (os/exec keeps
// the last of a name).
func environ(host []string, inherit func(string) bool, extra []string) []string {
	var out []string
	for _, kv := range host {
		name, _, _ := strings.Cut(kv, "=")
		if inherit == nil || inherit(name) {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}
