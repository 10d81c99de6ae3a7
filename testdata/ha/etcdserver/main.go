// Command etcdserver is a one-member etcd server built on
// go.etcd.io/etcd/server/v3/embed, so it compiles into one static binary
// (CGO_ENABLED=0) that an image FROM scratch can run: the etcd of the
// multi-host HA test (e2e/hadocker_test.go), which may pull no image from
// a registry.
//
//	-name NAME               member name (default "etcd")
//	-data-dir DIR            where it keeps its data (default /data)
//	-listen-client URL       client URL to listen on (default http://0.0.0.0:2379)
//	-advertise-client URL    client URL to advertise (default http://etcd:2379)
//	-heartbeat-ms N          raft heartbeat (default 50)
//	-election-ms N           raft election timeout (default 500)
//
// Peers listen on 127.0.0.1:2380 only: the cluster has one member. With the
// default timings it grants leases as short as one second. SIGTERM or
// SIGINT stop it cleanly.
//
// Build: CGO_ENABLED=0 go build -o etcdserver ./testdata/ha/etcdserver
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	log.SetPrefix("etcdserver: ")
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	name := flag.String("name", "etcd", "member name")
	dataDir := flag.String("data-dir", "/data", "data directory")
	listenClient := flag.String("listen-client", "http://0.0.0.0:2379", "client URL to listen on")
	advertiseClient := flag.String("advertise-client", "http://etcd:2379", "client URL to advertise")
	heartbeat := flag.Uint("heartbeat-ms", 50, "raft heartbeat interval in milliseconds")
	election := flag.Uint("election-ms", 500, "raft election timeout in milliseconds")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("no arguments expected; got %q", flag.Args())
	}

	listen, err := url.Parse(*listenClient)
	if err != nil {
		return fmt.Errorf("-listen-client: %w", err)
	}
	advertise, err := url.Parse(*advertiseClient)
	if err != nil {
		return fmt.Errorf("-advertise-client: %w", err)
	}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:2380"}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*listen}
	cfg.AdvertiseClientUrls = []url.URL{*advertise}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = *heartbeat
	cfg.ElectionMs = *election
	cfg.LogLevel = "warn"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("start etcd: %w", err)
	case <-time.After(time.Minute):
		return errors.New("start etcd: not ready after a minute")
	}
	// The test waits for this line before it starts the managers.
	log.Printf("serving %s (advertised as %s)", listen, advertise)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-stop:
		log.Printf("%s: stopping", sig)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}
