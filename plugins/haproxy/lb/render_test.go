package lb

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// e2eRecord is the e2e walk-through's lb1 and lb3 after some traffic: an
// https route with a PEM file (terminated), one without (passed through), a
// plain tcp route, and backends with and without their own port.
func e2eRecord() *Record {
	rec := newRecord()
	rec.LoadBalancers["lb1"] = &LB{
		Slots: 4,
		Routes: []RouteRecord{
			{LoadBalancerPort: 80, LoadBalancerProtocol: "https", Port: 80, Protocol: "http", Certificate: "external-cer-id1"},
			{LoadBalancerPort: 8443, LoadBalancerProtocol: "https", Port: 443, Protocol: "https", Certificate: "have-pem"},
		},
		Backends: []BackendRecord{
			{ID: "miner-1", Address: "10.0.0.1", IP: "10.0.0.1", Slot: 2},
			{ID: "miner-2", Address: "web-2.internal", IP: "10.0.0.2", Slot: 1},
			{ID: "miner-3", Address: "web-3.unresolved"},
		},
		HealthCheck: &HealthCheckRecord{BackendPort: 80, Healthy: 2, Unhealthy: 2, IntervalMS: 10000, TimeoutMS: 5000},
	}
	rec.LoadBalancers["lb3"] = &LB{
		Slots:    2,
		Routes:   []RouteRecord{{LoadBalancerPort: 5432, LoadBalancerProtocol: "tcp", Port: 5432, Protocol: "tcp"}},
		Backends: []BackendRecord{{ID: "db-1", Address: "[::1]:6432", IP: "::1", Port: 6432, Slot: 1}},
	}
	return rec
}

func e2eInput(owned bool) renderInput {
	return renderInput{
		Owned:          owned,
		AdminSocket:    "/var/lib/infrakit/haproxy/admin.sock",
		Bind:           "127.0.0.1",
		CheckPath:      "/healthz",
		FastInterval:   500 * time.Millisecond,
		ConnectTimeout: time.Second,
		CertFiles:      map[string]string{"have-pem": "/etc/infrakit/certs/have-pem.pem"},
		Record:         e2eRecord(),
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		owned bool
	}{{"owned.cfg", true}, {"external.cfg", false}} {
		t.Run(tc.file, func(t *testing.T) {
			got := render(e2eInput(tc.owned), true)
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("render differs from %s (run with -update after checking):\n%s", path, got)
			}
		})
	}
}

// TestStructure: what the runtime API can change (which backend is in
// which slot, at which address) leaves the structure alone; what it cannot
// (routes, slot count, health check) changes it.
func TestStructure(t *testing.T) {
	base := structureHash(e2eInput(true))
	same := []func(*Record){
		func(r *Record) { r.LoadBalancers["lb1"].Backends[0].IP = "10.9.9.9" },
		func(r *Record) { r.LoadBalancers["lb1"].Backends[0].Slot = 3 },
		func(r *Record) { r.LoadBalancers["lb1"].Backends = r.LoadBalancers["lb1"].Backends[:1] },
		func(r *Record) { r.Loaded = "something else" },
	}
	differs := []func(*Record){
		func(r *Record) { r.LoadBalancers["lb1"].Slots = 8 },
		func(r *Record) { r.LoadBalancers["lb1"].Routes = r.LoadBalancers["lb1"].Routes[:1] },
		func(r *Record) { r.LoadBalancers["lb1"].HealthCheck.Healthy = 3 },
		func(r *Record) { r.LoadBalancers["lb1"].HealthCheck = nil },
		func(r *Record) { r.LoadBalancers["lb1"].Routes[0].Port = 81 },
		// A backend with its own port moves the health check to it.
		func(r *Record) { r.LoadBalancers["lb1"].Backends[0].Port = 9000 },
	}
	for i, f := range same {
		in := e2eInput(true)
		f(in.Record)
		if structureHash(in) != base {
			t.Errorf("same[%d] changed the structure", i)
		}
	}
	for i, f := range differs {
		in := e2eInput(true)
		f(in.Record)
		if structureHash(in) == base {
			t.Errorf("differs[%d] kept the structure", i)
		}
	}
}

