package main_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/providertest"
)

var builder *providertest.Builder

// testMain builds the provider once for every test and removes it after.
type testMain struct{ m *testing.M }

func (r testMain) Run() int {
	defer builder.Close()
	return r.m.Run()
}

func TestMain(m *testing.M) {
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(testMain{m})
}

// env is what a test's provider is configured with.
type env struct {
	dir   string // the provider's working directory
	state string // INFRAKIT_HAPROXY_DIR
	vars  []string
}

// newEnv makes a state directory and registers, first, the cleanup that
// stops the HAProxy the provider will start there, so it runs after the
// provider is killed.
func newEnv(t *testing.T, vars ...string) *env {
	t.Helper()
	haproxytest.Require(t)
	dir := t.TempDir()
	e := &env{dir: dir, state: filepath.Join(dir, "hx")}
	e.vars = append([]string{"INFRAKIT_HAPROXY_DIR=" + e.state}, vars...)
	t.Cleanup(func() { haproxytest.StopDir(t, e.state) })
	return e
}

func (e *env) master() runtimeapi.Master {
	return runtimeapi.Master{Socket: filepath.Join(e.state, "master.sock")}
}

// start launches the provider binary as a host does.
func (e *env) start(t *testing.T) *plugin.Client {
	t.Helper()
	logs := providertest.LogWriter(t) // registered first, so it runs after Kill
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: "haproxy", Path: builder.Build(t, "."), Env: e.vars, Dir: e.dir,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// backend is a tiny HTTP server answering its name; it counts requests.
type backend struct {
	name string
	addr string
	hits atomic.Int64
	srv  *http.Server
	done chan struct{}
}

// newBackend serves on 127.0.0.1:0. handler, when given, serves paths other
// than "/"; "/" always answers the name.
func newBackend(t *testing.T, name string, handler http.HandlerFunc) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, addr: l.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" && handler != nil {
			handler(w, r)
			return
		}
		b.hits.Add(1)
		fmt.Fprint(w, name)
	})
	b.srv = &http.Server{Handler: mux}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(l)
	}()
	t.Cleanup(b.stop)
	return b
}

// stop closes the listener and every connection; it may be called twice.
func (b *backend) stop() {
	_ = b.srv.Close()
	<-b.done
}

// client sends requests on fresh connections, so HAProxy balances each.
func client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// get sends n requests to url and counts answers by body; any failure is
// returned.
func get(c *http.Client, url string, n int) (map[string]int, error) {
	got := map[string]int{}
	for i := range n {
		resp, err := c.Get(url)
		if err != nil {
			return got, fmt.Errorf("request %d: %w", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return got, fmt.Errorf("request %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			return got, fmt.Errorf("request %d: %s: %s", i, resp.Status, body)
		}
		got[string(body)]++
	}
	return got, nil
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
}

// lineReader reads a streaming response line by line.
type lineReader struct {
	r *bufio.Reader
}

func (l lineReader) next() (string, error) {
	s, err := l.r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return s, err
	}
	return strings.TrimSuffix(s, "\n"), err
}
