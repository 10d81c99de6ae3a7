package command

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
)

// initBackend is init's backend step: it compares the backend the stack
// configures with the one recorded in .infrakit/backend.json (the local
// file when nothing is recorded) and records the configured one. When they
// differ and the recorded one holds state, that state must be moved with
// -migrate-state (stateetcd.Migrate); without the flag init stops, so no
// state is ever left behind silently. It returns the exit code (0: go on).
func (c *InitCommand) initBackend(stack *config.Stack, migrate bool, lockTimeout time.Duration) int {
	configured := stack.Backend
	if configured.IsLocal() {
		configured = &config.Backend{Type: config.BackendLocal}
	}
	recorded, err := stateetcd.ReadRecord(c.WorkDir)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: reading the recorded backend: %s", err))
		return 1
	}
	if recorded.Username != "" && recorded.Password == "" && recorded.Username == configured.Username {
		recorded.Password = configured.Password
	}

	ctx, cancel := context.WithTimeout(c.Context(), lockTimeout)
	defer cancel()
	same, err := c.sameBackend(ctx, recorded, configured)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return 1
	}
	if same {
		if !configured.IsLocal() {
			if code := c.splitLayout(ctx, configured, migrate); code != 0 {
				return code
			}
		} else if migrate {
			c.Ui.Output(fmt.Sprintf("The state is already in the configured backend (%s); nothing to migrate.", configured))
		}
		return c.record(configured)
	}

	localPath := filepath.Join(c.WorkDir, operation.StateFile)
	from, closeFrom, err := stateetcd.OpenStore(recorded, localPath)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: opening the previous backend (%s): %s", recorded, err))
		return 1
	}
	defer closeFrom()
	to, closeTo, err := stateetcd.OpenStore(configured, localPath)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: opening the configured backend (%s): %s", configured, err))
		return 1
	}
	defer closeTo()

	if !migrate {
		doc, err := from.Read(ctx)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: the backend changed from %s to %s, and the state in %s cannot be read: %s",
				recorded, configured, recorded, err))
			return 1
		}
		if !doc.IsNew() {
			c.Ui.Error(fmt.Sprintf("Error: the backend changed from %s to %s, but %s holds the state (serial %d).\n\n"+
				"Run \"infrakit init -migrate-state\" to move it to %s (the old copy is kept as a backup),\n"+
				"or set the backend back.", recorded, configured, recorded, doc.Serial, configured))
			return 1
		}
		c.Ui.Output(fmt.Sprintf("Backend: %s (no state to move from %s).", configured, recorded))
		return c.record(configured)
	}

	c.Ui.Output(fmt.Sprintf("Migrating the state from %s to %s...", recorded, configured))
	m, err := stateetcd.Migrate(ctx, from, to)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: migrating the state: %s", err))
		return 1
	}
	switch {
	case !m.Moved:
		c.Ui.Output(fmt.Sprintf("- %s holds no state; nothing to move.", recorded))
	case m.Resumed:
		c.Ui.Output(fmt.Sprintf("- %s already held this state (lineage %s, serial %d): finished an interrupted migration.", configured, m.Lineage, m.Serial))
		c.Ui.Output("- The previous copy is kept in " + m.Backup + ".")
	default:
		c.Ui.Output(fmt.Sprintf("- Moved the state (lineage %s, serial %d) and verified it.", m.Lineage, m.Serial))
		c.Ui.Output("- The previous copy is kept in " + m.Backup + ".")
	}
	return c.record(configured)
}

// splitLayout is init's step for a state that stays in etcd: a state
// stored as one value, the layout of infrakit before the state was split
// per object, is moved to the split layout with -migrate-state
// (stateetcd.MigrateLayout; the one value is kept as a backup); without
// the flag init stops, as no command can use it. It returns the exit code.
func (c *InitCommand) splitLayout(ctx context.Context, b *config.Backend, migrate bool) int {
	be, err := stateetcd.Open(stateetcd.ConfigFrom(b))
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: opening the backend (%s): %s", b, err))
		return 1
	}
	defer be.Close()
	if !migrate {
		old, err := be.OldLayout(ctx)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			return 1
		}
		if old {
			c.Ui.Error(fmt.Sprintf("Error: %s holds the state as one value (%s), the layout of an older infrakit.\n\n"+
				"Run \"infrakit init -migrate-state\" to move it to the per-object layout (the old value is kept as a backup).", b, be.LegacyKey()))
			return 1
		}
		return 0
	}
	m, err := stateetcd.MigrateLayout(ctx, be)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: migrating the state to the per-object layout: %s", err))
		return 1
	}
	switch {
	case !m.Moved:
		c.Ui.Output(fmt.Sprintf("The state is already in the configured backend (%s); nothing to migrate.", b))
	case m.Resumed:
		c.Ui.Output(fmt.Sprintf("- %s already held this state in the per-object layout (lineage %s, serial %d): finished an interrupted migration.", b, m.Lineage, m.Serial))
		c.Ui.Output("- The one-value copy is kept in " + m.Backup + ".")
	default:
		c.Ui.Output(fmt.Sprintf("- Moved the state (lineage %s, serial %d) from one value (%s) to the per-object layout and verified it.", m.Lineage, m.Serial, be.LegacyKey()))
		c.Ui.Output("- The one-value copy is kept in " + m.Backup + ".")
	}
	return 0
}

// sameBackend reports whether two backends hold the state in one place;
// two etcd backends with one prefix whose endpoints differ are asked for
// their cluster IDs.
func (c *InitCommand) sameBackend(ctx context.Context, a, b *config.Backend) (bool, error) {
	if stateetcd.SameBackend(a, b) {
		return true, nil
	}
	if a.IsLocal() || b.IsLocal() || a.Prefix != b.Prefix {
		return false, nil
	}
	var ids [2]uint64
	for i, be := range []*config.Backend{a, b} {
		s, err := stateetcd.Open(stateetcd.ConfigFrom(be))
		if err != nil {
			return false, err
		}
		ids[i], err = s.ClusterID(ctx)
		s.Close()
		if err != nil {
			return false, fmt.Errorf("backend %s: %w", be, err)
		}
	}
	return ids[0] == ids[1], nil
}

func (c *InitCommand) record(b *config.Backend) int {
	if err := stateetcd.WriteRecord(c.WorkDir, b); err != nil {
		c.Ui.Error(fmt.Sprintf("Error: recording the backend: %s", err))
		return 1
	}
	return 0
}
