// Package embedded starts an etcd server inside the test process
// (go.etcd.io/etcd/server/v3/embed). The server is heavy to compile and to
// start: keep one per test package, started in TestMain.
package embedded

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

// Start starts an etcd server inside this process with its data in
// dir, and waits until it serves. Its heartbeat is fast (10 ms) so that it
// starts quickly and grants leases as short as one second.
func Start(dir string) (*etcdtest.Server, error) {
	clientURL, peerURL, err := etcdtest.LocalURLs()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("start embedded etcd: not ready after 30s")
	}
	return etcdtest.NewServer([]string{clientURL.String()}, func() error {
		e.Close()
		return nil
	}), nil
}
