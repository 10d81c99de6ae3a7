// Command configured is the provider the host's configuration tests run:
// it keeps the configuration it is given and answers, as the metrics source
// "config", what it holds:
//
//	<name>      the number the configuration's <name> holds (no data when absent)
//	configures  how many configurations this process accepted
//	attempts    how many Configure calls this process received
//
// It refuses a configuration holding "refuse", with a diagnostic there.
package main

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

func main() {
	s := &settings{}
	plugin.Serve(&plugin.ServeConfig{
		Metadata:  provider.Metadata{Name: "configured", Version: "0.0.1"},
		Metrics:   map[string]metrics.Source{"config": s},
		Configure: s.configure,
	})
}

type settings struct {
	mu                   sync.Mutex
	config               map[string]json.RawMessage
	attempts, configures int
}

func (s *settings) configure(_ context.Context, raw json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	var config map[string]json.RawMessage
	if err := json.Unmarshal(raw, &config); err != nil {
		return err
	}
	if _, ok := config["refuse"]; ok {
		return provider.AttributeError("Refused", "refused as asked", "refuse")
	}
	s.config = config
	s.configures++
	return nil
}

func (s *settings) Query(_ context.Context, query string, _ time.Time) (metrics.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sample := metrics.Sample{At: time.Now()}
	switch query {
	case "configures":
		sample.Value = float64(s.configures)
	case "attempts":
		sample.Value = float64(s.attempts)
	default:
		raw, ok := s.config[query]
		if !ok {
			sample.Empty = true
			break
		}
		if err := json.Unmarshal(raw, &sample.Value); err != nil {
			return metrics.Sample{}, provider.AttributeError("Not a number", string(raw), "query")
		}
	}
	return sample, nil
}
