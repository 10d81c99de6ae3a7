package systemd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// unitName is the file the package ships, and the name systemd-analyze
	// gives the unit in what it prints about it.
	unitName = "infrakit-watch.service"
	// installedBinary is where the unit expects infrakit.
	installedBinary = "/usr/local/bin/infrakit"
	// watchStopBudget is how long watch takes at most to exit after
	// SIGTERM (`infrakit watch -help`: "exit 0 within 30s").
	watchStopBudget = 30 * time.Second
)

// binDir is where infrakitBinary builds; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var build struct {
	once sync.Once
	path string
	err  error
}

// infrakitBinary builds infrakit from this tree once for the package's
// tests and returns its path.
func infrakitBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "infrakit-systemd-test-")
		if err != nil {
			build.err = err
			return
		}
		binDir = dir
		path := filepath.Join(dir, "infrakit")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/infrakit/infrakit").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// TestUnitVerifies runs `systemd-analyze verify` on the unit, with
// ExecStart pointing at an infrakit built from this tree (verify rejects a
// unit whose binary does not exist). Any line it prints about the unit (an
// unknown or misspelt key, a value it cannot parse, a missing executable)
// fails the test, as does a non-zero exit; lines about other units of the
// machine are only logged.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (it is in Debian's systemd package, which .ci/run installs)")
	}
	bin := infrakitBinary(t)
	text := readUnit(t)
	var n int
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="+installedBinary+" "); ok {
			// "%" starts a specifier in unit files.
			line = "ExecStart=" + strings.ReplaceAll(bin, "%", "%%") + " " + rest
			n++
		}
		b.WriteString(line)
	}
	if n != 1 {
		t.Fatalf("%s: %d lines start with ExecStart=%s; want 1", unitName, n, installedBinary)
	}
	lines, err := verify(t, analyze, b.String())
	for _, l := range lines {
		t.Errorf("systemd-analyze verify: %s", l)
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v", err)
	}

	// The check itself: a misspelt key, which verify only warns about (and
	// exits 0), must be seen, or the test above proves nothing (verify's
	// messages going to the journal instead of stderr, say).
	broken := strings.Replace(b.String(), "[Service]\n", "[Service]\nKilMode=mixed\n", 1)
	if lines, _ := verify(t, analyze, broken); len(lines) == 0 {
		t.Errorf("systemd-analyze verify printed nothing about %s with a misspelt key; the check above cannot be trusted", unitName)
	}
}

// verify writes text as the unit into a directory of its own, runs
// systemd-analyze verify on it, and returns the lines of its output that
// name the unit; it logs the others. err is a failed or non-zero exit.
func verify(t *testing.T, analyze, text string) (lines []string, err error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), unitName)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, analyze, "verify", "--man=no", path)
	cmd.Env = append(os.Environ(),
		// Warnings and errors (and notices and info) on stderr, plain,
		// whatever the environment says: under a service manager the
		// default target would be the journal.
		"SYSTEMD_LOG_LEVEL=info",
		"SYSTEMD_LOG_TARGET=console",
		"SYSTEMD_LOG_COLOR=0",
		"SYSTEMD_LOG_LOCATION=0",
		"SYSTEMD_PAGER=",
	)
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.Contains(l, unitName):
			lines = append(lines, l)
		case l != "":
			t.Logf("systemd-analyze verify (not about %s): %s", unitName, l)
		}
	}
	return lines, err
}

