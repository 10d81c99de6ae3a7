package e2e

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeBeforeBreak shows, with a real HAProxy in front of real webserver
// processes (testdata/real's providers, mbbStack's six members), what issue
// 13 asks of every way a member leaves: while clients send requests through
// HAProxy the whole time, each on a new connection,
//
//   - `group scale web 1` from 6,
//   - `group destroy-instances web` of 2,
//   - a rolling update of the 6 (`apply` of a changed environment variable,
//     max_parallel = 2, max_unavailable = 2),
//   - a heal by `infrakit watch` of a member killed with SIGKILL,
//   - `group destroy web` (a spare group keeps the load balancer serving),
//
// fail no request, and an independent poller (mbbPoller: the process
// provider's records and /proc, then HAProxy's runtime API and the haproxy
// provider's record) never finds an instance terminating or gone while it
// is still registered, except the one the heal kills, which watch
// deregisters in the very pass that re-creates it. After each scenario
// the group's members are HAProxy's backends and the exports file's
// entries; during the roll HAProxy has at least 4 live members up at every
// sample.
//
// HAProxy's retries (retries 3, redispatch, retry-on) stay configured, as
// the product ships them, but nothing leans on them: the poller judges the
// order, and in the four scenarios where members only leave HAProxy must
// count no retried or redispatched connection at all. Only the heal needs
// them, for the requests the killed member had in flight or was sent
// before watch took it out.
func TestMakeBeforeBreak(t *testing.T) {
	t.Parallel()
	s := newRealStack(t)
	s.writeFile("stack.hcl", mbbStack(s.lbPort, "1", false))
	s.init()
	s.ok("apply", "-auto-approve")
	members := s.converged(6, 60*time.Second, "after apply")
	s.mbbWaitServing(6, "after apply")
	r := &mbbRun{s: s, poll: s.mbbStartPoller()}

	// 1. Scale 6 → 1: five members deregistered, drained, destroyed.
	r.leave("scale 6 → 1", func() {
		res := s.ok("group", "scale", "web", "1")
		t.Logf("group scale web 1: %s", mbbLastLine(res.stdout))
		kept := s.converged(1, 30*time.Second, "after scale 6 → 1")
		if !slices.Contains(members, kept[0]) {
			t.Errorf("scale 6 → 1 kept %s, not one of the members %v", kept[0], members)
		}
	})

	r.scenario("scale 1 → 6 (setup)", func() {
		s.ok("group", "scale", "web", "6")
		members = s.converged(6, 60*time.Second, "after scale 1 → 6")
		s.mbbWaitServing(6, "after scale 1 → 6")
	})

	// 2. destroy-instances of 2 of the 6.
	r.leave("destroy-instances 2", func() {
		gone := members[:2]
		res := s.ok("group", "destroy-instances", "web", gone[0], gone[1])
		t.Logf("group destroy-instances web %s %s: %s", gone[0], gone[1], mbbLastLine(res.stdout))
		left := s.converged(4, 30*time.Second, "after destroy-instances")
		if want := realWithout(members, gone...); !slices.Equal(left, want) {
			t.Errorf("destroy-instances of %v left %v; want %v", gone, left, want)
		}
	})

	r.scenario("scale 4 → 6 (setup)", func() {
		s.ok("group", "scale", "web", "6")
		members = s.converged(6, 60*time.Second, "after scale 4 → 6")
		s.mbbWaitServing(6, "after scale 4 → 6")
	})

	// 3. A rolling update of the 6, two at a time, by apply.
	f := r.leave("rolling update of 6", func() {
		s.writeFile("stack.hcl", mbbStack(s.lbPort, "2", false))
		res := s.ok("apply", "-auto-approve")
		t.Logf("apply (RELEASE 1 → 2): %s", mbbLastLine(res.stdout))
		now := s.converged(6, 60*time.Second, "after the rolling update")
		if old := realWithout(now, realNewcomers(members, now)...); len(old) != 0 {
			t.Errorf("after the rolling update %v are still members", old)
		}
		recs, err := mbbRecords(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range now {
			if got := recs[id].Properties.Env["RELEASE"]; got != "2" {
				t.Errorf("after the rolling update %s runs RELEASE=%q, want 2", id, got)
			}
		}
		members = now
		s.mbbWaitServing(6, "after the rolling update")
	})
	if f.minServing < 4 {
		t.Errorf("rolling update: at one sample HAProxy served only %d live members; max_unavailable = 2 of 6 allows no fewer than 4", f.minServing)
	}
	if f.maxRegistered > 8 || f.maxPresent > 8 {
		t.Errorf("rolling update: at one sample %d instances were registered, %d existed; max_parallel = 2 allows 6 + 2", f.maxRegistered, f.maxPresent)
	}

	// The poller finds a violation when there is one: a member killed while
	// no watch runs stays registered with its process gone. apply then
	// replaces it.
	r.selfCheck(members[len(members)-1])
	members = s.converged(6, 60*time.Second, "after the poller's self-check")
	s.mbbWaitServing(6, "after the poller's self-check")

	// 4. watch heals a member killed with SIGKILL.
	p := s.startWatch(nil, "-interval", "2s")
	var passes int
	within(t, 60*time.Second, "watch seeing 6 healthy members", func() bool {
		st := p.status()
		passes = st.Passes
		return len(st.Groups) == 1 && st.Groups[0].Actual == 6 && st.Groups[0].Health.Healthy == 6
	})
	// Two passes more, which find nothing to do: the syncs watch starts
	// with, and after its first passes, are over by then, and nothing
	// starts another (mbbStack's sync_interval is 10m) until the heal's
	// pass. The kill then lands on an idle watch.
	within(t, 60*time.Second, "watch passing twice more", func() bool { return p.status().Passes >= passes+2 })
	victim := members[0]
	var replacement string
	r.scenario("watch heal of SIGKILL", func() {
		rec := s.records()[victim]
		r.poll.exemptFrom(victim)
		killed := time.Now()
		if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Until the provider has seen the death, the six members it lists
		// (the victim among them) already equal the backends and exports:
		// converged must not take that for the heal.
		within(t, 60*time.Second, "the killed member gone from the provider's records", func() bool {
			return !slices.Contains(s.alive(), victim)
		})
		now := s.converged(6, 60*time.Second, "after the heal")
		if slices.Contains(now, victim) {
			t.Fatalf("the killed %s is still a member: %v", victim, now)
		}
		replacement = realNewcomers(members, now)[0]
		members = now
		t.Logf("SIGKILL of %s (pid %d): %s in its place, backends and exports following, %s after the kill",
			victim, rec.PID, replacement, time.Since(killed).Round(time.Millisecond))
		s.mbbWaitServing(6, "after the heal")
	})
	r.checkHealPass(p, victim, replacement)
	if code, took := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM (%s)", code, took)
	}

	// 5. group destroy, with a spare group behind the same load balancer.
	var spare []string
	r.scenario("add a spare group (setup)", func() {
		s.writeFile("stack.hcl", mbbStack(s.lbPort, "2", true))
		s.ok("apply", "-auto-approve")
		spare = r.followed(6)
		s.mbbWaitServing(8, "with the spare group")
	})
	r.leave("group destroy", func() {
		res := s.ok("group", "destroy", "web", "-auto-approve")
		t.Logf("group destroy web: %s", mbbLastLine(res.stdout))
		r.followed(0)
		if got := s.mbbAlive("spare"); !slices.Equal(got, spare) {
			t.Errorf("group destroy web: the spare group went from %v to %v", spare, got)
		}
		s.mbbWaitServing(2, "after group destroy")
	})
	for _, id := range members {
		if st, ok := r.poll.state(id); !ok || st.destroyed.IsZero() {
			t.Errorf("group destroy: the poller never saw %s destroyed", id)
		}
	}

	t.Log("make before break, scenario by scenario:")
	for _, f := range r.figs {
		t.Logf("  %s", f)
	}
	r.poll.end()
	for _, e := range r.poll.errs {
		t.Errorf("poller: %s", e)
	}
}

