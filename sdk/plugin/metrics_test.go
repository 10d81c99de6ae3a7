package plugin

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// These tests run the metrics SPI and Configure against the test provider
// in a real subprocess, over the real wire.

func TestMetricsRoundTrip(t *testing.T) {
	c, _ := startTest(t, "")
	src := c.Metrics("testql")
	at := time.Date(2024, 5, 1, 12, 0, 0, 250_000_000, time.UTC)

	t.Run("Value", func(t *testing.T) {
		got, err := src.Query(ctxT(t), "42.5", at)
		if err != nil {
			t.Fatal(err)
		}
		if want := (metrics.Sample{Value: 42.5, At: at}); !reflect.DeepEqual(got, want) {
			t.Fatalf("sample:\n got %#v\nwant %#v", got, want)
		}
	})

	t.Run("Now", func(t *testing.T) {
		// The zero time travels as "now"; the answer says which time it is for.
		before := time.Now().Add(-time.Second)
		got, err := src.Query(ctxT(t), "1", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got.At.IsZero() || got.At.Before(before) {
			t.Fatalf("sample for now is for %v, want a time after %v", got.At, before)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		for _, q := range []string{"empty", "sloppy-empty"} {
			got, err := src.Query(ctxT(t), q, at)
			if err != nil {
				t.Fatal(err)
			}
			// An empty answer's value is 0, whatever the provider put beside it.
			if want := (metrics.Sample{Empty: true, At: at}); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n got %#v\nwant %#v", q, got, want)
			}
		}
	})

	t.Run("Warnings", func(t *testing.T) {
		got, err := src.Query(ctxT(t), "warn", at)
		if err != nil {
			t.Fatal(err)
		}
		if want := (metrics.Sample{Value: 1, At: at, Warnings: []string{"partial answer: 1 of 2 shards"}}); !reflect.DeepEqual(got, want) {
			t.Fatalf("sample:\n got %#v\nwant %#v", got, want)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		_, err := src.Query(ctxT(t), "sum(", at)
		wantDiagnostics(t, err, "Query", provider.AttributeError("Invalid query", `cannot parse "sum("`, "query"))

		_, err = src.Query(ctxT(t), "many", at)
		wantError(t, err, `provider "test": Query: the query matched 3 series; a check needs one (aggregate with sum())`)

		_, err = c.Metrics("sql").Query(ctxT(t), "1", at)
		wantError(t, err, `provider "test": Query: metrics type "sql" is not served by this provider (it serves: testql)`)
	})
}

func TestConfigureRoundTrip(t *testing.T) {
	c, logs := startTest(t, "")
	src := c.Metrics("testql")
	query := func(t *testing.T, q string) metrics.Sample {
		t.Helper()
		s, err := src.Query(ctxT(t), q, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	if s := query(t, "config.scale"); !s.Empty {
		t.Fatalf("unconfigured provider has a scale: %+v", s)
	}
	if err := c.Configure(ctxT(t), json.RawMessage(`{"scale": 3, "address": "http://127.0.0.1:9090"}`)); err != nil {
		t.Fatal(err)
	}
	if s := query(t, "config.scale"); s.Empty || s.Value != 3 {
		t.Fatalf("after Configure, scale is %+v, want 3", s)
	}

	// Configured again, the provider has the new configuration.
	if err := c.Configure(ctxT(t), json.RawMessage(`{"scale": 4, "old": true}`)); err != nil {
		t.Fatalf("warnings alone failed Configure: %v", err)
	}
	if s := query(t, "config.scale"); s.Value != 4 {
		t.Fatalf("after the second Configure, scale is %+v, want 4", s)
	}
	if !strings.Contains(logs.String(), "Deprecated attribute") {
		t.Errorf("the configuration's warning was not logged by the host:\n%s", logs)
	}

	// Refused configurations leave the last accepted one in place.
	err := c.Configure(ctxT(t), json.RawMessage(`{"scale": 5, "bad": 1}`))
	wantDiagnostics(t, err, "Configure", provider.AttributeError("Invalid value", "bad is not allowed", "bad"))
	err = c.Configure(ctxT(t), json.RawMessage(`{"fail": true}`))
	wantError(t, err, `provider "test": Configure: cannot reach the metrics backend`)
	for _, bad := range []string{`[1]`, `null`, `{"x":`} {
		err = c.Configure(ctxT(t), json.RawMessage(bad))
		wantDiagnostics(t, err, "Configure", provider.AttributeError("Invalid provider configuration", "The configuration is not a JSON object."))
	}
	if s := query(t, "config.scale"); s.Value != 4 {
		t.Fatalf("after refused configurations, scale is %+v, want 4", s)
	}
	if s := query(t, "configured"); s.Value != 2 {
		t.Fatalf("the provider accepted %v configurations, want 2", s.Value)
	}

	// No configuration is the empty object.
	if err := c.Configure(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if s := query(t, "config.scale"); !s.Empty {
		t.Fatalf("after an empty configuration, scale is %+v", s)
	}
}

func TestConfigureWithoutConfiguration(t *testing.T) {
	c, logs := startTest(t, "no-config")
	// A provider that takes no configuration accepts a block's attributes,
	// with a warning for each, which the host logs.
	if err := c.Configure(ctxT(t), json.RawMessage(`{"zone": "b", "adress": "x"}`)); err != nil {
		t.Fatal(err)
	}
	for _, attr := range []string{"adress", "zone"} {
		if !strings.Contains(logs.String(), `Provider \"test\" takes no configuration, so `+attr+" has no effect.") {
			t.Errorf("no warning about %s logged:\n%s", attr, logs)
		}
	}
	if err := c.Configure(ctxT(t), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Not being a JSON object is still an error.
	var diags provider.Diagnostics
	if err := c.Configure(ctxT(t), json.RawMessage(`"x"`)); !errors.As(err, &diags) {
		t.Fatalf("a string configuration: %v, want diagnostics", err)
	}
}