func TestModeOf(t *testing.T) {
	certs := map[string]string{"c": "/certs/c.pem"}
	tests := []struct {
		lbp, bp, cert string
		want          routeMode
	}{
		{"tcp", "tcp", "", routeMode{Mode: "tcp"}},
		{"", "", "", routeMode{Mode: "tcp"}},
		{"http", "http", "", routeMode{Mode: "http", HTTPCheck: true}},
		{"HTTP", "HTTP", "", routeMode{Mode: "http", HTTPCheck: true}},
		{"http", "tcp", "", routeMode{Mode: "http"}},
		{"https", "http", "missing", routeMode{Mode: "tcp"}},
		{"https", "http", "c", routeMode{Mode: "http", CertFile: "/certs/c.pem", HTTPCheck: true}},
		{"https", "https", "c", routeMode{Mode: "http", CertFile: "/certs/c.pem", ServerSSL: true}},
		{"ssl", "tcp", "c", routeMode{Mode: "tcp", CertFile: "/certs/c.pem"}},
		{"ssl", "ssl", "c", routeMode{Mode: "tcp", CertFile: "/certs/c.pem", ServerSSL: true}},
		{"tcp", "tcp", "c", routeMode{Mode: "tcp"}}, // a certificate on plain tcp is ignored
	}
	for _, tt := range tests {
		got := modeOf(RouteRecord{LoadBalancerProtocol: tt.lbp, Protocol: tt.bp, Certificate: tt.cert}, certs)
		if got != tt.want {
			t.Errorf("%s->%s cert %q: got %+v, want %+v", tt.lbp, tt.bp, tt.cert, got, tt.want)
		}
	}
}

func TestRuntimeChanges(t *testing.T) {
	ip := netip.MustParseAddr
	rec := e2eRecord()
	want := wantedServers(rec)
	// lb1 has two routes of 4 slots, lb3 one of 2.
	if len(want) != 10 {
		t.Fatalf("%d wanted servers, want 10: %+v", len(want), want)
	}
	srv := func(be, name, addr string, port, op, admin int) runtimeapi.Server {
		return runtimeapi.Server{Backend: be, Name: name, Addr: addr, Port: port, OpState: op, AdminState: admin}
	}
	const maint = runtimeapi.AdminForcedMaint | runtimeapi.AdminConfigMaint
	have := []runtimeapi.Server{
		srv("be_lb1_80", "s1", "10.0.0.2", 80, 2, 0),        // right
		srv("be_lb1_80", "s2", "0.0.0.0", 0, 0, maint),      // needs addr and ready
		srv("be_lb1_80", "s3", "10.0.0.7", 80, 2, 0),        // a deregistered backend: maint
		srv("be_lb1_80", "s4", "0.0.0.0", 0, 0, maint),      // right
		srv("be_lb1_8443", "s1", "10.0.0.2", 80, 2, 4),      // wrong port (route port is 443), ready already
		srv("be_lb1_8443", "s2", "10.0.0.1", 443, 0, maint), // right address, in maint
		srv("be_lb1_8443", "s3", "0.0.0.0", 0, 0, maint),    // right
		srv("be_lb1_8443", "s4", "10.0.0.4", 443, 2, 0x08),  // drained by someone: maint
		srv("be_other", "s1", "10.0.0.1", 1, 2, 0),          // not ours: ignored
	}
	changes, missing := runtimeChanges(want, have)
	wantChanges := []change{
		{Backend: "be_lb1_80", Server: "s2", SetAddr: true, IP: ip("10.0.0.1"), Port: 80, State: "ready"},
		{Backend: "be_lb1_80", Server: "s3", State: "maint"},
		{Backend: "be_lb1_8443", Server: "s1", SetAddr: true, IP: ip("10.0.0.2"), Port: 443},
		{Backend: "be_lb1_8443", Server: "s2", State: "ready"},
	}
	if !slices.Equal(changes, wantChanges) {
		t.Errorf("changes:\n got %+v\nwant %+v", changes, wantChanges)
	}
	// be_lb1_8443/s4 is drained, not in maintenance; Maint covers both, so
	// it is left as it is: it gets no new connections either way.
	if !slices.Equal(missing, []string{"be_lb3_5432"}) {
		t.Errorf("missing %v, want [be_lb3_5432]", missing)
	}
	if strings.Contains(string(render(e2eInput(true), true)), "web-3.unresolved") {
		t.Error("an unresolved backend must not be rendered")
	}
}
