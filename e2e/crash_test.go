package e2e

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// crashRounds is how many times TestCrashApply kills apply: a few in make
// test, many behind INFRAKIT_BENCH=1 (make bench).
func crashRounds() (applies, watches int) {
	if os.Getenv("INFRAKIT_BENCH") == "1" {
		return 200, 50
	}
	return 20, 5
}

// orphanBound is how long the providers of a killed infrakit may take to
// notice and exit. They should take well under a second; the bound is
// generous for a loaded machine, and the slowest is logged.
const orphanBound = 5 * time.Second

// killed starts infrakit with args in w, SIGKILLs it after d unless it
// ended first, waits for it, and reports whether it was killed.
func (w *workdir) killed(d time.Duration, args ...string) bool {
	w.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "infrakit"), args...)
	cmd.Dir, cmd.Env = w.dir, w.env
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // owned here: always received below
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// TestCrashApply kills `apply` (the real binary, SIGKILL) at random moments
// while it scales cattle and changes pets, and then `watch` mid-pass while
// it heals instances removed behind its back. After every kill: the state
// loads, the providers of the killed process exit, no group holds more
// instances than any size asked since it last converged, no logical ID has
// two instances; and the next complete apply converges exactly.
func TestCrashApply(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("stack.hcl", hardStack(2, []string{"p1"}))
	w.init()
	w.ok("apply", "-auto-approve")
	simDir := filepath.Join(w.dir, ".infrakit", "simulator")
	statePath := filepath.Join(w.dir, "infrakit.state.json")
	plugins := filepath.Join(w.dir, ".infrakit", "plugins")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	allPets := []string{"p1", "p2", "p3"}

	var slowest time.Duration
	check := func(round int, maxCattle int, pets map[string]bool) {
		t.Helper()
		readState(t, statePath)
		slowest = max(slowest, providersGone(t, plugins, orphanBound))
		sim := simulated(t, simDir)
		if n := len(sim["cattle"]); n > maxCattle {
			t.Fatalf("round %d: %d cattle; no size asked since the last convergence exceeds %d", round, n, maxCattle)
		}
		if dup := duplicatePets(sim["pets"]); len(dup) > 0 {
			t.Fatalf("round %d: logical IDs %v have two instances", round, dup)
		}
		for _, r := range sim["pets"] {
			if r.LogicalID == nil || !pets[*r.LogicalID] {
				t.Fatalf("round %d: pet %s has a logical ID never asked for since the last convergence", round, r.ID)
			}
		}
	}
	converge := func(round, n int, pets []string) {
		t.Helper()
		w.ok("apply", "-auto-approve")
		sim := simulated(t, simDir)
		var got []string
		for _, r := range sim["pets"] {
			got = append(got, *r.LogicalID)
		}
		slices.Sort(got)
		if len(sim["cattle"]) != n || !slices.Equal(got, pets) {
			t.Fatalf("round %d: after a complete apply %d cattle and pets %v; want %d and %v", round, len(sim["cattle"]), got, n, pets)
		}
	}

	applies, watches := crashRounds()
	maxCattle, pets := 2, map[string]bool{"p1": true}
	var n, kills int
	var want []string
	for round := range applies {
		n = rng.IntN(7)
		want = nil
		for _, p := range allPets {
			if rng.IntN(2) == 0 {
				want = append(want, p)
			}
		}
		if len(want) == 0 { // a group of pets needs a logical ID
			want = []string{allPets[rng.IntN(len(allPets))]}
		}
		maxCattle = max(maxCattle, n)
		for _, p := range want {
			pets[p] = true
		}
		w.writeFile("stack.hcl", hardStack(n, want))
		if w.killed(time.Duration(rng.IntN(800))*time.Millisecond, "apply", "-auto-approve") {
			kills++
		}
		check(round, maxCattle, pets)
		if round%4 == 3 {
			converge(round, n, want)
			maxCattle, pets = n, map[string]bool{}
			for _, p := range want {
				pets[p] = true
			}
		}
	}
	converge(applies, n, want)

	for round := range watches {
		// Work for the watch: instances removed behind its back.
		cattle := simulated(t, simDir)["cattle"]
		for _, r := range cattle[:min(2, len(cattle))] {
			if err := os.Remove(filepath.Join(simDir, "instances", "compute", r.ID+".json")); err != nil {
				t.Fatal(err)
			}
		}
		w.killed(time.Duration(rng.IntN(1500))*time.Millisecond, "watch", "-listen", "127.0.0.1:0", "-interval", "100ms")
		check(applies+round, n, pets)
	}
	converge(applies+watches, n, want)
	t.Logf("%d of %d applies killed before they ended, %d watches killed; the slowest providers exited %s after their infrakit",
		kills, applies, watches, slowest)
}
