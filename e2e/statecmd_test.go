package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/syncbuf"
)

// instanceAddrs are the `state list` addresses of group name's members.
func (w *workdir) instanceAddrs(name string) []string {
	w.t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(w.ok("state", "list", "group."+name).stdout), "\n") {
		if strings.HasPrefix(line, "group."+name+".instance[") {
			out = append(out, line)
		}
	}
	return out
}

// idOf is the instance ID of a member's address.
func idOf(addr string) string {
	return regexp.MustCompile(`\["(.*)"\]$`).FindStringSubmatch(addr)[1]
}

// `state rm` of members keeps the instances but takes them out of the
// group (the next plan replaces them), and `import` of the same instances
// gives back the plan from before, exactly.
func TestStateRemoveThenImportRoundTrips(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	w.ok("apply", "-auto-approve")
	before := w.ok("plan", "-no-color").stdout
	if !strings.Contains(before, "No changes.") {
		t.Fatalf("plan after apply is not empty:\n%s", before)
	}
	members := w.instanceAddrs("miners")
	if len(members) != 5 {
		t.Fatalf("state list shows %d miners: %v", len(members), members)
	}
	gone := members[:2]
	ids := []string{idOf(gone[0]), idOf(gone[1])}

	res := w.ok(append([]string{"state", "rm"}, gone...)...)
	if strings.Count(res.stdout, "forgotten") != 2 {
		t.Fatalf("state rm says:\n%s", res)
	}
	if got := w.instanceAddrs("miners"); !slices.Equal(got, members[2:]) {
		t.Fatalf("state list after rm: %v, want %v", got, members[2:])
	}
	sim := w.simulatorInstances("compute")
	for _, id := range ids {
		if !slices.Contains(sim, id) {
			t.Fatalf("state rm destroyed %s: the simulator holds %v", id, sim)
		}
	}
	if got := w.groups()["miners"].ids(); len(got) != 3 || slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) {
		t.Fatalf("group ls counts %v after rm of %v", got, ids)
	}
	if backup := readState(t, filepath.Join(w.dir, "infrakit.state.json.backup")); len(backup.Groups["miners"].Instances) != 5 {
		t.Fatalf("the backup does not hold the state before rm: %d miners", len(backup.Groups["miners"].Instances))
	}
	if got := w.plan()["miners"]; got == "" || got == "none" {
		t.Fatalf("plan after rm does not change miners: %q", got)
	}

	// Refused: an unknown ID, and a member of another group.
	cattle := w.instanceAddrs("cattle")
	res = w.expect(1, "import", "-auto-approve", "group.miners", ids[0], "compute-nope", idOf(cattle[0]))
	if !strings.Contains(res.stderr, `"compute-nope": provider "simulator" lists no compute instance`) ||
		!strings.Contains(res.stderr, `belongs to group "cattle"`) || !strings.Contains(res.stderr, "nothing was imported") {
		t.Fatalf("import of bad IDs: %s", res)
	}
	// Without -auto-approve and without a terminal, it asks and cannot.
	res = w.expect(1, "import", "group.miners", ids[0])
	if !strings.Contains(res.stdout, "imported (tags") || !strings.Contains(res.stderr, "-auto-approve") {
		t.Fatalf("import without approval: %s", res)
	}

	w.ok("import", "-auto-approve", "group.miners", ids[0], ids[1])
	if got := w.instanceAddrs("miners"); !slices.Equal(got, members) {
		t.Fatalf("state list after import: %v, want %v", got, members)
	}
	if after := w.ok("plan", "-no-color").stdout; after != before {
		t.Fatalf("plan after rm + import:\n%s\nwant the plan from before:\n%s", after, before)
	}
	var show struct {
		Kind     string `json:"kind"`
		Instance struct {
			ID   string            `json:"id"`
			Tags map[string]string `json:"tags"`
		} `json:"instance"`
	}
	if err := json.Unmarshal([]byte(w.ok("state", "show", "-json", gone[0]).stdout), &show); err != nil ||
		show.Kind != "instance" || show.Instance.ID != ids[0] || show.Instance.Tags["infrakit.group"] != "miners" {
		t.Fatalf("state show -json %s: %+v, %v", gone[0], show, err)
	}

	// state mv of a member to another group and back leaves no trace.
	w.ok("state", "mv", gone[0], "group.cattle")
	if g := w.groups(); len(g["cattle"].Instances) != 11 || len(g["miners"].Instances) != 4 {
		t.Fatalf("after mv: cattle %d, miners %d", len(g["cattle"].Instances), len(g["miners"].Instances))
	}
	w.ok("state", "mv", fmt.Sprintf("group.cattle.instance[%q]", ids[0]), "group.miners")
	if after := w.ok("plan", "-no-color").stdout; after != before {
		t.Fatalf("plan after mv and back:\n%s", after)
	}
}