// followed waits until the web group has webs live members, the spare
// group 2, HAProxy's backends (lb backends ls) are exactly both groups'
// members and the exports file's entries exactly web's. It returns the
// spare group's members.
func (r *mbbRun) followed(webs int) []string {
	s := r.s
	s.t.Helper()
	var web, spare, backends []string
	took := within(s.t, 60*time.Second, "web and spare members as backends, web's in the exports file", func() bool {
		web, spare = s.mbbAlive("web"), s.mbbAlive("spare")
		if len(web) != webs || len(spare) != 2 {
			return false
		}
		if !slices.Equal(web, s.exported()) {
			return false
		}
		backends = s.backends("web")
		all := append(slices.Clone(web), spare...)
		slices.Sort(all)
		return slices.Equal(all, backends)
	})
	s.t.Logf("web %v, spare %v: backends %v and exports equal to them after %s", web, spare, backends, took.Round(time.Millisecond))
	return spare
}

// checkHealPass checks, in watch's events, that the pass that re-created
// the killed member also deregistered it: the events of one pass come in
// order — the replacement announced ("replaced", reason vanished), its
// provision ("created"), then what the pass did to the followers
// ("synced", with the group's name; a sync of its own has none) — and the
// first such line after the announcement says a backend was deregistered.
func (r *mbbRun) checkHealPass(p *watchProc, victim, replacement string) {
	t := r.s.t
	t.Helper()
	evs := p.mbbEvents()
	dump := func() string {
		var b strings.Builder
		for _, e := range evs {
			b.WriteString("\n  " + e.String())
		}
		return b.String()
	}
	announced := slices.IndexFunc(evs, func(e mbbEvent) bool {
		return e.Kind == "replaced" && e.Instance == victim && e.Reason == "vanished"
	})
	if announced < 0 {
		t.Errorf("heal: no replaced/vanished event for %s:%s", victim, dump())
		return
	}
	rest := evs[announced+1:]
	synced := slices.IndexFunc(rest, func(e mbbEvent) bool { return e.Kind == "synced" && e.Group == "web" })
	if synced < 0 {
		t.Errorf("heal: the pass that re-created %s reported nothing done to its followers:%s", victim, dump())
		return
	}
	if !strings.Contains(rest[synced].Message, "1 backend deregistered") {
		t.Errorf("heal: the pass that re-created %s did not deregister it: %s%s", victim, rest[synced], dump())
	}
	if !slices.ContainsFunc(rest[:synced], func(e mbbEvent) bool { return e.Kind == "created" && e.Instance == replacement }) {
		t.Errorf("heal: %s was not created by the pass that announced the replacement of %s:%s", replacement, victim, dump())
	}
	st, _ := r.poll.state(victim)
	nst, _ := r.poll.state(replacement)
	t.Logf("heal: one pass announced the replacement of %s, created %s and deregistered %s (%s); the poller saw %s gone at +0, last registered at %+dms, %s first registered at %+dms",
		victim, replacement, victim, rest[synced].Message, victim,
		st.lastRegistered.Sub(st.destroyed).Milliseconds(), replacement, nst.firstRegistered.Sub(st.destroyed).Milliseconds())
}

// selfCheck kills victim, registered and with no watch running, and waits
// for the poller to report it destroyed while registered; then apply
// replaces it, and deregisters it.
func (r *mbbRun) selfCheck(victim string) {
	s, t := r.s, r.s.t
	t.Helper()
	r.poll.begin("poller self-check")
	rec := s.records()[victim]
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var found string
	took := within(t, 30*time.Second, "the poller reporting the killed member destroyed while registered", func() bool {
		ph := r.poll.current()
		i := slices.IndexFunc(ph.violations, func(v string) bool { return strings.HasPrefix(v, victim+" ") })
		if i >= 0 {
			found = ph.violations[i]
		}
		return i >= 0
	})
	t.Logf("poller self-check: SIGKILL of %s with no watch running; reported after %s: %s", victim, took.Round(time.Millisecond), found)
	res := s.ok("apply", "-auto-approve")
	t.Logf("poller self-check: apply: %s", mbbLastLine(res.stdout))
}

// mbbLastLine is the last non-empty line of out.
func mbbLastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
