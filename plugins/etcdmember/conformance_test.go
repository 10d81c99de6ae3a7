package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// freePort is a loopback TCP port nothing listens on (it was free a moment
// ago), so that the members the suite names answer nowhere.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestConformance runs the provider conformance suite against the
// etcdmember binary, as a host launches it, for a group of three pets on
// loopback addresses whose ports nothing serves: Prepare forms a new
// cluster (no member answers), Healthy is unknown (no quorum is seen), and
// Drain has no cluster to remove the member from. Joining, judging and
// removing real members is what e2e/etcdcluster_test.go does on Docker.
func TestConformance(t *testing.T) {
	bin := builder.Build(t, ".")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	valid := fmt.Sprintf(`{"client_port": %d, "peer_port": %d, "timeout": "500ms", "cluster_token": "conformance"}`, freePort(t), freePort(t))
	t.Run("Suite", func(t *testing.T) {
		providertest.Run(t, providertest.Config{
			Binary: bin,
			Flavor: map[string]providertest.FlavorCase{
				"etcdmember": {
					Valid: json.RawMessage(valid),
					Invalid: []providertest.Invalid{
						{Properties: json.RawMessage(`{"client_port": 0}`), Path: []string{"client_port"}},
						{Properties: json.RawMessage(`{"peer_port": "2380"}`), Path: []string{"peer_port"}},
						{Properties: json.RawMessage(`{"client_port": 2380}`), Path: []string{"peer_port"}},
						{Properties: json.RawMessage(`{"cluster_token": "it's mine"}`), Path: []string{"cluster_token"}},
						{Properties: json.RawMessage(`{"timeout": "soon"}`), Path: []string{"timeout"}},
						{Properties: json.RawMessage(`{"members": 3}`), Path: []string{"members"}},
					},
					Allocation: flavor.Allocation{LogicalIDs: []instance.LogicalID{"127.77.18.1", "127.77.18.2", "127.77.18.3"}},
				},
			},
		})
	})
}
