package main_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

// These tests drive the built provider binary through the plugin protocol,
// against a real HAProxy the provider starts, with real HTTP and TCP
// traffic from 127.0.0.1.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func httpRoute(port int) loadbalancer.Route {
	return loadbalancer.Route{LoadBalancerPort: port, LoadBalancerProtocol: loadbalancer.HTTP, Port: 80, Protocol: loadbalancer.HTTP}
}

func backendOf(b *backend) loadbalancer.Backend {
	return loadbalancer.Backend{ID: instance.ID(b.name), Address: b.addr}
}

func reloads(t *testing.T, m runtimeapi.Master) int {
	t.Helper()
	p, err := m.Processes(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return p.Reloads
}

// TestTraffic: requests are spread over the registered backends; backend
// changes happen through the runtime API, without a reload; a deregistered
// backend gets nothing more while requests keep succeeding.
func TestTraffic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	ctx := ctxT(t)
	port := haproxytest.FreePort(t)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	b1, b2, b3 := newBackend(t, "b1", nil), newBackend(t, "b2", nil), newBackend(t, "b3", nil)
	m := e.master()
	before := reloads(t, m)
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b1), backendOf(b2), backendOf(b3)}); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	hc := client()
	got, err := get(hc, url, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 requests over 3 backends: %v", got)
	for _, b := range []string{"b1", "b2", "b3"} {
		if got[b] < 20 {
			t.Errorf("backend %s answered %d of 100 requests; round robin should give each about 33: %v", b, got[b], got)
		}
	}

	if err := lb.DeregisterBackends(ctx, []instance.ID{"b2"}); err != nil {
		t.Fatal(err)
	}
	hits := b2.hits.Load()
	got, err = get(hc, url, 100)
	if err != nil {
		t.Fatalf("after deregistering b2: %v", err)
	}
	if b2.hits.Load() != hits || got["b2"] != 0 {
		t.Errorf("deregistered backend b2 still got requests: %v", got)
	}
	if got["b1"] < 30 || got["b3"] < 30 {
		t.Errorf("the remaining backends should share the requests: %v", got)
	}
	if n := reloads(t, m); n != before {
		t.Errorf("registering and deregistering backends reloaded HAProxy %d time(s); they must use the runtime API", n-before)
	}
	bs, err := lb.Backends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []loadbalancer.Backend{backendOf(b1), backendOf(b3)}; !slices.Equal(bs, want) {
		t.Errorf("backends %+v, want %+v", bs, want)
	}
	// A backend registered again comes back at once.
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b2)}); err != nil {
		t.Fatal(err)
	}
	if got, err = get(hc, url, 30); err != nil || got["b2"] == 0 {
		t.Errorf("re-registered b2: %v %v", got, err)
	}

	// A backend that died (nothing listens on its port), with no health
	// check to notice: every request it would get is retried on another
	// backend, without the one-second turn-around of a same-server retry.
	dead := newBackend(t, "dead", nil)
	dead.stop()
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(dead)}); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for range 40 {
		start := time.Now()
		if _, err := get(hc, url, 1); err != nil {
			t.Fatalf("with a dead backend registered: %v", err)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("40 requests with a dead backend among 4 all answered; slowest %s", slowest.Round(time.Millisecond))
	if slowest > 900*time.Millisecond {
		t.Errorf("a request took %s: retries must go to another server at once", slowest)
	}
}

// TestRepublish: a route unpublished and at once published again on the
// same port with another protocol (what an ingress does when a route
// changes) takes the port over from the old worker.
func TestRepublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	ctx := ctxT(t)
	port := haproxytest.FreePort(t)
	b1 := newBackend(t, "b1", nil)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b1)}); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if _, err := get(client(), url, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := lb.Unpublish(ctx, port); err != nil {
			t.Fatal(err)
		}
		route := loadbalancer.Route{LoadBalancerPort: port, LoadBalancerProtocol: loadbalancer.TCP, Port: 80, Protocol: loadbalancer.TCP}
		if i%2 == 1 {
			route = httpRoute(port)
		}
		if err := lb.Publish(ctx, route); err != nil {
			t.Fatalf("republish %d: %v", i, err)
		}
		if got, err := get(client(), url, 3); err != nil || got["b1"] != 3 {
			t.Fatalf("after republish %d: %v %v", i, got, err)
		}
	}
}

