// Command infrakit-provider-healthcheck serves the "healthcheck" flavor: it
// judges an instance's health by probing its Address (TCP connect or HTTP
// GET) with a timeout and consecutive success/failure thresholds. See
// website/providers/healthcheck.md.
//
// Build: go build -o bin/infrakit-provider-healthcheck ./plugins/healthcheck
package main

import (
	"github.com/infrakit/infrakit/plugins/healthcheck/healthcheck"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(healthcheck.Name)
	f := healthcheck.New(healthcheck.Config{Logger: logger})
	plugin.Serve(&plugin.ServeConfig{
		Metadata: healthcheck.Metadata(version),
		Flavors:  map[string]flavor.Plugin{healthcheck.Type: f},
		Logger:   logger,
	})
}
