// Command infrakit-provider-haproxy is an L4 load balancer provider that
// drives a real HAProxy: each load balancer name becomes frontends and
// backends of one HAProxy, which the provider runs itself (master-worker,
// state in $INFRAKIT_HAPROXY_DIR, default .infrakit/haproxy) or manages for
// an operator ($INFRAKIT_HAPROXY_CONFIG and $INFRAKIT_HAPROXY_MASTER_SOCKET).
// Backends change through the runtime API without a reload; routes change
// with a hitless reload. See website/providers/haproxy.md.
//
// Build: go build -o bin/infrakit-provider-haproxy ./plugins/haproxy
package main

import (
	"fmt"
	"os"

	"github.com/infrakit/infrakit/plugins/haproxy/lb"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(lb.Name)
	s, err := lb.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.Logger = logger
	p, err := lb.New(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logger.Debug("serving", "version", version, "dir", p.Settings().Dir, "external", p.Settings().External())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:     lb.Metadata(version),
		LoadBalancer: p.L4,
		Logger:       logger,
	})
}
