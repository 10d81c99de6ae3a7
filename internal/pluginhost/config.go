package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/infrakit/infrakit/sdk/plugin"
)

// ConfigError says a provider process did not take its block's
// configuration (it refused it with diagnostics, or the call failed). The
// process keeps running; the next Client call for its key configures it
// again.
type ConfigError struct {
	Key string
	// Err reads `provider "<key>": Configure: <cause>`; it wraps the
	// provider's provider.Diagnostics when it refused the configuration.
	Err error
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// SetConfig records the configuration of provider key's block: its
// attributes other than alias and parallelism, as a JSON object (empty or
// {} for none). Client hands it to the key's process before returning it:
// to a new process before its first use, and to a running one when the
// recorded configuration changed since it was configured, so a changed
// block reaches the provider at its next use without a relaunch. A new
// process of a key without configuration is not configured at all (nor is
// a provider that predates Configure disturbed); a running process whose
// block lost its attributes gets {}, its defaults.
func (h *Host) SetConfig(key string, config json.RawMessage) {
	config = normalConfig(config)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.proc(key).config = config
}

// normalConfig is config compacted, so that a configuration written anew
// with other spacing is no change, and nil for no configuration. A text
// that is not JSON is kept as it is, for the provider to refuse.
func normalConfig(config json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, config); err != nil {
		if len(bytes.TrimSpace(config)) == 0 {
			return nil
		}
		return bytes.Clone(config)
	}
	switch b.String() {
	case "{}", "null":
		return nil
	}
	return b.Bytes()
}

// configure brings c, p's process, up to p's recorded configuration; the
// caller holds p's turn, so one caller configures it and the others wait.
func (h *Host) configure(ctx context.Context, key string, p *proc, c *plugin.Client) error {
	h.mu.Lock()
	want := p.config
	h.mu.Unlock()
	if bytes.Equal(want, p.configured) {
		return nil
	}
	send := want
	if send == nil {
		send = json.RawMessage(`{}`)
	}
	err := c.Configure(ctx, send)
	if errors.Is(err, errors.ErrUnsupported) {
		// Built before providers were configured: it takes none.
		h.log.Warn("provider does not take configuration (it predates it); its block's attributes are ignored", "provider", key)
		err = nil
	}
	if err != nil {
		return &ConfigError{Key: key, Err: err}
	}
	h.log.Debug("provider configured", "provider", key, "pid", c.Pid())
	p.configured = want
	return nil
}
