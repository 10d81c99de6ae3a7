package promtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// TargetGroup is one entry of a file_sd file.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// WriteFileSD replaces a file_sd file with groups, atomically (Prometheus
// may read it at any moment).
func WriteFileSD(tb testing.TB, file string, groups ...TargetGroup) {
	tb.Helper()
	if groups == nil {
		groups = []TargetGroup{}
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := atomicfile.WriteFile(file, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Exporter serves text (metrics in Prometheus's text format) at /metrics
// on a loopback port until the test ends, and returns its host:port.
func Exporter(tb testing.TB, text string) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(text))
	}))
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
