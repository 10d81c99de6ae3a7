package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestMetricsQuery(t *testing.T) {
	s := newSim(t, Config{Dir: t.TempDir()})
	dir := filepath.Join(s.Dir(), "metrics")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"rps": " 130\n", "blank": "\n", "junk": "lots"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := s.Metrics()
	ctx := context.Background()
	tests := []struct {
		query     string
		value     float64
		empty     bool
		wantErr   bool
		wantDiags bool
	}{
		{query: "rps", value: 130},
		{query: " rps ", value: 130},
		{query: "missing", empty: true},
		{query: "blank", empty: true},
		{query: "junk", wantErr: true},
		{query: "../rps", wantErr: true, wantDiags: true},
		{query: "", wantErr: true, wantDiags: true},
	}
	for _, tt := range tests {
		got, err := m.Query(ctx, tt.query, time.Time{})
		var diags provider.Diagnostics
		switch {
		case tt.wantErr && err == nil:
			t.Errorf("Query(%q) = %+v, want an error", tt.query, got)
		case !tt.wantErr && err != nil:
			t.Errorf("Query(%q): %v", tt.query, err)
		case tt.wantDiags != errors.As(err, &diags):
			t.Errorf("Query(%q): error %v, diagnostics wanted: %v", tt.query, err, tt.wantDiags)
		case err == nil && (got.Value != tt.value || got.Empty != tt.empty || got.At.IsZero()):
			t.Errorf("Query(%q) = %+v, want value %v empty %v and a time", tt.query, got, tt.value, tt.empty)
		}
	}
}
