// Command infrakit-provider-process serves the "process" instance type:
// each instance is a local OS process started from its properties, with
// $PORT handed out from a range and its Address 127.0.0.1:$PORT. Records and
// logs live under $INFRAKIT_PROCESS_DIR (default .infrakit/process in the
// stack directory). See website/providers/process.md.
//
// Build: go build -o bin/infrakit-provider-process ./plugins/process
package main

import (
	"fmt"
	"os"

	"github.com/infrakit/infrakit/plugins/process/process"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(process.Name)
	cfg := process.ConfigFromEnv(os.Getenv)
	cfg.Logger = logger
	p, err := process.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Serve never returns; the instances outlive this process, and the next
	// provider adopts them.
	logger.Debug("serving", "version", version, "dir", p.Dir())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:  process.Metadata(version),
		Instances: map[string]instance.Plugin{process.Type: p},
		Logger:    logger,
	})
}