// TestHitless: an HTTP response streaming for seconds and a TCP connection
// kept open both survive backend registrations, a route publish (reload),
// slots growing (reload) and the deregistration of their own backend.
func TestHitless(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "INFRAKIT_HAPROXY_SLOTS=2")
	c := e.start(t)
	lb := c.LoadBalancer("web")
	ctx := ctxT(t)
	m := e.master()

	// A backend that streams one line every 20ms on /stream.
	const lines = 150
	stream := newBackend(t, "stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range lines {
			if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	})
	// A TCP echo backend.
	echo := newEcho(t)

	httpPort, tcpPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	if err := lb.Publish(ctx, httpRoute(httpPort)); err != nil {
		t.Fatal(err)
	}
	tcp := c.LoadBalancer("echo")
	if err := tcp.Publish(ctx, loadbalancer.Route{LoadBalancerPort: tcpPort, LoadBalancerProtocol: loadbalancer.TCP, Port: 7, Protocol: loadbalancer.TCP}); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(stream)}); err != nil {
		t.Fatal(err)
	}
	if err := tcp.RegisterBackends(ctx, []loadbalancer.Backend{{ID: "echo", Address: echo}}); err != nil {
		t.Fatal(err)
	}

	// Open both long-lived connections.
	hc := client()
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/stream", httpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lr := lineReader{bufio.NewReader(resp.Body)}
	if l, err := lr.next(); err != nil || l != "line 0" {
		t.Fatalf("first line %q: %v", l, err)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echoOnce := func(msg string) error {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintln(conn, msg); err != nil {
			return err
		}
		got, err := bufio.NewReader(io.LimitReader(conn, int64(len(msg)+1))).ReadString('\n')
		if err != nil {
			return err
		}
		if got != msg+"\n" {
			return fmt.Errorf("echo %q, want %q", got, msg)
		}
		return nil
	}
	if err := echoOnce("before"); err != nil {
		t.Fatal(err)
	}
	before := reloads(t, m)

	// The changes, while both connections are open.
	extra := []*backend{newBackend(t, "x1", nil), newBackend(t, "x2", nil), newBackend(t, "x3", nil)}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(extra[0])}); err != nil { // a free slot: runtime API
		t.Fatal(err)
	}
	if err := lb.Publish(ctx, httpRoute(haproxytest.FreePort(t))); err != nil { // a new route: reload
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(extra[1]), backendOf(extra[2])}); err != nil { // 4 > 2 slots: reload
		t.Fatal(err)
	}
	if err := lb.DeregisterBackends(ctx, []instance.ID{"stream"}); err != nil { // its own backend: maintenance
		t.Fatal(err)
	}
	if err := tcp.Publish(ctx, loadbalancer.Route{LoadBalancerPort: tcpPort, LoadBalancerProtocol: loadbalancer.TCP, Port: 7, Protocol: loadbalancer.TCP}); err != nil {
		t.Fatal(err) // republished as it is: nothing to do
	}
	if n := reloads(t, m); n-before != 2 {
		t.Errorf("%d reloads during the changes, want 2 (the route, the slots)", n-before)
	}
	// The connections are the old workers' now: they stay until their
	// connections end.
	if p, err := m.Processes(ctx); err != nil || len(p.Old) == 0 {
		t.Errorf("no old worker finishing the open connections: %+v %v", p, err)
	}
	if err := echoOnce("after the reloads"); err != nil {
		t.Errorf("the TCP connection did not survive: %v", err)
	}
	n := 1
	for {
		l, err := lr.next()
		if l != "" {
			if want := fmt.Sprintf("line %d", n); l != want {
				t.Fatalf("got %q, want %q", l, want)
			}
			n++
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream broke after %d lines: %v", n, err)
			}
			break
		}
	}
	if n != lines {
		t.Fatalf("the stream ended after %d of %d lines", n, lines)
	}
	// New requests go to the new backends only.
	got, err := get(hc, fmt.Sprintf("http://127.0.0.1:%d/", httpPort), 30)
	if err != nil {
		t.Fatal(err)
	}
	if got["stream"] != 0 || got["x1"] == 0 || got["x2"] == 0 || got["x3"] == 0 {
		t.Errorf("after the changes: %v", got)
	}
}

