package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/plugins/docker/dockertest"
	"github.com/infrakit/infrakit/plugins/docker/engine"
)

// The package's tests against the real Engine share one client, one image
// and one run label; every container they make carries the label, and
// TestMain removes whatever is left with it.
var (
	client     *engine.Client
	image      string
	skipReason string
	runID      = "container-test-" + randomHex(6)
)

// TagRun is the tag every test container carries (a container label).
const TagRun = "dockertest.run"

func TestMain(m *testing.M) {
	code := func() int {
		c, err := dockertest.Client()
		if err != nil {
			skipReason = err.Error()
			return m.Run()
		}
		defer c.Close()
		client = c
		tag := dockertest.Tag("container")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := dockertest.BuildWebImage(ctx, c, tag); err != nil {
			fmt.Fprintln(os.Stderr, "build the test image:", err)
			return 1
		}
		image = tag
		code := m.Run()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if n, err := dockertest.RemoveLabelled(cctx, c, TagRun+"="+runID); err != nil || n > 0 {
			fmt.Fprintf(os.Stderr, "removed %d containers the tests left behind (%v)\n", n, err)
			if code == 0 {
				code = 1 // every test cleans up after itself
			}
		}
		if err := c.ImageRemove(cctx, tag, true); err != nil {
			fmt.Fprintln(os.Stderr, "remove the test image:", err)
		}
		return code
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func needDocker(t *testing.T) {
	t.Helper()
	if client == nil {
		t.Skip("skipping: " + skipReason)
	}
}

// testTags are unique tags for one test's containers.
func testTags(t *testing.T, extra ...string) map[string]string {
	tags := map[string]string{TagRun: runID, "dockertest.test": t.Name() + "-" + randomHex(3)}
	for i := 0; i+1 < len(extra); i += 2 {
		tags[extra[i]] = extra[i+1]
	}
	return tags
}

// webProps are properties of a container serving the web image on 8080.
func webProps() []byte {
	return fmt.Appendf(nil, `{"image": %q, "env": {"PORT": "8080"}, "ports": ["8080"], "memory": "32m", "stop_timeout": "2s"}`, image)
}

// newProvider opens a provider on a fresh records directory, reaching the
// Engine through host ("" for the default socket), and closes it when the
// test ends, after the containers' cleanups (registered later, run earlier).
func newProvider(t *testing.T, host string) *Provider {
	t.Helper()
	p, err := New(Config{Host: host, Dir: t.TempDir(), CallTimeout: 20 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "docker", Level: hclog.Debug, Output: tWriter{t}})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// removeOnCleanup removes the test's containers (by its tags) when it ends.
func removeOnCleanup(t *testing.T, tags map[string]string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := dockertest.RemoveLabelled(ctx, client, "dockertest.test="+tags["dockertest.test"]); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// proxy stands between a provider and the Engine on a unix socket of its
// own: it counts the calls made (by method and unversioned path), can
// refuse event streams, and can cut every open connection, which is how
// the tests see "one list call" and make the event stream break.
type proxy struct {
	sock string
	srv  *http.Server

	mu        sync.Mutex
	calls     map[string]int
	conns     map[net.Conn]bool
	refuseEvs bool
}

var versionPrefix = regexp.MustCompile(`^/v[0-9.]+`)

func newProxy(t *testing.T) *proxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "dkp") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	px := &proxy{sock: filepath.Join(dir, "engine.sock"), calls: map[string]int{}, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("unix", px.sock)
	if err != nil {
		t.Fatal(err)
	}
	// The upstream is the Engine the tests use ($DOCKER_HOST or the socket).
	network, addr := "unix", strings.TrimPrefix(client.Host(), "unix://")
	if a, ok := strings.CutPrefix(client.Host(), "tcp://"); ok {
		network, addr = "tcp", a
	}
	var d net.Dialer
	upstream := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport:     upstream,
		FlushInterval: -1,                         // event streams pass through as they come
		ErrorLog:      log.New(io.Discard, "", 0), // cut streams are the point, not news
	}
	px.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path := versionPrefix.ReplaceAllString(r.URL.Path, "")
			px.mu.Lock()
			px.calls[r.Method+" "+path]++
			refuse := px.refuseEvs && path == "/events"
			px.mu.Unlock()
			if refuse {
				http.Error(w, `{"message": "events refused by the test proxy"}`, http.StatusServiceUnavailable)
				return
			}
			rp.ServeHTTP(w, r)
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			px.mu.Lock()
			defer px.mu.Unlock()
			switch s {
			case http.StateNew:
				px.conns[c] = true
			case http.StateClosed, http.StateHijacked:
				delete(px.conns, c)
			}
		},
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = px.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		px.srv.Close()
		<-served
		upstream.CloseIdleConnections()
	})
	return px
}

func (px *proxy) host() string { return "unix://" + px.sock }

// take returns the calls counted since the last take and resets them.
func (px *proxy) take() map[string]int {
	px.mu.Lock()
	defer px.mu.Unlock()
	c := px.calls
	px.calls = map[string]int{}
	return c
}

// cut closes every open client connection: streams break mid-way.
func (px *proxy) cut() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for c := range px.conns {
		c.Close()
	}
}

func (px *proxy) refuseEvents(on bool) {
	px.mu.Lock()
	px.refuseEvs = on
	px.mu.Unlock()
}
