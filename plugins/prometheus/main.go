// Command infrakit-provider-prometheus serves two things around a
// Prometheus server:
//
//   - the metrics source "promql", which answers autoscale checks by
//     instant queries to the server the provider block names
//     (`provider "prometheus" { address = "http://127.0.0.1:9090" }`);
//   - the NFS authorizer type "file_sd", which keeps Prometheus file_sd
//     target files equal to an enrollment's members, so Prometheus scrapes
//     a group's members as they come and go. Its registry of files is in
//     $INFRAKIT_PROMETHEUS_DIR, default .infrakit/prometheus.
//
// See website/providers/prometheus.md.
//
// Build: go build -o bin/infrakit-provider-prometheus ./plugins/prometheus
package main

import (
	"fmt"
	"os"

	"github.com/infrakit/infrakit/plugins/prometheus/filesd"
	"github.com/infrakit/infrakit/plugins/prometheus/query"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

// name is the provider's name, as the binary's: infrakit-provider-prometheus.
const name = "prometheus"

func main() {
	logger := plugin.NewLogger().Named(name)
	cfg := filesd.ConfigFromEnv(os.Getenv)
	cfg.Logger = logger
	auth, err := filesd.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Unconfigured until the host hands it the provider block: a block
	// without an address serves file_sd, and queries fail saying so.
	src := &query.Source{}
	logger.Debug("serving", "version", version, "dir", auth.Dir())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:    metadata(version),
		Metrics:     map[string]metrics.Source{query.Type: src},
		Authorizers: map[string]nfs.Authorizer{filesd.Type: auth},
		Configure:   src.Configure,
		Logger:      logger,
	})
}

// metadata lists the two served objects. A promql check has no properties
// (its query is passed as text), so its schema is empty and closed.
func metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    name,
		Version: version,
		Objects: []provider.Object{
			{Kind: provider.KindMetrics, Type: query.Type, Schema: provider.Schema{}},
			{Kind: provider.KindAuthorizer, Type: filesd.Type, Schema: filesd.Schema()},
		},
	}
}
