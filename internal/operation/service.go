package operation

import (
	"context"
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
)

// The methods below are what a long-running service (`infrakit watch`)
// builds on: it keeps one Runner, and with it one plugin host, for its whole
// life, and drives the group controllers itself instead of through Apply.

// StateStore is the runner's state backend: a *state.Local (StateFile in the
// working directory) or a *stateetcd.Backend, as `infrakit init` recorded.
func (r *Runner) StateStore() state.Store { return r.store }

// Backend is the state backend `infrakit init` recorded in the working
// directory (type "local" when it recorded none).
func (r *Runner) Backend() *config.Backend { return r.backend }

// PluginHost returns the plugin host, created from the working directory's
// lock file on first use. It fails with ErrNotInitialized when there is no
// lock file.
func (r *Runner) PluginHost() (*pluginhost.Host, error) { return r.hostFor() }

// GroupController builds the controller of group g, whose members are
// tagged with the stack name stack, through the providers of the plugin host
// (launching them when needed, relaunching one that exited). record, when
// set, receives what the controller creates and destroys; progress, when
// set, each finished work item. Controllers are cheap: build one per pass,
// so that a provider relaunched meanwhile is the one used.
func (r *Runner) GroupController(ctx context.Context, stack string, g *config.Group, record func(group.Record), progress func(group.Event)) (*group.Controller, error) {
	return r.newController(ctx, stack, g, record, progress)
}

// ResetHost stops every provider and forgets the plugin host, so that the
// next use creates a new one from the lock file as it is then (after
// `infrakit init -upgrade`, say).
func (r *Runner) ResetHost() error {
	r.mu.Lock()
	h := r.host
	r.host = nil
	r.mu.Unlock()
	if h != nil {
		return h.Close()
	}
	return nil
}

// StopUpdate halts the rolling update of a group: it marks the group
// UpdateStopped in the state, so neither `watch` nor a roll started later
// replaces its out-of-date members, and the group keeps its mix of old and
// new members. The next `apply` clears the mark and rolls again.
func (r *Runner) StopUpdate(ctx context.Context, name string) error {
	unlock, err := r.lock(ctx, "group stop-update")
	if err != nil {
		return err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return err
	}
	cfg, _ := storedGroup(doc, name)
	if cfg == nil {
		if doc.Groups[name] != nil {
			return fmt.Errorf("group %q: its configuration is not in the state, so it has no rolling update to stop", name)
		}
		return noGroup(name)
	}
	st := doc.Group(name)
	if st.UpdateStopped {
		return nil
	}
	st.UpdateStopped = true
	return r.store.Write(ctx, doc)
}
