package command

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/state"
)

// ForceUnlockCommand is `infrakit force-unlock LOCK_ID [-force]`.
type ForceUnlockCommand struct {
	Meta
}

// Run shows the lock's holder, decides (state.CheckForceUnlock), asks, and
// breaks the lock.
func (c *ForceUnlockCommand) Run(args []string) int {
	fs := c.FlagSet("force-unlock")
	force := fs.Bool("force", false, "do not ask for confirmation; break the lock even if its holder runs on this host")
	positional, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(positional) != 1 {
		c.Ui.Error("The force-unlock command needs one lock ID (the lock-wait and lock-timeout messages name it).\n")
		return cli.RunResultHelp
	}
	id := positional[0]
	r, err := c.stateRunner("force-unlock", nil, 0)
	if err != nil {
		c.showError("Error unlocking the state", err)
		return 1
	}
	defer c.closeRunner(r)
	st, err := r.LockStatus(c.Context())
	if err != nil {
		c.showError("Error unlocking the state", err)
		return 1
	}
	host, _ := os.Hostname()
	req := state.UnlockRequest{Status: st, ID: id, ThisHost: host, Force: *force,
		HolderAlive: st.Known && st.Holder.Host == host && state.Alive(st.Holder.PID)}
	if st.Known {
		c.Ui.Output(fmt.Sprintf("Lock %s of %s:\n  holder: %s\n  %s\n", st.Holder.ID, r.StateName(),
			state.DescribeHolder(st.Holder), holderPhrase(req, r.IsLocalState())))
	}
	if err := state.CheckForceUnlock(req); err != nil {
		c.showError("Error unlocking the state", err)
		return 1
	}
	if st.Held && !*force {
		if err := c.approve("unlock", "Do you really want to force-unlock the state?",
			"infrakit will break the lock held as shown above. If its holder still runs, two\n  commands may then change the state at once."); err != nil {
			c.showError("Unlock cancelled", err)
			return 1
		}
		c.Ui.Output("")
	}
	res, err := r.ForceUnlock(c.Context(), id)
	if err != nil {
		c.showError("Error unlocking the state", err)
		return 1
	}
	if res.WasHeld {
		c.Ui.Output(fmt.Sprintf("The state lock %s is broken: the state is unlocked.", id))
	} else {
		c.Ui.Output(fmt.Sprintf("The state was not locked: lock %s ended with its holder's process. Its leftover record is cleared.", id))
	}
	return 0
}

// holderPhrase says what is known of the holder's process.
func holderPhrase(req state.UnlockRequest, local bool) string {
	st := req.Status
	switch {
	case !st.Held && local:
		return "not held: the holder's process is gone, and the kernel released its flock with it; only its record remains"
	case !st.Held:
		return "not held"
	case req.HolderAlive:
		return fmt.Sprintf("held: pid %d is running on this host", st.Holder.PID)
	case st.Holder.Host == req.ThisHost:
		expires := ""
		if st.Expires > 0 {
			expires = fmt.Sprintf("; the lease frees it by itself in %s", st.Expires.Round(time.Second))
		}
		return fmt.Sprintf("held, but pid %d is not running on this host: the holder died%s", st.Holder.PID, expires)
	default:
		return fmt.Sprintf("held by a process on another host (%s); make sure it is not running there", st.Holder.Host)
	}
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ForceUnlockCommand) Synopsis() string {
	return "Release a state lock left by a process that died"
}

// Help is the text of `infrakit force-unlock -help`.
func (c *ForceUnlockCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] force-unlock LOCK_ID [options]

  Releases the state lock LOCK_ID, left by a process that died. The ID is
  in the messages of a command that waits for the lock or gives up ("lock
  ID ..."). It shows the holder (operation, pid, host, since) and asks
  before breaking the lock.

  The etcd backend's lock is a lease: a holder that dies keeps the lock
  until the lease expires (lease_ttl). force-unlock revokes the lease at
  once; the dead holder's writes, which are conditioned on the lock, fail.

  The local backend's lock is a flock, which the kernel releases when its
  holder dies: there is nothing to break, and force-unlock says so and
  clears the record the holder left in infrakit.state.json.lock. A flock
  held by a living process cannot be broken: stop that process.

  It refuses when the holder's pid runs on this host, unless -force.

Options:

  -force              Do not ask for confirmation, and break the lock even
                      when its holder runs on this host.
`)
}
