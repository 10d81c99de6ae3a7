// Package promtest starts a real Prometheus server (Debian's prometheus
// package installs /usr/bin/prometheus) for tests: on 127.0.0.1 at a free
// port, with its storage in a temporary directory, scraping every second
// the targets of file_sd files the test (or an infrakit enrollment) keeps,
// and stopped by its PID when the test ends. Tests wait on it with
// WaitTargets (the active targets Prometheus reports) and WaitValue (a
// query's value), polling with a generous bound, never sleeping.
//
// It is imported by tests only.
package promtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"gopkg.in/yaml.v3"
)

// Path returns the prometheus executable: the one on PATH, else where
// Debian installs it; "" when there is none.
func Path() string {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	return ""
}

// Require returns the prometheus executable. Without one it skips the
// test, except in CI (CI set), which installs Prometheus: there the test
// fails.
func Require(tb testing.TB) string {
	tb.Helper()
	if p := Path(); p != "" {
		return p
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("prometheus is not installed; .ci/run installs it (Debian's prometheus package)")
	}
	tb.Skip("prometheus is not installed (apt-get install prometheus)")
	return ""
}

// Job is the scrape job of the file_sd files: the `job` label of every
// target they list.
const Job = "infrakit"

// Config says what the Prometheus of a test scrapes.
type Config struct {
	// Files are the file_sd files (JSON target groups) the Job reads;
	// relative paths are taken from the test's working directory. They
	// need not exist yet: Prometheus notices them when they appear, and
	// every change after (it watches them, and rereads them every
	// second).
	Files []string
	// ScrapeInterval is how often targets are scraped; default 1s.
	ScrapeInterval time.Duration
	// TLS, when set, makes the server answer https only.
	TLS *TLS
}

// TLS is the certificate an https Prometheus serves.
type TLS struct {
	CertFile, KeyFile string
	// RootCAs verify the certificate, for the Server's own client.
	RootCAs *x509.CertPool
}

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL ("http://127.0.0.1:PORT").
	URL string
	// Addr is its host:port.
	Addr string
	// Dir holds its configuration, storage and log (prometheus.log).
	Dir string
	// API queries it.
	API v1.API

	http *http.Client
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // its exit status, once done
}

// startTries is how often Start picks a new port when another process took
// the one it probed before Prometheus could bind it.
const startTries = 3

// readyWithin bounds the start of Prometheus (it replays an empty WAL and
// opens its storage; a busy machine makes that slow).
const readyWithin = 60 * time.Second

// Start runs Prometheus with cfg until the test ends, and returns once it
// answers /-/ready. Its log is shown when the test fails.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	bin := Require(tb)
	dir := tb.TempDir() // before the Cleanup that stops the server: removed after it
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = time.Second
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := writeConfig(configFile, cfg); err != nil {
		tb.Fatal(err)
	}
	args := []string{"--config.file=" + configFile, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--log.level=info"}
	if cfg.TLS != nil {
		webConfig := filepath.Join(dir, "web.yml")
		if err := writeWebConfig(webConfig, cfg.TLS); err != nil {
			tb.Fatal(err)
		}
		args = append(args, "--web.config.file="+webConfig)
	}
	logFile := filepath.Join(dir, "prometheus.log")
	var lastErr error
	for range startTries {
		s, err := start(bin, dir, logFile, args, cfg.TLS)
		if err == nil {
			tb.Cleanup(func() {
				if err := s.Stop(); err != nil {
					tb.Error(err)
				}
				if tb.Failed() {
					tb.Logf("prometheus log (%s):\n%s", logFile, tail(logFile))
				}
			})
			return s
		}
		lastErr = err
		if !strings.Contains(tail(logFile), "address already in use") {
			break
		}
	}
	tb.Fatalf("%v\n%s", lastErr, tail(logFile))
	return nil
}

// start runs one attempt at a fresh free port.
func start(bin, dir, logFile string, args []string, tlsCfg *TLS) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(bin, append(args, "--web.listen-address="+addr)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{URL: "http://" + addr, Addr: addr, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		s.URL = "https://" + addr
		tr.TLSClientConfig = &tls.Config{RootCAs: tlsCfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	s.http = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c, err := api.NewClient(api.Config{Address: s.URL, Client: s.http})
	if err != nil {
		_ = s.Stop()
		return nil, err
	}
	s.API = v1.NewAPI(c)
	if err := s.waitReady(); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("start %s at %s: %w", bin, addr, err)
	}
	return s, nil
}

// waitReady polls /-/ready until it answers 200, the process exits, or
// readyWithin passes.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyWithin)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		resp, err := s.http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s (last: %v)", readyWithin, errOrStatus(resp, err))
		}
		select {
		case <-s.done:
			return fmt.Errorf("prometheus exited before it was ready: %v", s.err)
		case <-time.After(pause):
		}
	}
}

func errOrStatus(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// stopWait is how long Stop waits for Prometheus to exit after SIGTERM
// (it flushes its head block), and again after SIGKILL.
const stopWait = 30 * time.Second

// Stop stops the server by its PID: SIGTERM, then SIGKILL if it is still
// running after a while; it returns once the process is reaped. Stopping
// a stopped server does nothing.
func (s *Server) Stop() error {
	s.http.CloseIdleConnections()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-s.done:
			return nil
		default:
		}
		_ = s.cmd.Process.Signal(sig) // fails only when it has exited already
		select {
		case <-s.done:
			return nil
		case <-time.After(stopWait):
		}
	}
	return fmt.Errorf("prometheus (pid %d) still runs after SIGKILL", s.cmd.Process.Pid)
}

// Targets lists the active targets of the Job.
func (s *Server) Targets(ctx context.Context) ([]v1.ActiveTarget, error) {
	r, err := s.API.Targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("prometheus targets: %w", err)
	}
	var out []v1.ActiveTarget
	for _, t := range r.Active {
		if t.ScrapePool == Job {
			out = append(out, t)
		}
	}
	return out, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeConfig writes prometheus.yml: the Job reading cfg.Files.
func writeConfig(file string, cfg Config) error {
	files := make([]string, len(cfg.Files))
	for i, f := range cfg.Files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		files[i] = abs
	}
	interval := duration(cfg.ScrapeInterval)
	doc := map[string]any{
		"global": map[string]any{
			"scrape_interval":     interval,
			"scrape_timeout":      interval,
			"evaluation_interval": interval,
		},
	}
	if len(files) > 0 { // Prometheus refuses a file_sd config without files
		doc["scrape_configs"] = []any{map[string]any{
			"job_name": Job,
			"file_sd_configs": []any{map[string]any{
				"files":            files,
				"refresh_interval": "1s",
			}},
		}}
	}
	return writeYAML(file, doc)
}

func writeWebConfig(file string, t *TLS) error {
	return writeYAML(file, map[string]any{
		"tls_server_config": map[string]any{"cert_file": t.CertFile, "key_file": t.KeyFile},
	})
}

func writeYAML(file string, doc any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, b, 0o644)
}

// duration writes d as Prometheus durations are written ("1s", "1500ms").
func duration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// tail is the end of a log file, for failure messages.
func tail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
