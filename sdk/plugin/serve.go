package plugin

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

// ServeConfig is what a provider serves. Maps are keyed by type name.
type ServeConfig struct {
	// Metadata: Name, Version and Objects (kind, type, property schema).
	// Served types missing from Objects are added with an open schema, so
	// Metadata always lists everything the provider serves.
	Metadata provider.Metadata
	// Instances by instance type ("compute"). A Plugin that also implements
	// instance.Watcher serves the Watch stream.
	Instances map[string]instance.Plugin
	// Flavors by flavor type ("vanilla").
	Flavors map[string]flavor.Plugin
	// LoadBalancer returns the named load balancer; nil when none are served.
	LoadBalancer func(name string) (loadbalancer.L4, error)
	// Authorizers by authorizer type ("disk").
	Authorizers map[string]nfs.Authorizer
	// Metrics sources by query language ("promql").
	Metrics map[string]metrics.Source
	// Configure receives the provider block's configuration: its attributes
	// other than alias and parallelism, as a JSON object (`{}` when it has
	// none). The host calls it before its first other call to the process
	// and again whenever the block changed, so it may run while other calls
	// are in flight: keep the configuration behind a lock (or an
	// atomic.Pointer) and let each call read it once. Return
	// provider.Diagnostics with paths inside the object (["address"]) for
	// what is wrong; the host then calls Configure again before the
	// process's next use. A process whose block has no attributes of the
	// provider's is not configured at all (unless an earlier configuration
	// of it had some: it then gets `{}`, the defaults), so the zero
	// configuration must be usable or make the SPI calls fail with a clear
	// error.
	//
	// nil means the provider takes no configuration: a block's attributes
	// are accepted and ignored, each with a warning diagnostic (logged by the
	// host), so stacks written before providers received them keep working.
	Configure func(ctx context.Context, config json.RawMessage) error
	// Logger is optional; by default it is NewLogger().
	Logger hclog.Logger
}

// Serve runs the provider until the host goes away. It does not return: it
// exits the process when the host kills the provider or dies itself.
//
// SPI methods report problems with user input by returning
// provider.Diagnostics (with attribute paths); the host gets them back as
// provider.Diagnostics. Diagnostics holding only warnings do not fail the
// call (as with Diagnostics.Err). Any other error reaches the host as its
// message; return (or wrap) errors.ErrUnsupported for an operation the
// provider does not support.
//
// A binary run by hand, not by a host, prints a short notice and exits 1.
func Serve(cfg *ServeConfig) {
	logger := cfg.Logger
	if logger == nil {
		logger = NewLogger()
	}
	watchHost(logger, os.Getppid(), hostPIDFromEnv())
	stopProfile := startProfile(logger)

	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins: goplugin.PluginSet{
			pluginName: &grpcPlugin{server: newServer(cfg, logger)},
		},
		GRPCServer: newGRPCServer,
		Logger:     logger,
	})
	// goplugin.Serve returns once the host shut the server down (Kill).
	stopProfile()
	os.Exit(0)
}

// NewLogger returns the logger a provider should log with, and the one Serve
// uses when ServeConfig.Logger is nil: JSON on stderr, which the host parses
// and re-logs under the provider's name, at the level INFRAKIT_LOG names
// (trace, debug, info, warn, error; default info). Call it before Serve:
// Serve redirects os.Stderr, and the logger keeps the real one.
func NewLogger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("INFRAKIT_LOG"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Output:     os.Stderr,
		Level:      level,
		JSONFormat: true,
	})
}

func hostPIDFromEnv() int {
	pid, err := strconv.Atoi(os.Getenv(envHostPID))
	if err != nil {
		return 0
	}
	return pid
}

// hostPollInterval is how often a provider checks that its host is alive
// where it cannot wait on the host's exit (hostExitWaiter); an orphaned
// provider exits within about this long.
const hostPollInterval = 250 * time.Millisecond

// watchHost exits the process once the host is gone. go-plugin gives the
// provider the host's stdin, which is not closed when the host dies, and
// PR_SET_PDEATHSIG fires when the forking *thread* ends, which a Go host
// does not control; so wait on the parent's exit (its pidfd) where the
// kernel allows, else poll: the parent pid changes when the parent dies
// (the child is re-parented). hostPID, when given, covers a host that
// started the provider through a wrapper, or died before the first check.
// The goroutine lives as long as the process.
func watchHost(logger hclog.Logger, ppid, hostPID int) {
	exit := func() {
		logger.Info("host process is gone; exiting", "host_pid", hostPID, "parent_pid", ppid)
		os.Exit(0)
	}
	go func() {
		if wait := hostExitWaiter(ppid, hostPID); wait != nil {
			err := wait()
			if err == nil {
				exit()
			}
			logger.Warn("cannot wait on the host's exit; polling for it instead", "error", err)
		}
		t := time.NewTicker(hostPollInterval)
		defer t.Stop()
		for range t.C {
			if os.Getppid() != ppid || (hostPID > 0 && !processAlive(hostPID)) {
				exit()
			}
		}
	}()
}
