// Command infrakit-provider-vanilla serves the "vanilla" flavor: init script
// lines, tags and attachments added to each instance; always healthy.
//
// Build: go build -o bin/infrakit-provider-vanilla ./plugins/vanilla
package main

import (
	"github.com/infrakit/infrakit/plugins/vanilla/vanilla"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	plugin.Serve(&plugin.ServeConfig{
		Metadata: vanilla.Metadata(version),
		Flavors:  map[string]flavor.Plugin{vanilla.Type: vanilla.Flavor{}},
	})
}
