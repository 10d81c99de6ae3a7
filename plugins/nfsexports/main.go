// Command infrakit-provider-nfsexports is an NFS authorizer (type
// "exports") that keeps an exports file equal to its authorizations:
// $INFRAKIT_NFS_EXPORTS_FILE, default /etc/exports.d/infrakit.exports,
// written atomically, then `exportfs -ra` when exportfs is in PATH.
// See website/providers/nfsexports.md.
//
// Build: go build -o bin/infrakit-provider-nfsexports ./plugins/nfsexports
package main

import (
	"fmt"
	"os"

	"github.com/infrakit/infrakit/plugins/nfsexports/exports"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(exports.Name)
	cfg, err := exports.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.Logger = logger
	a, err := exports.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logger.Debug("serving", "version", version, "file", a.File())
	plugin.Serve(&plugin.ServeConfig{
		Metadata:    exports.Metadata(version),
		Authorizers: map[string]nfs.Authorizer{exports.Type: a},
		Logger:      logger,
	})
}
