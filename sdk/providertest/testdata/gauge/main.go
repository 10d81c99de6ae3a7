// Command gauge is a metrics provider the suite's own tests run the suite
// against: its source "const" answers the query "value" with the number its
// configuration holds, and only once it is configured, so a passing run
// shows that the suite sent Config.ProviderConfig.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

func main() {
	g := &gauge{}
	plugin.Serve(&plugin.ServeConfig{
		Metadata:  provider.Metadata{Name: "gauge", Version: "0.0.1"},
		Metrics:   map[string]metrics.Source{"const": g},
		Configure: g.configure,
	})
}

type gauge struct {
	value atomic.Pointer[float64] // nil until configured
}

// configure takes {"value": <number>}.
func (g *gauge) configure(_ context.Context, raw json.RawMessage) error {
	var config struct {
		Value float64 `json:"value"`
	}
	if err := json.Unmarshal(raw, &config); err != nil {
		return provider.AttributeError("Invalid value", "value must be a number", "value")
	}
	g.value.Store(&config.Value)
	return nil
}

// Query answers "value" with the configured value, "none" with no data,
// and refuses anything else as a query that does not parse.
func (g *gauge) Query(_ context.Context, query string, at time.Time) (metrics.Sample, error) {
	if at.IsZero() {
		at = time.Now()
	}
	switch query {
	case "value":
		v := g.value.Load()
		if v == nil {
			return metrics.Sample{}, errors.New("not configured")
		}
		return metrics.Sample{Value: *v, At: at}, nil
	case "none":
		return metrics.Sample{Empty: true, At: at}, nil
	}
	return metrics.Sample{}, provider.AttributeError("Invalid query", "only value and none parse", "query")
}
