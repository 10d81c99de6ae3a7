package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space whatever the kernel's HZ.
const userHZ = 100

// benchWatch is `infrakit watch` running for a benchmark.
type benchWatch struct {
	cmd      *exec.Cmd
	pid      int
	addr     string
	token    string // the API token ("" for a baseline that has none)
	stderr   *bytes.Buffer
	stopOnce sync.Once
}

var serving = regexp.MustCompile(`serving http://([^/ ]+)/v1/status \(pid (\d+)\)`)

// startWatch runs `infrakit watch` with default settings (the API on a free
// port) in dir and waits for its first pass.
func startWatch(t *testing.T, bin, dir string) *benchWatch {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "infrakit"), "watch", "-listen", "127.0.0.1:0")
	// INFRAKIT_BENCH_WATCH_ENV: variables for this watch alone, to
	// profile it and its providers without profiling the commands
	// around it.
	cmd.Dir, cmd.Env = dir, append(cleanEnv(), strings.Fields(os.Getenv("INFRAKIT_BENCH_WATCH_ENV"))...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &benchWatch{cmd: cmd, stderr: new(bytes.Buffer)}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stop)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			w.addr = m[1]
			w.pid, _ = strconv.Atoi(m[2])
			break
		}
	}
	if w.addr == "" {
		t.Fatalf("watch did not start:\n%s", w.stderr)
	}
	if token, err := os.ReadFile(filepath.Join(dir, ".infrakit", "api-token")); err == nil {
		w.token = strings.TrimSpace(string(token))
	}
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(discard{}) }() // drain until exit
	// Generous: the first pass over 100,000 instances on a busy machine.
	deadline := time.Now().Add(10 * time.Minute)
	for w.passes(t) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no pass within 10 minutes:\n%s", w.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return w
}

// stop ends watch with SIGTERM and waits for it; later calls do nothing.
func (w *benchWatch) stop() {
	w.stopOnce.Do(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		_ = w.cmd.Wait()
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (w *benchWatch) passes(t *testing.T) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+w.addr+"/v1/status", nil)
	if err != nil {
		return 0
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var s struct {
		Passes int `json:"passes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Passes
}

// instanceCount counts the simulator's compute instance files in dir.
func instanceCount(t *testing.T, dir string) int {
	t.Helper()
	files, err := os.ReadDir(filepath.Join(dir, ".infrakit", "simulator", "instances", "compute"))
	if err != nil {
		t.Fatal(err)
	}
	return countJSON(files)
}

// idleWindows is the median of windows measured one after the other (by
// total CPU), carrying every window's total.
func idleWindows(all []usage) usage {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b usage) int { return cmp.Compare(a.cpu(), b.cpu()) })
	median := sorted[len(sorted)/2]
	for _, u := range all {
		median.totals = append(median.totals, u.cpu())
	}
	return median
}

// usage is the CPU and memory of watch and each of its children over a
// window.
type usage struct {
	window time.Duration
	procs  []procUsage
	// totals are the CPU of every window measured, when this usage is the
	// median of several.
	totals []float64
}

type procUsage struct {
	pid   int
	name  string
	ticks int64 // utime+stime over the window
	rss   int64 // bytes, at the end
}

func (u usage) cpu() float64 {
	var ticks int64
	for _, p := range u.procs {
		ticks += p.ticks
	}
	return 100 * float64(ticks) / userHZ / u.window.Seconds()
}

// each lists the CPU of every window measured, in order.
func (u usage) each() string {
	parts := make([]string, len(u.totals))
	for i, c := range u.totals {
		parts[i] = fmt.Sprintf("%.2f%%", c)
	}
	return strings.Join(parts, " ")
}

func (u usage) rss() int64 {
	var sum int64
	for _, p := range u.procs {
		sum += p.rss
	}
	return sum
}

// byProcess is each process's CPU and RSS on one line.
func (u usage) byProcess() string {
	parts := make([]string, len(u.procs))
	for i, p := range u.procs {
		parts[i] = fmt.Sprintf("%s %.2f%% %s", p.name, 100*float64(p.ticks)/userHZ/u.window.Seconds(), mib(p.rss))
	}
	return strings.Join(parts, ", ")
}

func (u usage) rows(tw *tabwriter.Writer, settings string) {
	for _, p := range u.procs {
		fmt.Fprintf(tw, "%s\t%s (%d)\t%.2f%%\t%s\n", settings, p.name, p.pid,
			100*float64(p.ticks)/userHZ/u.window.Seconds(), mib(p.rss))
	}
	fmt.Fprintf(tw, "%s\ttotal\t%.2f%%\t%s\n", settings, u.cpu(), mib(u.rss()))
}

// idle samples watch (pid) and its children at the start and end of window.
func idle(t *testing.T, pid int, window time.Duration) usage {
	t.Helper()
	pids := append([]int{pid}, children(t, pid)...)
	start := map[int]int64{}
	for _, p := range pids {
		start[p], _ = cpuTicks(p)
	}
	time.Sleep(window)
	u := usage{window: window}
	for _, p := range pids {
		end, name := cpuTicks(p)
		u.procs = append(u.procs, procUsage{pid: p, name: name, ticks: end - start[p], rss: rssOf(p)})
	}
	return u
}

// children lists the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	out, err := childrenOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(p); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out, nil
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces): f[0] is the state, f[1] the parent, f[11] utime
// and f[12] stime.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func cpuTicks(pid int) (int64, string) {
	f := statFields(pid)
	if len(f) < 13 {
		return 0, "exited"
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st, procName(pid)
}

// procName is the base name of pid's program (comm would cut
// infrakit-provider-simulator at 15 bytes), else its comm.
func procName(pid int) string {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); args[0] != "" {
		return filepath.Base(args[0])
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(comm))
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

func joinMS(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = ms(d)
	}
	return strings.Join(parts, " ")
}
