package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/tags"
)

// The helpers of TestScaleOutDocker: what it reads of each manager's
// /v1/status and /metrics (the contracts of issue 20: the "scale_out"
// object, infrakit_* metrics), and a sampler of the shared simulator store
// and of the managers' claims. What it reads of etcd is in
// scaleout_etcd_test.go.

// soObject is one object of a manager's scale_out.objects.
type soObject struct {
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	Owner         string `json:"owner"`
	OwnerIdentity string `json:"owner_identity"`
	Mine          bool   `json:"mine"`
}

// soInfo is the "scale_out" object of /v1/status.
type soInfo struct {
	Member  string `json:"member"`
	Members []struct {
		ID       string `json:"id"`
		Identity string `json:"identity"`
	} `json:"members"`
	LeasesHeld int        `json:"leases_held"`
	Objects    []soObject `json:"objects"`
}

// soStatus is the part of GET /v1/status the scale-out test reads, with
// when the request was sent and its answer received: the status held at
// some moment in between.
type soStatus struct {
	Identity string  `json:"identity"`
	ScaleOut *soInfo `json:"scale_out"`
	Groups   []struct {
		Name  string `json:"name"`
		Owner string `json:"owner"`
	} `json:"groups"`

	m          *haManager
	err        error
	sent, recv time.Time
}

// readSoStatus reads m's status at url with client.
func readSoStatus(client *http.Client, m *haManager, url string) soStatus {
	s := soStatus{m: m, sent: time.Now()}
	s.err = getJSON(client, url, &s)
	s.recv = time.Now()
	if s.err == nil && s.ScaleOut == nil {
		s.err = fmt.Errorf("GET %s: no scale_out object", url)
	}
	return s
}

// soStatus reads m's status.
func (c *haCluster) soStatus(m *haManager) soStatus {
	return readSoStatus(c.client, m, m.status)
}