// TestUnitRunsWatch checks what the unit runs against the infrakit built
// from this tree: ExecStart runs `infrakit watch` with flags infrakit has,
// in the directory the unit gives it; reload is SIGHUP; stop is SIGTERM to
// watch alone, with time for watch's graceful stop.
func TestUnitRunsWatch(t *testing.T) {
	u, err := parseUnit(readUnit(t))
	if err != nil {
		t.Fatalf("%s: %v", unitName, err)
	}
	one := func(section, key string) string {
		t.Helper()
		v := u[section][key]
		if len(v) != 1 {
			t.Errorf("%s: [%s] %s is set %d times (%q); want once", unitName, section, key, len(v), v)
			return ""
		}
		return v[0]
	}

	// ExecStart: the binary, global flags, "watch", watch's flags.
	start := strings.Fields(one("Service", "ExecStart"))
	if len(start) == 0 || start[0] != installedBinary {
		t.Fatalf("%s: ExecStart=%q; want %s first", unitName, strings.Join(start, " "), installedBinary)
	}
	var global, watchFlags []string
	cmdAt := -1
	for i, a := range start[1:] {
		if !strings.HasPrefix(a, "-") {
			cmdAt = i + 1
			break
		}
		global = append(global, a)
	}
	if cmdAt < 0 || start[cmdAt] != "watch" {
		t.Fatalf("%s: ExecStart=%q does not run the watch command", unitName, strings.Join(start, " "))
	}
	for _, a := range start[cmdAt+1:] {
		if strings.HasPrefix(a, "-") {
			watchFlags = append(watchFlags, a)
		}
	}
	bin := infrakitBinary(t)
	checkFlags(t, bin, global, "-help")
	checkFlags(t, bin, watchFlags, "watch", "-help")

	// The directory watch runs in: -chdir, WorkingDirectory and the
	// StateDirectory systemd creates, writable under ProtectSystem=strict.
	var chdir string
	for _, a := range global {
		if v, ok := strings.CutPrefix(a, "-chdir="); ok {
			chdir = v
		}
	}
	wd := one("Service", "WorkingDirectory")
	if chdir != wd {
		t.Errorf("%s: ExecStart has -chdir=%s, WorkingDirectory=%s; want the same directory", unitName, chdir, wd)
	}
	if sd := one("Service", "StateDirectory"); "/var/lib/"+sd != wd {
		t.Errorf("%s: StateDirectory=%s creates /var/lib/%s, not the working directory %s", unitName, sd, sd, wd)
	}
	if !slices.Contains(strings.Fields(strings.Join(u["Service"]["ReadWritePaths"], " ")), wd) {
		t.Errorf("%s: ReadWritePaths=%q does not hold the working directory %s", unitName, u["Service"]["ReadWritePaths"], wd)
	}
	if user := one("Service", "User"); user == "" || user == "root" {
		t.Errorf("%s: User=%q; want an unprivileged user", unitName, user)
	}

	// systemctl reload sends watch SIGHUP.
	reload := strings.Fields(one("Service", "ExecReload"))
	if len(reload) != 3 || filepath.Base(reload[0]) != "kill" || !filepath.IsAbs(reload[0]) ||
		(reload[1] != "-HUP" && reload[1] != "-SIGHUP") || (reload[2] != "$MAINPID" && reload[2] != "${MAINPID}") {
		t.Errorf("%s: ExecReload=%q; want /bin/kill -HUP $MAINPID", unitName, strings.Join(reload, " "))
	}

	// Stopping: SIGTERM to watch alone. control-group would send it to
	// the providers at the same moment, and go-plugin servers die on it,
	// failing the calls in flight that watch waits for; mixed still
	// SIGKILLs what is left of the cgroup once watch has exited.
	if km := one("Service", "KillMode"); km != "mixed" {
		t.Errorf("%s: KillMode=%s; want mixed", unitName, km)
	}
	if ks := one("Service", "KillSignal"); ks != "SIGTERM" {
		t.Errorf("%s: KillSignal=%s; want SIGTERM", unitName, ks)
	}
	if ty := one("Service", "Type"); ty != "simple" {
		t.Errorf("%s: Type=%s; want simple (watch does not fork or notify)", unitName, ty)
	}
	ts := one("Service", "TimeoutStopSec")
	if d, err := parseSeconds(ts); err != nil {
		t.Errorf("%s: TimeoutStopSec=%s: %v", unitName, ts, err)
	} else if d <= watchStopBudget {
		t.Errorf("%s: TimeoutStopSec=%s; want more than the %s watch may take to stop after SIGTERM", unitName, ts, watchStopBudget)
	}
}

// helpFlag matches a flag at the start of a line of an infrakit help text
// ("  -interval D", "  -chdir=DIR").
var helpFlag = regexp.MustCompile(`(?m)^\s+(-[a-z][a-z0-9-]*)`)

// checkFlags fails the test for each of flags ("-name", "-name=value")
// that the help `bin helpArgs...` prints does not list.
func checkFlags(t *testing.T, bin string, flags []string, helpArgs ...string) {
	t.Helper()
	if len(flags) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, helpArgs...).CombinedOutput()
	if err != nil {
		t.Fatalf("infrakit %s: %v\n%s", strings.Join(helpArgs, " "), err, out)
	}
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		if !known[name] {
			t.Errorf("%s: ExecStart names %s, which `infrakit %s` does not list", unitName, name, strings.Join(helpArgs, " "))
		}
	}
}

// parseSeconds reads a systemd time span of the forms the unit uses: a
// number of seconds, or a Go duration ("45s", "1m30s").
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

func readUnit(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(unitName)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// unit is a unit file read as systemd reads it, simply: section → key →
// the values assigned, in order.
type unit map[string]map[string][]string

// parseUnit reads a unit file: [Section] headers, Key=Value lines, comment
// lines starting with # or ;, and lines continued by a trailing backslash.
// As in systemd, an empty assignment resets the key's list.
func parseUnit(text string) (unit, error) {
	u := unit{}
	var section string
	var pending string // a continued line so far
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") || (line == "" && pending == "") {
			continue // comments may stand inside a continued line too
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: %q: a section header without its ]", n, line)
			}
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is neither a section, an assignment nor a comment", n, line)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q before the first section", n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if value == "" {
			u[section][key] = nil
			continue
		}
		u[section][key] = append(u[section][key], value)
	}
	if pending != "" {
		return nil, fmt.Errorf("the last line ends with a backslash")
	}
	return u, sc.Err()
}