// holdStack is a stack whose apply waits for its new member to run (its
// ingress registers it), with stackBlock as its stack block.
func holdStack(stackBlock string) string {
	return stackBlock + `
provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = 1
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}

loadbalancer "lb1" { provider = simulator }

ingress "web" {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web]
    route {
      lb_port     = 80
      lb_protocol = "http"
      port        = 80
      protocol    = "http"
    }
  }
}
`
}

// lockHolder starts `infrakit apply` in w, slowed by the simulator so it
// holds the state lock (waiting for its member to run), and returns it and the lock's ID, which a command
// that finds the lock taken prints. The test owns the process.
func (w *workdir) lockHolder() (*exec.Cmd, <-chan error, string) {
	w.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "infrakit"), "apply", "-auto-approve")
	cmd.Dir = w.dir
	cmd.Env = append(slices.Clone(w.env), "INFRAKIT_SIMULATOR_PROVISION_DELAY=10m")
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // received by the test or its cleanup
	w.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	held := regexp.MustCompile(fmt.Sprintf(`"apply" \(pid %d on host [^)]*\) since \S+; waited \S+; lock ID (\S+)`, cmd.Process.Pid))
	var id string
	var last result
	within(w.t, 60*time.Second, "apply holds the state lock", func() bool {
		select {
		case err := <-done:
			w.t.Fatalf("apply ended (%v) before it was seen holding the lock:\n%s\nlast try: %s", err, out.String(), last)
		default:
		}
		// A verb that takes the lock and then finds nothing to do.
		last = w.run("state", "rm", "-lock-timeout", "0s", "group.nope")
		if m := held.FindStringSubmatch(last.stderr); m != nil {
			id = m[1]
			return true
		}
		return false
	})
	return cmd, done, id
}

// forceUnlockHeld runs force-unlock of the lock apply (pid) holds. apply
// takes the lock twice, to plan and to execute, each time with a new ID:
// an ID read while it planned names no lock once it executes, so that ID
// is read again until force-unlock names the lock held.
func (w *workdir) forceUnlockHeld(pid int, id string) (result, string) {
	w.t.Helper()
	held := regexp.MustCompile(fmt.Sprintf(`"apply" \(pid %d on host [^)]*\) since \S+; waited \S+; lock ID (\S+)`, pid))
	var res result
	within(w.t, 60*time.Second, "force-unlock names the lock apply holds", func() bool {
		res = w.run("force-unlock", id)
		if res.code == 1 && strings.Contains(res.stderr, "no such lock") {
			if m := held.FindStringSubmatch(w.run("state", "rm", "-lock-timeout", "0s", "group.nope").stderr); m != nil {
				id = m[1]
			}
			return false
		}
		return true
	})
	if res.code != 1 {
		w.t.Fatalf("force-unlock of a living holder: %s", res)
	}
	return res, id
}

