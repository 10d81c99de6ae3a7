package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// settings is the provider block's configuration as Configure last accepted
// it, and how many times it did; the gauges source reads it back, so a test
// sees what reached the provider.
type settings struct {
	mu         sync.Mutex
	config     map[string]json.RawMessage
	configured int
}

// configure refuses {"bad": ...} with a diagnostic at bad, fails on
// {"fail": ...} with a plain error, and warns about {"old": ...}.
func (s *settings) configure(_ context.Context, raw json.RawMessage) error {
	var config map[string]json.RawMessage
	if err := json.Unmarshal(raw, &config); err != nil {
		return err // the SDK hands over objects only
	}
	var diags provider.Diagnostics
	if _, ok := config["old"]; ok {
		diags = append(diags, provider.Diagnostic{Severity: provider.Warning, Summary: "Deprecated attribute", Detail: "old is going away", Path: []string{"old"}})
	}
	if _, ok := config["bad"]; ok {
		return append(diags, provider.Diagnostic{Severity: provider.Error, Summary: "Invalid value", Detail: "bad is not allowed", Path: []string{"bad"}})
	}
	if _, ok := config["fail"]; ok {
		return errors.New("cannot reach the metrics backend")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = config
	s.configured++
	return diags
}

// gauges is a metrics source whose query language is testql:
//
//	<number>       that value
//	empty          no data
//	sloppy-empty   no data, with a value beside it
//	warn           1, with a warning
//	config.<name>  the number the configuration's <name> holds (no data when absent)
//	configured     how many configurations were accepted
//	many           an error: more than one series
//	anything else  a diagnostic at ["query"]: it does not parse
//
// The sample is for the time asked, or now.
type gauges struct{ settings *settings }

func (g gauges) Query(_ context.Context, query string, at time.Time) (metrics.Sample, error) {
	if at.IsZero() {
		at = time.Now()
	}
	s := metrics.Sample{At: at}
	if v, err := strconv.ParseFloat(query, 64); err == nil {
		s.Value = v
		return s, nil
	}
	g.settings.mu.Lock()
	defer g.settings.mu.Unlock()
	switch name, isConfig := strings.CutPrefix(query, "config."); {
	case query == "empty":
		s.Empty = true
	case query == "sloppy-empty":
		s.Empty, s.Value = true, 7
	case query == "warn":
		s.Value, s.Warnings = 1, []string{"partial answer: 1 of 2 shards"}
	case query == "configured":
		s.Value = float64(g.settings.configured)
	case query == "many":
		return metrics.Sample{}, errors.New("the query matched 3 series; a check needs one (aggregate with sum())")
	case isConfig:
		raw, ok := g.settings.config[name]
		if !ok {
			s.Empty = true
			break
		}
		if err := json.Unmarshal(raw, &s.Value); err != nil {
			return metrics.Sample{}, provider.AttributeError("Not a number", "configuration "+name+" is "+string(raw), "query")
		}
	default:
		return metrics.Sample{}, provider.AttributeError("Invalid query", "cannot parse "+strconv.Quote(query), "query")
	}
	return s, nil
}
