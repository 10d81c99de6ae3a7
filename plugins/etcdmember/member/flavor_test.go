package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMember runs a one-member etcd cluster (embedded) as the pet at
// 127.0.0.1 with the given ports, without etcd's strict reconfiguration
// check, so the test can add a member that never starts.
func startMember(t *testing.T, clientPort, peerPort int) {
	t.Helper()
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg := embed.NewConfig()
	cfg.Name = "127.0.0.1"
	cfg.Dir = t.TempDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.StrictReconfigCheck = false
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start within 30s")
	}
}

func memberCount(t *testing.T, clientPort int) int {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", clientPort)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Members)
}

// Against a real etcd: the running member is healthy; a second pet is
// added once, and preparing it again (a provision that failed after its
// Prepare) does not add it twice; with that member added but not running
// the cluster has no quorum, so the first member is unknown (not
// unhealthy) and removing the second is refused, saying why.
func TestFlavorAgainstEtcd(t *testing.T) {
	clientPort, peerPort := freePort(t), freePort(t)
	startMember(t, clientPort, peerPort)
	props := json.RawMessage(fmt.Sprintf(`{"client_port": %d, "peer_port": %d, "timeout": "1s"}`, clientPort, peerPort))
	f := New(nil)
	ctx := t.Context()
	a, b := instance.LogicalID("127.0.0.1"), instance.LogicalID("127.0.0.2")
	alloc := flavor.Allocation{LogicalIDs: []instance.LogicalID{a, b}}

	running := instance.Description{ID: "a", LogicalID: &a, State: instance.StateRunning, Tags: map[string]string{TagPeers: "127.0.0.1,127.0.0.2"}}
	if h, err := f.Healthy(ctx, props, running); err != nil || h != flavor.HealthHealthy {
		t.Fatalf("the running member: %s, %v; want healthy", h, err)
	}

	err := f.Validate(ctx, props, alloc)
	var ds provider.Diagnostics
	if !errors.As(err, &ds) || ds.HasErrors() || len(ds) != 1 || ds[0].Severity != provider.Warning {
		t.Fatalf("Validate of 2 members: %v; want one warning", err)
	}

	for round := range 2 {
		spec, err := f.Prepare(ctx, props, instance.Spec{LogicalID: &b, Init: "echo first"}, alloc, flavor.Index{Group: "etcd"})
		if err != nil {
			t.Fatalf("prepare %d: %v", round, err)
		}
		want := []string{"echo first\n", "export ETCD_INITIAL_CLUSTER_STATE='existing'\n", "export ETCD_NAME='127.0.0.2'\n",
			fmt.Sprintf("export ETCD_INITIAL_CLUSTER='127.0.0.1=http://127.0.0.1:%d,127.0.0.2=http://127.0.0.2:%d'\n", peerPort, peerPort)}
		for _, w := range want {
			if !strings.Contains(spec.Init, w) {
				t.Fatalf("prepare %d: init %q lacks %q", round, spec.Init, w)
			}
		}
		if n := memberCount(t, clientPort); n != 2 {
			t.Fatalf("after prepare %d the cluster has %d members, want 2", round, n)
		}
	}

	if h, err := f.Healthy(ctx, props, running); err != nil || h != flavor.HealthUnknown {
		t.Fatalf("the running member without a quorum: %s, %v; want unknown", h, err)
	}
	second := instance.Description{ID: "b", LogicalID: &b, State: instance.StateRunning, Tags: map[string]string{TagPeers: "127.0.0.1,127.0.0.2"}}
	err = f.Drain(ctx, props, second)
	if err == nil || !strings.Contains(err.Error(), "refusing to remove member 127.0.0.2") {
		t.Fatalf("drain without a quorum: %v; want a refusal", err)
	}
	if n := memberCount(t, clientPort); n != 2 {
		t.Fatalf("after the refused drain the cluster has %d members, want 2", n)
	}
}
