// Command infrakit-provider-simulator is the embedded default provider:
// instances (compute, net, disk), load balancers (any name), NFS
// authorizations (disk), metrics read from files (file) and the
// "simulator" flavor, all kept as JSON files
// under $INFRAKIT_SIMULATOR_DIR (default .infrakit/simulator in the working
// directory). See README.md for the layout and the fault-injection knobs.
//
// Build: go build -o bin/infrakit-provider-simulator ./plugins/simulator
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/plugins/simulator/sim"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	// JSON on stderr is what the host's go-plugin logger parses.
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       sim.Name,
		Level:      hclog.LevelFromString(os.Getenv("INFRAKIT_LOG")),
		Output:     os.Stderr,
		JSONFormat: true,
	})
	cfg, err := sim.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.Logger = logger
	s, err := sim.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logger.Debug("serving", "version", version, "dir", s.Dir())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:     sim.Metadata(version),
		Instances:    s.InstancePlugins(),
		Flavors:      map[string]flavor.Plugin{sim.FlavorType: s.Flavor()},
		LoadBalancer: s.L4,
		Authorizers:  map[string]nfs.Authorizer{sim.AuthorizerType: s.Authorizer(sim.AuthorizerType)},
		Metrics:      map[string]metrics.Source{sim.MetricsType: s.Metrics()},
		Logger:       logger,
	})
}