// newEcho serves a TCP echo on 127.0.0.1:0 and returns its address.
func newEcho(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestAdopt: HAProxy outlives its provider; a restarted provider adopts it
// (same master, no restart, no reload) and answers from its record.
func TestAdopt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	first := e.start(t)
	port := haproxytest.FreePort(t)
	route := httpRoute(port)
	b1, b2 := newBackend(t, "b1", nil), newBackend(t, "b2", nil)
	if err := first.LoadBalancer("web").Publish(ctx, route); err != nil {
		t.Fatal(err)
	}
	if err := first.LoadBalancer("web").RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b1)}); err != nil {
		t.Fatal(err)
	}
	m := e.master()
	p0, err := m.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first.Kill()

	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if got, err := get(client(), url, 10); err != nil || got["b1"] != 10 {
		t.Fatalf("with the provider gone, HAProxy must keep serving: %v %v", got, err)
	}
	second := e.start(t)
	lb := second.LoadBalancer("web")
	routes, err := lb.Routes(ctx)
	if err != nil || !slices.Equal(routes, []loadbalancer.Route{route}) {
		t.Fatalf("routes after restart: %+v %v", routes, err)
	}
	bs, err := lb.Backends(ctx)
	if err != nil || !slices.Equal(bs, []loadbalancer.Backend{backendOf(b1)}) {
		t.Fatalf("backends after restart: %+v %v", bs, err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b2)}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(client(), url, 20); err != nil || got["b2"] == 0 {
		t.Fatalf("a backend registered through the adopting provider: %v %v", got, err)
	}
	p1, err := m.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.MasterPID != p0.MasterPID || p1.Reloads != p0.Reloads || !slices.Equal(p1.Workers, p0.Workers) {
		t.Fatalf("the restarted provider did not adopt HAProxy as it was: before %+v, after %+v", p0, p1)
	}
}

// TestRestartsDeadHAProxy: when the HAProxy the provider ran is gone, the
// next call starts a new one from the record, backends included.
func TestRestartsDeadHAProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	port := haproxytest.FreePort(t)
	b1 := newBackend(t, "b1", nil)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b1)}); err != nil {
		t.Fatal(err)
	}
	haproxytest.StopDir(t, e.state)
	if _, err := lb.Backends(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := get(client(), fmt.Sprintf("http://127.0.0.1:%d/", port), 5); err != nil || got["b1"] != 5 {
		t.Fatalf("after the restart: %v %v", got, err)
	}
}

