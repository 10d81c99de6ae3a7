package operation

import (
	"encoding/json"

	"github.com/infrakit/infrakit/internal/config"
)

// A provider block's attributes (config.Provider.Config) configure its
// process: the runner records the blocks of each stack it loads or acts on
// and the plugin host hands the recorded configuration to a process before
// its next use (pluginhost.Host.SetConfig). The runner keeps them, so that
// a plugin host made anew (ResetHost) configures its processes as the old
// one did. Of two stacks, the one acted on wins over the stored one it
// replaces.

// SetProviderConfigs records the configurations of st's provider blocks;
// a process of one is (re)configured at its next use. A service that
// enforces the applied stack (watch) calls it with the state's stack.
func (r *Runner) SetProviderConfigs(st *config.Stack) { r.useProviders(st) }

// useProviders records the provider blocks of stacks, later ones winning.
func (r *Runner) useProviders(stacks ...*config.Stack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range stacks {
		if st == nil {
			continue
		}
		for _, p := range st.Providers {
			if r.configs == nil {
				r.configs = map[string]json.RawMessage{}
			}
			r.configs[p.Key()] = p.Config
			if r.host != nil {
				r.host.SetConfig(p.Key(), p.Config)
			}
		}
	}
}

// useStackFiles records the provider blocks of a stack read from the
// stack files, unless Options.KeepProviderConfig.
func (r *Runner) useStackFiles(st *config.Stack) {
	if !r.opts.KeepProviderConfig {
		r.useProviders(st)
	}
}
