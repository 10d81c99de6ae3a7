// Command infrakit-provider-docker serves the "container" instance type:
// each instance is a Docker container made through the Engine API over
// $DOCKER_HOST (default unix:///var/run/docker.sock) from its properties;
// its tags are the container's labels, its Address the container's IP.
// Tags added by Label are recorded under $INFRAKIT_DOCKER_DIR (default
// .infrakit/docker in the stack directory). It never pulls images. See
// website/providers/docker.md.
//
// Build: go build -o bin/infrakit-provider-docker ./plugins/docker
package main

import (
	"fmt"
	"os"

	"github.com/infrakit/infrakit/plugins/docker/container"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(container.Name)
	cfg := container.ConfigFromEnv(os.Getenv)
	cfg.Logger = logger
	p, err := container.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Serve never returns; the containers outlive this process, and the
	// next provider finds them by their labels.
	logger.Debug("serving", "version", version, "host", p.Engine().Host(), "dir", p.Dir())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:  container.Metadata(version),
		Instances: map[string]instance.Plugin{container.Type: p},
		Logger:    logger,
	})
}
