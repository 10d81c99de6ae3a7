package query

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/prometheus/promtest"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// newSource is a Source on the given block, closed at the test's end.
func newSource(t *testing.T, block string) *Source {
	t.Helper()
	var s Source
	if err := s.Configure(t.Context(), json.RawMessage(block)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &s
}

func query(t *testing.T, s *Source, q string, at time.Time) (metrics.Sample, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return s.Query(ctx, q, at)
}

// TestQueries asks a real Prometheus, which scrapes two exporters of one
// gauge, the queries a check may hold.
func TestQueries(t *testing.T) {
	file := filepath.Join(t.TempDir(), "targets.json")
	prom := promtest.Start(t, promtest.Config{Files: []string{file}})
	a := promtest.Exporter(t, "# TYPE web_load gauge\nweb_load 2\n")
	b := promtest.Exporter(t, "# TYPE web_load gauge\nweb_load 5\n")
	promtest.WriteFileSD(t, file, promtest.TargetGroup{Targets: []string{a, b}})
	prom.WaitValue(t, "count(web_load)", "both exporters scraped", func(v float64) bool { return v == 2 })
	s := newSource(t, `{"address": "`+prom.URL+`", "timeout": "20s"}`)

	for _, c := range []struct {
		query string
		value float64
	}{
		{"vector(3)", 3},
		{"2.5", 2.5},
		{"sum(web_load)", 7},
		{"max(web_load)", 5},
		{`sum(web_load{instance="` + a + `"})`, 2},
	} {
		got, err := query(t, s, c.query, time.Time{})
		if err != nil || got.Empty || got.Value != c.value {
			t.Errorf("%s: got %+v, %v; want %v", c.query, got, err, c.value)
		}
	}

	t.Run("Empty", func(t *testing.T) {
		for _, q := range []string{`web_load{instance="nowhere:1"}`, `no_such_metric`, `vector(0)/0`} {
			got, err := query(t, s, q, time.Time{})
			if err != nil || !got.Empty || got.Value != 0 {
				t.Errorf("%s: got %+v, %v; want no data", q, got, err)
			}
		}
	})
	t.Run("SeveralSeries", func(t *testing.T) {
		_, err := query(t, s, "web_load", time.Time{})
		if err == nil || !strings.Contains(err.Error(), "matched 2 series") || !strings.Contains(err.Error(), "sum(") {
			t.Fatalf("got %v, want an error saying it matched 2 series and to aggregate", err)
		}
		var ds provider.Diagnostics
		if errors.As(err, &ds) {
			t.Fatalf("several series is a fact of the data, not a diagnostic of the query text: %v", err)
		}
		t.Log(err)
	})
	t.Run("SyntaxError", func(t *testing.T) {
		for _, q := range []string{`sum(rate(web_requests_total[30s])`, `web_load{`, `rate(web_load)`} {
			_, err := query(t, s, q, time.Time{})
			var ds provider.Diagnostics
			if !errors.As(err, &ds) || len(ds) != 1 || !slices.Equal(ds[0].Path, []string{"query"}) {
				t.Fatalf("%s: got %T %v, want a diagnostic at query", q, err, err)
			}
			t.Log(err)
		}
	})
	t.Run("RangeVector", func(t *testing.T) {
		_, err := query(t, s, "web_load[1m]", time.Time{})
		if err == nil || !strings.Contains(err.Error(), "range vector") {
			t.Fatalf("got %v, want a range vector error", err)
		}
	})
	t.Run("At", func(t *testing.T) {
		at := time.Now().Add(-time.Hour).Truncate(time.Second)
		got, err := query(t, s, "time()", at)
		if err != nil || got.Value != float64(at.Unix()) || !got.At.Equal(at) {
			t.Fatalf("time() at %v: got %+v, %v", at, got, err)
		}
	})
}

// TestUnreachable: no server at the address is an error naming it, not a
// diagnostic and not no data.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	s := newSource(t, `{"address": "`+addr+`"}`)
	_, err = query(t, s, "vector(1)", time.Time{})
	var ds provider.Diagnostics
	if err == nil || errors.As(err, &ds) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %v, want an error naming %s and the refused connection", err, addr)
	}
	t.Log(err)
}

// TestNotPrometheus: a server that is no Prometheus (a 404 for the API)
// is an error that says so.
func TestNotPrometheus(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	s := newSource(t, `{"address": "`+srv.URL+`"}`)
	_, err := query(t, s, "vector(1)", time.Time{})
	if err == nil || !strings.Contains(err.Error(), "is it a Prometheus server") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// TestTimeout: a server that never answers is given up on after the
// block's timeout, and the error says which.
func TestTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newSource(t, `{"address": "http://`+l.Addr().String()+`", "timeout": "200ms"}`)
	_, err = query(t, s, "vector(1)", time.Time{})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// TestCallerCancels: a query whose context ends is abandoned with the
// context's error.
func TestCallerCancels(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newSource(t, `{"address": "http://`+l.Addr().String()+`"}`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Query(ctx, "vector(1)", time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestTLS: an https Prometheus is queried with the CA of ca_file, and
// refused without it.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	tlsFiles, caFile := promtest.SelfSigned(t, dir)
	prom := promtest.Start(t, promtest.Config{TLS: tlsFiles})
	if !strings.HasPrefix(prom.URL, "https://") {
		t.Fatalf("server at %s", prom.URL)
	}
	s := newSource(t, `{"address": "`+prom.URL+`", "ca_file": "`+caFile+`"}`)
	if got, err := query(t, s, "vector(4)", time.Time{}); err != nil || got.Value != 4 {
		t.Fatalf("got %+v, %v", got, err)
	}
	plain := newSource(t, `{"address": "`+prom.URL+`"}`)
	_, err := query(t, plain, "vector(4)", time.Time{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without ca_file: got %v, want a certificate error", err)
	}
	t.Log(err)
}

// TestBearerToken: a Prometheus behind a proxy that wants a token (how
// one protects it) is queried with the token of bearer_token_file, read
// again at each query so a rotated token serves at once.
func TestBearerToken(t *testing.T) {
	prom := promtest.Start(t, promtest.Config{})
	target, err := url.Parse(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	var token atomic.Pointer[string] // what the proxy wants
	first, second := "first", "second"
	token.Store(&first)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = tr
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+*token.Load() {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer guard.Close()

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSource(t, `{"address": "`+guard.URL+`", "bearer_token_file": "`+file+`"}`)
	if got, err := query(t, s, "vector(5)", time.Time{}); err != nil || got.Value != 5 {
		t.Fatalf("got %+v, %v", got, err)
	}
	token.Store(&second) // the proxy wants the rotated token
	if _, err := query(t, s, "vector(5)", time.Time{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("with the old token: got %v, want the proxy's 401", err)
	}
	if err := os.WriteFile(file, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := query(t, s, "vector(6)", time.Time{}); err != nil || got.Value != 6 {
		t.Fatalf("after rotation: got %+v, %v", got, err)
	}
}