// TestHealthCheck: a backend that fails its HTTP check, and one that stops,
// are marked down and get no requests; requests keep succeeding.
func TestHealthCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "INFRAKIT_HAPROXY_CHECK_PATH=/healthz")
	ctx := ctxT(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	port := haproxytest.FreePort(t)
	healthy := func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }
	sick := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "sick", http.StatusInternalServerError) }
	good, bad, dying := newBackend(t, "good", healthy), newBackend(t, "bad", sick), newBackend(t, "dying", healthy)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	if err := lb.ConfigureHealthCheck(ctx, loadbalancer.HealthCheck{BackendPort: 80, Healthy: 1, Unhealthy: 1, Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(good), backendOf(bad), backendOf(dying)}); err != nil {
		t.Fatal(err)
	}
	m := e.master()
	be := fmt.Sprintf("be_web_%d", port)
	// Slots follow backend IDs: bad s1, dying s2, good s3.
	state := func(srv string) (runtimeapi.Server, error) {
		ss, err := m.ServersState(ctx, be)
		if err != nil {
			return runtimeapi.Server{}, err
		}
		for _, s := range ss {
			if s.Name == srv {
				return s, nil
			}
		}
		return runtimeapi.Server{}, fmt.Errorf("no server %s in %+v", srv, ss)
	}
	isUp := func(srv string, want bool) func() (bool, error) {
		return func() (bool, error) {
			s, err := state(srv)
			return err == nil && s.Up() == want, err
		}
	}
	waitFor(t, 5*time.Second, "the backend failing its check marked down", isUp("s1", false))
	waitFor(t, 5*time.Second, "the healthy backends up", func() (bool, error) {
		a, err := isUp("s2", true)()
		b, err2 := isUp("s3", true)()
		return a && b, errors.Join(err, err2)
	})
	hc := client()
	got, err := get(hc, fmt.Sprintf("http://127.0.0.1:%d/", port), 40)
	if err != nil || got["bad"] != 0 || got["good"] == 0 || got["dying"] == 0 {
		t.Fatalf("with bad down: %v %v", got, err)
	}
	dying.stop()
	start := time.Now()
	waitFor(t, 5*time.Second, "the stopped backend marked down", isUp("s2", false))
	t.Logf("a stopped backend was marked down after %s (check interval 100ms, fall 1)", time.Since(start).Round(time.Millisecond))
	got, err = get(hc, fmt.Sprintf("http://127.0.0.1:%d/", port), 40)
	if err != nil || got["good"] != 40 {
		t.Fatalf("with only good up: %v %v", got, err)
	}
}

// TestTLS: a certificate name with a PEM file in the cert dir terminates
// TLS; one without passes TLS through to the backend. Routes returns both
// unchanged.
func TestTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	certDir := filepath.Join(e.state, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	pemFile, pool := selfSigned(t)
	if err := os.WriteFile(filepath.Join(certDir, "site.pem"), pemFile, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c := e.start(t)
	lb := c.LoadBalancer("tls")
	plain := newBackend(t, "plain", nil)
	tlsBackend := newTLSBackend(t, "tls-backend")

	terminated := loadbalancer.Route{LoadBalancerPort: haproxytest.FreePort(t), LoadBalancerProtocol: loadbalancer.HTTPS, Port: 80, Protocol: loadbalancer.HTTP, Certificate: "site"}
	if err := lb.Publish(ctx, terminated); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(plain)}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConfig(pool)}}
	if got, err := get(hc, fmt.Sprintf("https://127.0.0.1:%d/", terminated.LoadBalancerPort), 3); err != nil || got["plain"] != 3 {
		t.Fatalf("TLS terminated by HAProxy with site.pem: %v %v", got, err)
	}

	// Another load balancer passes TLS through to an HTTPS backend.
	pass := c.LoadBalancer("passthrough")
	through := loadbalancer.Route{LoadBalancerPort: haproxytest.FreePort(t), LoadBalancerProtocol: loadbalancer.HTTPS, Port: 443, Protocol: loadbalancer.HTTPS, Certificate: "external-cer-id1"}
	if err := pass.Publish(ctx, through); err != nil {
		t.Fatal(err)
	}
	if err := pass.RegisterBackends(ctx, []loadbalancer.Backend{{ID: "tls-backend", Address: tlsBackend.addr}}); err != nil {
		t.Fatal(err)
	}
	thc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConfig(tlsBackend.pool)}}
	if got, err := get(thc, fmt.Sprintf("https://127.0.0.1:%d/", through.LoadBalancerPort), 3); err != nil || got["tls-backend"] != 3 {
		t.Fatalf("TLS passed through to the backend: %v %v", got, err)
	}
	routes, err := pass.Routes(ctx)
	if err != nil || !slices.Equal(routes, []loadbalancer.Route{through}) {
		t.Fatalf("routes %+v %v, want the certificate name kept", routes, err)
	}
}