// The local lock is a flock: while apply runs, force-unlock refuses (with
// -force too: a flock cannot be taken from its holder); once apply is
// SIGKILLed the kernel has released it, and force-unlock says so and clears
// the record the holder left.
func TestForceUnlockLocalAfterSIGKILL(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("stack.hcl", holdStack(`stack "hold" {}`))
	w.init()
	cmd, done, id := w.lockHolder()

	res, id := w.forceUnlockHeld(cmd.Process.Pid, id)
	if !strings.Contains(res.stderr, fmt.Sprintf("pid %d, is running on this host", cmd.Process.Pid)) || !strings.Contains(res.stdout, "holder: \"apply\"") {
		t.Fatalf("force-unlock of a living holder: %s", res)
	}
	res = w.expect(1, "force-unlock", "-force", id)
	if !strings.Contains(res.stderr, "a flock ends only with its holder's process") {
		t.Fatalf("force-unlock -force of a living flock: %s", res)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	providersGone(t, w.dir, 30*time.Second)
	lockFile := filepath.Join(w.dir, "infrakit.state.json.lock")
	if data, err := os.ReadFile(lockFile); err != nil || !strings.Contains(string(data), id) {
		t.Fatalf("the killed holder left no record: %q, %v", data, err)
	}
	// The flock went with the process: force-unlock finds it free (without
	// asking: there is nothing to break) and clears the record.
	res = w.expect(1, "force-unlock", "not-"+id)
	if !strings.Contains(res.stderr, "the state lock's ID is "+id) {
		t.Fatalf("force-unlock of another ID: %s", res)
	}
	res = w.run("force-unlock", id)
	if data, _ := os.ReadFile(lockFile); res.code != 0 {
		t.Fatalf("force-unlock after SIGKILL (lock file now %q): %s", data, res)
	}
	if !strings.Contains(res.stdout, "not held: the holder's process is gone") || !strings.Contains(res.stdout, "leftover record is cleared") {
		t.Fatalf("force-unlock after SIGKILL: %s", res)
	}
	if data, err := os.ReadFile(lockFile); err != nil || len(data) != 0 {
		t.Fatalf("lock file after force-unlock: %q, %v", data, err)
	}
	res = w.expect(1, "state", "rm", "-lock-timeout", "0s", "group.nope")
	if !strings.Contains(res.stderr, "holds no group.nope") {
		t.Fatalf("the lock is not free after its holder was killed: %s", res)
	}
}

// The etcd lock is a lease: after apply is SIGKILLed it stays held until
// the lease expires (60s here); force-unlock names the dead holder and
// breaks it at once.
func TestForceUnlockEtcdAfterSIGKILL(t *testing.T) {
	e := startEtcdProc(t)
	stack := holdStack(fmt.Sprintf(`stack "hold" {
  backend "etcd" {
    endpoints = [%q]
    prefix    = "/unlock"
    lease_ttl = "60s"
  }
}`, e.endpoint()))
	dirs, _ := etcdDirs(t, 1, stack)
	w := dirs[0]
	cmd, done, id := w.lockHolder()
	res, id := w.forceUnlockHeld(cmd.Process.Pid, id)
	if !strings.Contains(res.stderr, "is running on this host") {
		t.Fatalf("force-unlock of a living holder: %s", res)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	killed := time.Now()
	providersGone(t, w.dir, 30*time.Second)
	if res := w.expect(1, "state", "rm", "-lock-timeout", "0s", "group.nope"); !strings.Contains(res.stderr, "lock ID "+id) {
		t.Fatalf("the lease should hold the lock after its holder died: %s", res)
	}
	res = w.ok("force-unlock", "-force", id)
	if !strings.Contains(res.stdout, fmt.Sprintf("pid %d is not running on this host: the holder died", cmd.Process.Pid)) ||
		!strings.Contains(res.stdout, "is broken") {
		t.Fatalf("force-unlock of the dead holder: %s", res)
	}
	if res := w.expect(1, "state", "rm", "-lock-timeout", "0s", "group.nope"); !strings.Contains(res.stderr, "holds no group.nope") {
		t.Fatalf("the lock is not free after force-unlock: %s", res)
	}
	if d := time.Since(killed); d >= 60*time.Second {
		t.Fatalf("took %s: the lease could have expired by itself", d)
	}
}

// A group renamed in the stack files is renamed in the state with
// `state mv`, members, followers and all: the plan is empty again. `state
// rm` of the group then forgets it: its instances stay, and the next plan
// creates the group anew.
func TestStateMoveRenamedGroupThenRemove(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	w.ok("apply", "-auto-approve")
	data, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer(`group "miners"`, `group "diggers"`, "group.miners", "group.diggers").Replace(string(data))
	w.writeFile("stack.hcl", renamed)
	if p := w.plan(); p["diggers"] == "none" || p["diggers"] == "" {
		t.Fatalf("the plan of the renamed group before state mv: %v", p)
	}
	old := w.groups()["miners"].ids()

	w.ok("state", "mv", "group.miners", "group.diggers")
	if res := w.ok("plan", "-no-color"); !strings.Contains(res.stdout, "No changes.") {
		t.Fatalf("plan after state mv of the renamed group:\n%s", res)
	}
	if got := w.groups()["diggers"].ids(); !slices.Equal(got, old) {
		t.Fatalf("diggers after mv: %v, want the miners %v", got, old)
	}

	w.ok("state", "rm", "group.diggers")
	if strings.Contains(w.ok("state", "list").stdout, "group.diggers") {
		t.Fatal("state list still shows group.diggers")
	}
	sim := w.simulatorInstances("compute")
	for _, id := range old {
		if !slices.Contains(sim, id) {
			t.Fatalf("state rm of the group destroyed %s", id)
		}
	}
	var p planJSON
	if err := json.Unmarshal([]byte(w.ok("plan", "-json").stdout), &p); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range p.Groups {
		if g.Group == "diggers" {
			found = true
			if g.Before != 0 || g.After != 5 {
				t.Fatalf("plan after state rm of the group: diggers %d -> %d, want 0 -> 5 (its old members released)", g.Before, g.After)
			}
		}
	}
	if !found {
		t.Fatalf("plan after state rm of the group does not plan diggers: %+v", p)
	}
}
