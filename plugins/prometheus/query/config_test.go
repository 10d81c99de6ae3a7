package query

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  string
		want Config
	}{
		{"empty block", `{}`, Config{Timeout: DefaultTimeout}},
		{"nothing", ``, Config{Timeout: DefaultTimeout}},
		{"null", `null`, Config{Timeout: DefaultTimeout}},
		{"address", `{"address": "http://127.0.0.1:9090"}`, Config{Address: "http://127.0.0.1:9090", Timeout: DefaultTimeout}},
		{"null attributes are absent", `{"address": null, "timeout": null}`, Config{Timeout: DefaultTimeout}},
		{"path prefix", `{"address": "https://prom.example.com/prometheus/"}`, Config{Address: "https://prom.example.com/prometheus/", Timeout: DefaultTimeout}},
		{"all", `{"address": "https://127.0.0.1:9090", "timeout": "500ms", "bearer_token_file": "token", "ca_file": "ca.pem"}`,
			Config{Address: "https://127.0.0.1:9090", Timeout: 500 * time.Millisecond, BearerTokenFile: "token", CAFile: "ca.pem"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseConfig(json.RawMessage(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseConfigRefuses(t *testing.T) {
	for _, c := range []struct {
		raw   string
		paths []string // of the error diagnostics, in order
	}{
		{`[]`, []string{""}},
		{`{"adress": "http://x:9090"}`, []string{"adress"}},
		{`{"address": 9090}`, []string{"address"}},
		{`{"address": ""}`, []string{"address"}},
		{`{"address": "127.0.0.1:9090"}`, []string{"address"}},
		{`{"address": "ftp://127.0.0.1:9090"}`, []string{"address"}},
		{`{"address": "http://"}`, []string{"address"}},
		{`{"address": "http://127.0.0.1:port"}`, []string{"address"}},
		{`{"address": "http://u:p@127.0.0.1:9090"}`, []string{"address"}},
		{`{"address": "http://127.0.0.1:9090/?x=1"}`, []string{"address"}},
		{`{"address": "http://127.0.0.1:9090", "timeout": "soon"}`, []string{"timeout"}},
		{`{"address": "http://127.0.0.1:9090", "timeout": "0s"}`, []string{"timeout"}},
		{`{"address": "http://127.0.0.1:9090", "timeout": "-1s"}`, []string{"timeout"}},
		{`{"address": "http://127.0.0.1:9090", "timeout": 10}`, []string{"timeout"}},
		{`{"address": "http://127.0.0.1:9090", "bearer_token_file": ""}`, []string{"bearer_token_file"}},
		{`{"address": "http://127.0.0.1:9090", "ca_file": "ca.pem"}`, []string{"ca_file"}},
		{`{"address": "x", "timeout": "x", "tls": true}`, []string{"tls", "address", "timeout"}},
	} {
		t.Run(c.raw, func(t *testing.T) {
			_, err := ParseConfig(json.RawMessage(c.raw))
			if got := paths(t, err); !slices.Equal(got, c.paths) {
				t.Fatalf("diagnostics at %q, want %q: %v", got, c.paths, err)
			}
			t.Log(err)
		})
	}
}

// paths are the paths of err's error diagnostics, "" for the whole object.
func paths(t *testing.T, err error) []string {
	t.Helper()
	var ds provider.Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("want provider.Diagnostics, got %T %v", err, err)
	}
	var out []string
	for _, d := range ds {
		if d.Severity == provider.Error {
			out = append(out, strings.Join(d.Path, "."))
		}
	}
	return out
}

// TestConfigureKeepsTheOldOnError: a bad block is refused at its
// attribute and the configuration before it still serves.
func TestConfigureKeepsTheOldOnError(t *testing.T) {
	var s Source
	ctx := t.Context()
	if err := s.Configure(ctx, json.RawMessage(`{"address": "http://127.0.0.1:9090"}`)); err != nil {
		t.Fatal(err)
	}
	err := s.Configure(ctx, json.RawMessage(`{"address": "http://127.0.0.1:9091", "timeout": "never"}`))
	if got := paths(t, err); !slices.Equal(got, []string{"timeout"}) {
		t.Fatalf("diagnostics at %q, want timeout", got)
	}
	if got := s.Address(); got != "http://127.0.0.1:9090" {
		t.Fatalf("address %q after a refused Configure, want the one before", got)
	}
	// Files that cannot be read are refused at their attribute too.
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ raw, path string }{
		{`{"address": "https://127.0.0.1:9090", "ca_file": "` + filepath.Join(dir, "missing.pem") + `"}`, "ca_file"},
		{`{"address": "https://127.0.0.1:9090", "ca_file": "` + empty + `"}`, "ca_file"},
		{`{"address": "http://127.0.0.1:9090", "bearer_token_file": "` + filepath.Join(dir, "missing") + `"}`, "bearer_token_file"},
		{`{"address": "http://127.0.0.1:9090", "bearer_token_file": "` + empty + `"}`, "bearer_token_file"},
	} {
		err := s.Configure(ctx, json.RawMessage(c.raw))
		if got := paths(t, err); !slices.Equal(got, []string{c.path}) {
			t.Errorf("%s: diagnostics at %q, want %s: %v", c.raw, got, c.path, err)
		}
	}
	if err := s.Configure(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Query(ctx, "vector(1)", time.Time{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("query without an address: %v, want ErrNoAddress", err)
	}
}