// TestPortInUse: a port another program holds is refused at lb_port, and
// nothing changes.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	err = lb.Publish(ctx, httpRoute(taken))
	var ds provider.Diagnostics
	if !errors.As(err, &ds) || !slices.Equal(ds[0].Path, []string{"lb_port"}) {
		t.Fatalf("want a diagnostic at lb_port, got %v", err)
	}
	t.Logf("refused: %v", err)
	// Two load balancers of one HAProxy cannot share a port either.
	port := haproxytest.FreePort(t)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	err = c.LoadBalancer("other").Publish(ctx, httpRoute(port))
	if !errors.As(err, &ds) || !strings.Contains(err.Error(), `load balancer "web"`) {
		t.Fatalf("want the port's owner named, got %v", err)
	}
	routes, err := lb.Routes(ctx)
	if err != nil || len(routes) != 1 || routes[0].LoadBalancerPort != port {
		t.Fatalf("routes %+v %v", routes, err)
	}
}

// TestTwoProviders: two provider processes sharing a state directory (the
// CLI's and watch's) register concurrently; every backend is kept, and
// they share one HAProxy.
func TestTwoProviders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "INFRAKIT_HAPROXY_SLOTS=8")
	ctx := ctxT(t)
	a, b := e.start(t), e.start(t)
	port := haproxytest.FreePort(t)
	if err := a.LoadBalancer("web").Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 12 {
		for j, c := range []interface {
			LoadBalancer(string) loadbalancer.L4
		}{a, b} {
			wg.Go(func() {
				id := fmt.Sprintf("p%d-%02d", j, i)
				errs <- c.LoadBalancer("web").RegisterBackends(ctx, []loadbalancer.Backend{{ID: instance.ID(id), Address: fmt.Sprintf("192.0.2.%d:8080", 10+j*12+i)}})
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface {
		LoadBalancer(string) loadbalancer.L4
	}{a, b} {
		bs, err := c.LoadBalancer("web").Backends(ctx)
		if err != nil || len(bs) != 24 {
			t.Fatalf("%d backends (%v), want 24", len(bs), err)
		}
	}
	ss, err := e.master().ServersState(ctx, fmt.Sprintf("be_web_%d", port))
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, s := range ss {
		if !s.Maint() {
			ready++
		}
	}
	if ready != 24 || len(ss) != 32 {
		t.Fatalf("%d of %d slots ready, want 24 of 32 (8 doubled twice)", ready, len(ss))
	}
}

// TestExternal: the provider manages an HAProxy an operator runs (master
// -worker, master socket) through a file of its own among the operator's
// -f files; it reloads that HAProxy and never starts or stops one.
func TestExternal(t *testing.T) {
	t.Parallel()
	bin := haproxytest.Require(t)
	dir := t.TempDir()
	base, ours := filepath.Join(dir, "base.cfg"), filepath.Join(dir, "infrakit.cfg")
	sock, pidFile := filepath.Join(dir, "master.sock"), filepath.Join(dir, "haproxy.pid")
	opPort := haproxytest.FreePort(t)
	op := newBackend(t, "operator", nil)
	baseCfg := fmt.Sprintf(`global
    stats timeout 30s
defaults
    mode http
    timeout connect 5s
    timeout client 1m
    timeout server 1m
frontend operator
    bind 127.0.0.1:%d
    default_backend operator
backend operator
    server op %s
`, opPort, op.addr)
	if err := os.WriteFile(base, []byte(baseCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ours, []byte("# infrakit writes this file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { haproxytest.Stop(t, pidFile, base) })
	if out, err := exec.Command(bin, "-W", "-D", "-S", sock, "-p", pidFile, "-f", base, "-f", ours).CombinedOutput(); err != nil {
		t.Fatalf("start the operator's haproxy: %v\n%s", err, out)
	}
	m := runtimeapi.Master{Socket: sock}
	ctx := ctxT(t)
	waitFor(t, 5*time.Second, "the operator's haproxy serving", func() (bool, error) {
		p, err := m.Processes(ctx)
		return err == nil && len(p.Workers) > 0, err
	})
	p0, _ := m.Processes(ctx)

	e := &env{dir: dir, state: filepath.Join(dir, "state")}
	e.vars = []string{"INFRAKIT_HAPROXY_DIR=" + e.state, "INFRAKIT_HAPROXY_CONFIG=" + ours, "INFRAKIT_HAPROXY_MASTER_SOCKET=" + sock}
	c := e.start(t)
	lb := c.LoadBalancer("web")
	port := haproxytest.FreePort(t)
	b1 := newBackend(t, "b1", nil)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(b1)}); err != nil {
		t.Fatal(err)
	}
	hc := client()
	if got, err := get(hc, fmt.Sprintf("http://127.0.0.1:%d/", port), 5); err != nil || got["b1"] != 5 {
		t.Fatalf("through infrakit's route: %v %v", got, err)
	}
	if got, err := get(hc, fmt.Sprintf("http://127.0.0.1:%d/", opPort), 5); err != nil || got["operator"] != 5 {
		t.Fatalf("the operator's own frontend: %v %v", got, err)
	}
	p1, err := m.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.MasterPID != p0.MasterPID || p1.Reloads != p0.Reloads+1 {
		t.Fatalf("want the operator's master reloaded once, before %+v after %+v", p0, p1)
	}
	if _, err := os.Stat(filepath.Join(e.state, "haproxy.pid")); err == nil {
		t.Fatal("the provider started an HAProxy of its own in external mode")
	}
}

// crashingBackend accepts connections, reads each request and resets the
// connection without an answer: a server killed with requests in flight.
type crashingBackend struct {
	addr string
	done chan struct{}
	mu   sync.Mutex
	took map[string]int // requests taken, by method
}

func newCrashingBackend(t *testing.T) *crashingBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &crashingBackend{addr: l.Addr().String(), done: make(chan struct{}), took: map[string]int{}}
	go func() {
		defer close(b.done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
				b.mu.Lock()
				b.took[req.Method]++
				b.mu.Unlock()
			}
			// Reset rather than close, as the kernel does for a killed
			// process's connections with data unread.
			_ = conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-b.done
	})
	return b
}

func (b *crashingBackend) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.took)
}