// mine is the groups s says this manager owns, sorted.
func (s soStatus) mine() []string {
	var out []string
	if s.err != nil {
		return nil
	}
	for _, o := range s.ScaleOut.Objects {
		if o.Kind == "group" && o.Mine {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (s soStatus) String() string {
	if s.err != nil {
		return fmt.Sprintf("%s: %v", s.m.host, s.err)
	}
	return fmt.Sprintf("%s: member %s of %d, leases_held %d, mine %v", s.m.host, s.ScaleOut.Member,
		len(s.ScaleOut.Members), s.ScaleOut.LeasesHeld, s.mine())
}

// soRound is the status of some managers, read one after another.
type soRound []soStatus

func (r soRound) String() string {
	parts := make([]string, len(r))
	for i, s := range r {
		parts[i] = s.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func (c *haCluster) soRound(ms []*haManager) soRound {
	r := make(soRound, len(ms))
	for i, m := range ms {
		r[i] = c.soStatus(m)
	}
	return r
}

// soBalanced reports whether the round shows a settled share of groups
// (names) among exactly its managers: each answers and lists them all as
// members, every group is owned (mine:true) by exactly one of them and
// named with that owner in every view, and each owns its even share ±1.
func soBalanced(r soRound, groups []string) bool {
	owner := map[string]string{}
	for _, s := range r {
		if s.err != nil || len(s.ScaleOut.Members) != len(r) {
			return false
		}
		mine := s.mine()
		lo, hi := len(groups)/len(r), (len(groups)+len(r)-1)/len(r)
		if len(mine) < lo-1 || len(mine) > hi+1 {
			return false
		}
		for _, g := range mine {
			if owner[g] != "" {
				return false
			}
			owner[g] = s.ScaleOut.Member
		}
	}
	if len(owner) != len(groups) {
		return false
	}
	for _, s := range r {
		for _, o := range s.ScaleOut.Objects {
			if o.Kind == "group" && o.Owner != owner[o.Name] {
				return false
			}
		}
	}
	return true
}

// soWait reads the managers' status every 50 ms until done says they got
// there, and fails the test after haWait; check (if not nil) sees every
// round for what the phase forbids.
func (c *haCluster) soWait(ms []*haManager, what string, check func(soRound), done func(soRound) bool) soRound {
	c.t.Helper()
	deadline := time.Now().Add(haWait)
	for {
		r := c.soRound(ms)
		if check != nil {
			check(r)
		}
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %s for %s; last round: %s", haWait, what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricsURL is m's /metrics on the admin network.
func (m *haManager) metricsURL() string {
	return strings.TrimSuffix(m.status, "/v1/status") + "/metrics"
}

// soMetrics reads m's /metrics.
func (c *haCluster) soMetrics(m *haManager) (promText, error) {
	resp, err := c.client.Get(m.metricsURL())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", m.metricsURL(), resp.Status)
	}
	return promText(b), nil
}

// promText is a page in Prometheus's text exposition format.
type promText string

var promLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// sum adds the samples of the metric name whose labels include every pair
// of want, and says whether there was any.
func (p promText) sum(name string, want map[string]string) (float64, bool) {
	total, found := 0.0, false
	for _, line := range strings.Split(string(p), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		labels := map[string]string{}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			for _, m := range promLabel.FindAllStringSubmatch(rest[1:end], -1) {
				labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		}
		if !subset(want, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		total, found = total+v, true
	}
	return total, found
}

// byLabel is the samples of the metric name by the value of its label.
func (p promText) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(string(p), "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		for _, m := range promLabel.FindAllStringSubmatch(rest[:end], -1) {
			if m[1] != label {
				continue
			}
			if fields := strings.Fields(rest[end+1:]); len(fields) > 0 {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
					out[m[2]] += v
				}
			}
		}
	}
	return out
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// soSampler counts the shared store's instances of each group every 10 ms
// and reads the claims of the managers it follows every 50 ms, in
// goroutines it owns.
type soSampler struct {
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	peak    map[string]int // the most instances of each group at once
	samples int
	reads   map[*haManager][]soStatus // every status read, in order
	err     error
	// client and urls are whom the claims sampler reads (follow).
	client *http.Client
	urls   map[*haManager]string
}

func (c *haCluster) startSoSampler() *soSampler {
	s := &soSampler{done: make(chan struct{}), peak: map[string]int{}, reads: map[*haManager][]soStatus{}}
	dir := c.instanceDir()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.every(10*time.Millisecond, func() {
			counts, err := groupCounts(dir)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil && s.err == nil {
				s.err = err
			}
			s.samples++
			for g, n := range counts {
				s.peak[g] = max(s.peak[g], n)
			}
		})
	}()
	go func() {
		defer s.wg.Done()
		s.every(50*time.Millisecond, func() {
			s.mu.Lock()
			client, urls := s.client, maps.Clone(s.urls)
			s.mu.Unlock()
			// The managers are read at once, so that a slow one (a
			// killed one answers nothing) delays no other's reads.
			var wg sync.WaitGroup
			for m, url := range urls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Failed reads are kept too: they claim nothing, so a
					// manager's claims before its death and after its
					// restart are never taken for one long claim.
					st := readSoStatus(client, m, url)
					s.mu.Lock()
					s.reads[m] = append(s.reads[m], st)
					s.mu.Unlock()
				}()
			}
			wg.Wait()
		})
	}()
	return s
}

// follow has the claims sampler read the managers' status where c reads
// it now (after launchManagers, and whenever a manager's address changed).
func (s *soSampler) follow(c *haCluster) {
	urls := map[*haManager]string{}
	for _, m := range c.managers {
		urls[m] = m.status
	}
	// Its own client with a short timeout (a killed manager's address
	// answers nothing, and the other managers' reads must go on) that
	// keeps its connections (a TLS handshake a read would read less
	// often); stop closes them.
	tr := c.client.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = false
	client := &http.Client{Timeout: 500 * time.Millisecond, Transport: tr}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
	s.client, s.urls = client, urls
}

func (s *soSampler) every(d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		f()
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
	}
}

// stop ends the sampling (once) and returns what it saw.
func (s *soSampler) stop() (peak map[string]int, samples int, reads map[*haManager][]soStatus, err error) {
	s.stopOnce.Do(func() {
		close(s.done)
		s.wg.Wait()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
	return maps.Clone(s.peak), s.samples, s.reads, s.err
}

// groupCounts counts the compute instances in the simulator's store dir by
// their infrakit.group tag.
func groupCounts(dir string) (map[string]int, error) {
	ids, err := haInstanceIDs(dir)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, id := range ids {
		g, err := instanceGroup(dir, id)
		if errors.Is(err, os.ErrNotExist) {
			continue // destroyed since it was listed
		}
		if err != nil {
			return nil, err
		}
		counts[g]++
	}
	return counts, nil
}

// instanceGroup is the infrakit.group tag of the instance id in dir.
func instanceGroup(dir, id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return "", err
	}
	var rec struct {
		Tags map[string]string `json:"tags"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", fmt.Errorf("instance %s: %w", id, err)
	}
	return rec.Tags[tags.Group], nil
}

// doubleClaims finds the groups two managers claimed at once: manager X
// read as owning g before and after a read of Y that also says it owns g,
// and in every read of X in between (a failed read claims nothing), so
// that X held g throughout and both held it at the moment of Y's read. A read's claim holds at some moment
// between its sending and its answer, so only reads whose windows are
// strictly ordered count: a handover between two reads is no overlap.
func doubleClaims(reads map[*haManager][]soStatus) []string {
	var out []string
	for x, xs := range reads {
		owns := make([]map[string]bool, len(xs))
		for i, xr := range xs {
			owns[i] = map[string]bool{}
			for _, g := range xr.mine() {
				owns[i][g] = true
			}
		}
		for y, ys := range reads {
			if x == y {
				continue
			}
			for _, yr := range ys {
				// xs are read one after another: sent and recv both grow.
				first := sort.Search(len(xs), func(i int) bool { return !xs[i].recv.Before(yr.sent) }) - 1
				last := sort.Search(len(xs), func(i int) bool { return xs[i].sent.After(yr.recv) })
				if first < 0 || last >= len(xs) {
					continue
				}
				for _, g := range yr.mine() {
					held := true
					for i := first; i <= last && held; i++ {
						held = owns[i][g]
					}
					if held {
						out = append(out, fmt.Sprintf("%s said it owned %s in reads answered at %s and sent at %s; %s said so in between, in a read sent at %s and answered at %s",
							x.host, g, clock(xs[first].recv), clock(xs[last].sent), y.host, clock(yr.sent), clock(yr.recv)))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
