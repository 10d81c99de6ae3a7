// Command infrakit-provider-etcdmember serves the "etcdmember" flavor: the
// pets of a group are the members of one etcd cluster, joined, judged and
// removed through etcd's own client. See website/etcd-cluster.md.
//
// Build: go build -o bin/infrakit-provider-etcdmember ./plugins/etcdmember
package main

import (
	"github.com/infrakit/infrakit/plugins/etcdmember/member"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	logger := plugin.NewLogger().Named(member.Name)
	plugin.Serve(&plugin.ServeConfig{
		Metadata: member.Metadata(version),
		Flavors:  map[string]flavor.Plugin{member.Type: member.New(logger)},
		Logger:   logger,
	})
}