// TestRetriesInFlight: a backend that takes requests and dies without
// answering them (SIGKILL of a process while HAProxy waits for it) costs
// idempotent requests nothing: HAProxy retries them on another server. A
// POST it took is not sent again: it answers 502, once.
func TestRetriesInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.start(t)
	lb := c.LoadBalancer("web")
	ctx := ctxT(t)
	port := haproxytest.FreePort(t)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	good := newBackend(t, "good", nil)
	crash := newCrashingBackend(t)
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{backendOf(good), {ID: "crash", Address: crash.addr}}); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	got, err := get(client(), url, 40)
	if err != nil {
		t.Fatalf("GET with a backend that dies on every request: %v", err)
	}
	if got["good"] != 40 || crash.counts()["GET"] == 0 {
		t.Fatalf("40 GETs: answers %v, the crashing backend took %v; want every GET answered by good after some were taken by crash", got, crash.counts())
	}
	t.Logf("40 GETs all answered by good; the crashing backend took %d of them first", crash.counts()["GET"])

	// POSTs: those that reach the crashing backend fail, and only once.
	failed := 0
	for range 10 {
		resp, err := client().Post(url, "text/plain", strings.NewReader("once"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
		}
	}
	if posts := crash.counts()["POST"]; posts == 0 || posts != failed {
		t.Errorf("10 POSTs: %d failed and the crashing backend took %d; want each it took to fail, none retried", failed, posts)
	}
}
